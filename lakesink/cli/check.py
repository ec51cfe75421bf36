"""`lakesink check CONFIG`: validate a config file; returns its summary, ignored keys and warnings."""
from __future__ import annotations

import argparse

from lakesink.cli.output import CheckResult, TranslateResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="validate a config file and show ignored keys and warnings; --translate "
                                     "another connector's config (Aiven, DeviantArt/Spredfast, Zooz)")
    p.add_argument("config", help="connector config: .properties, Connect JSON or YAML")
    p.add_argument("--translate", action="store_true",
                   help="the config is another S3 archiver's: print the equivalent lakesink config (.properties) "
                        "and what differs; secrets are not printed")
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


def translation(path: str) -> TranslateResult:
    """The lakesink config for another connector's config file (ConfigError when it is not recognised)."""
    from pathlib import Path

    from lakesink.config.keys import KNOWN_KEYS, is_secret
    from lakesink.config.parse import flatten, read_source
    from lakesink.config.translate import CONNECTORS, recognise, to_properties, translate
    from lakesink.errors import ConfigError, ConfigProblem

    p = Path(path)
    if not p.is_file():
        raise ConfigError([ConfigProblem("<file>", str(p), "config file not found")], str(p))
    flat, name = read_source(p)
    raw = flatten(flat)
    if name and "name" not in raw:
        raw["name"] = name
    conn = recognise(raw)
    if conn is None:
        known = ", ".join(c.name for c in CONNECTORS.values())
        raise ConfigError([ConfigProblem("<file>", None, f"not recognised as a config of another connector "
                                                         f"({known}); `lakesink check` validates lakesink configs")],
                          str(p))
    t = translate(conn, raw, set(KNOWN_KEYS))
    secrets = sorted(k for k in t.config if is_secret(k))
    printable = {k: v for k, v in t.config.items() if k not in secrets}
    header = [f"lakesink config translated from {conn.name} ({path})"]
    header += [f"not printed (secret): {k} -- set it here, or use the default credential chain" for k in secrets]
    return TranslateResult(path=str(path), connector=conn.name, mapping=t.mapping,
                           differences=list(conn.differences), properties=to_properties(printable, header),
                           withheld=secrets)


def run(args: argparse.Namespace, output) -> CheckResult | TranslateResult:
    if args.translate:
        return translation(args.config)
    return check(args.config)
