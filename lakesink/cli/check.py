"""`lakesink check CONFIG`: validate a config file; returns its summary, ignored keys and warnings."""
from __future__ import annotations

import argparse

from lakesink.cli.output import CheckResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="validate a config file and show ignored keys and warnings")
    p.add_argument("config", help="connector config: .properties, Connect JSON or YAML")
    p.set_defaults(func=run)


def check(path: str) -> CheckResult:
    from lakesink.config import load_config

    cfg = load_config(path)
    return CheckResult(
        path=str(path), name=cfg.name, topics=list(cfg.topics), topics_regex=cfg.topics_regex,
        format=cfg.format_name, partitioner=cfg.partitioner_class, flush_size=cfg.flush_size,
        bucket=cfg.s3_bucket_name, topics_dir=cfg.topics_dir, manifest_location=cfg.manifest_location,
        ignored_keys=sorted((str(k), str(why)) for k, why in cfg.ignored_keys),  # (key, reason) pairs
        warnings=list(cfg.warnings),
    )


def run(args: argparse.Namespace, output) -> CheckResult:
    return check(args.config)
