"""The `lakesink` command. Each subcommand imports its heavy modules (pyspark, boto3) lazily."""
from __future__ import annotations

import argparse
import sys


def _add_dev(sub: argparse._SubParsersAction) -> None:
    """`lakesink dev up|down|status`: the embedded local stack (owned by lakesink.devstack)."""
    from lakesink.devstack import cli as dev_cli

    dev_cli.add_parser(sub)


def _load(path: str):
    from lakesink.config import load_config

    return load_config(path)


def _session(cfg, master: str | None):
    from lakesink.spark import get_spark, s3_settings_for

    return get_spark(app_name=f"lakesink-{cfg.name}", master=master, s3=s3_settings_for(cfg))


def _cmd_sink(args) -> int:
    from lakesink.driver.sink import SinkJob, parse_interval

    cfg = _load(args.config)
    for w in cfg.warnings:
        print(f"lakesink: warning: {w}", file=sys.stderr)
    job = SinkJob(_session(cfg, args.master), cfg)
    interval = parse_interval(args.interval)
    job.run(once=not args.continuous, interval_s=interval, flush_tail=args.flush_tail,
            on_batch=lambda res: print(res.summary(), flush=True))
    return 0


def _cmd_vacuum(args) -> int:
    from lakesink.driver.sink import parse_interval
    from lakesink.store import StoreSettings, open_store
    from lakesink.driver.vacuum import vacuum

    cfg = _load(args.config)
    spark = _session(cfg, args.master)
    store = open_store(StoreSettings.from_config(cfg))
    named = [_key_of(store, k) for k in args.delete_unknown]
    report = vacuum(spark, cfg, retention_s=parse_interval(args.retention), execute=args.execute,
                    also_delete=named)
    for line in report.lines(store.uri):
        print(line)
    if not args.execute and (report.orphans or report.uploads):
        print("dry run: pass --execute to delete")
    return 0


def _key_of(store, text: str) -> str:
    """A key given as the key itself or as the URI vacuum printed for it."""
    uri = store.uri("")
    return text[len(uri):] if text.startswith(uri) else text


def _cmd_check(args) -> int:
    cfg = _load(args.config)
    print(f"{args.config}: OK (job {cfg.name!r})")
    for k, why in sorted(cfg.ignored_keys.items()):
        print(f"  ignored: {k} ({why})")
    for w in cfg.warnings:
        print(f"  warning: {w}")
    return 0


def _add_sink(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sink", help="archive Kafka topics to S3 and commit them to the manifest")
    p.add_argument("--config", required=True, help="connector config: .properties, Connect JSON or YAML")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", default=True,
                      help="one batch up to the end offsets seen at start, then exit (default)")
    mode.add_argument("--continuous", action="store_true", help="repeat every --interval until SIGTERM")
    p.add_argument("--interval", default="30s", help="batch interval for --continuous (30s, 5m, ...)")
    p.add_argument("--flush-tail", action="store_true",
                   help="at the end of a batch also close and commit files below flush.size")
    p.add_argument("--master", default=None, help="Spark master for a local run (default: local[*] or the cluster's)")
    p.set_defaults(func=_cmd_sink)


def _add_vacuum(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("vacuum", help="list (and with --execute delete) objects no manifest row references")
    p.add_argument("--config", required=True)
    p.add_argument("--retention", default="24h", help="only orphans older than this (default 24h)")
    p.add_argument("--execute", action="store_true", help="delete; without it, a dry run")
    p.add_argument("--delete-unknown", action="append", default=[], metavar="KEY",
                   help="also delete this unreferenced object although it is not recognisably this job's "
                        "upload (a key or URI that vacuum listed as unknown; repeatable)")
    p.add_argument("--master", default=None)
    p.set_defaults(func=_cmd_vacuum)


def _add_check(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="validate a config file and show ignored keys and warnings")
    p.add_argument("config")
    p.set_defaults(func=_cmd_check)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    from lakesink.cli import demo

    demo.add_parser(sub)


COMMAND_REGISTRARS = [_add_sink, _add_vacuum, _add_check, _add_demo, _add_dev]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakesink",
        description="Archive Kafka topics to S3 with Confluent S3-sink naming and a Delta manifest.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in COMMAND_REGISTRARS:
        register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from lakesink.errors import LakesinkError

    try:
        return int(args.func(args) or 0)
    except LakesinkError as e:
        print(f"lakesink: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
