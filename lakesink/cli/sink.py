"""`lakesink sink --config FILE`: archive Kafka topics to S3; each batch is rendered as it commits."""
from __future__ import annotations

import argparse

from lakesink.cli.output import SinkResult


def add_parser(sub: argparse._SubParsersAction) -> None:
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
    p.set_defaults(func=run)


def session(cfg, master: str | None):
    """The Spark session for ``cfg`` (S3A settings from the config)."""
    from lakesink import wiring
    from lakesink.spark import get_spark

    return get_spark(app_name=f"lakesink-{cfg.name}", master=master, s3=wiring.s3_settings(cfg))


def run(args: argparse.Namespace, output) -> SinkResult:
    from lakesink.config import load_config
    from lakesink.driver.sink import SinkJob, parse_interval

    cfg = load_config(args.config)
    interval = parse_interval(args.interval)  # a bad --interval fails before Spark starts
    for w in cfg.warnings:
        output.warning(w)
    job = SinkJob(session(cfg, args.master), cfg)
    batches = job.run(once=not args.continuous, interval_s=interval, flush_tail=args.flush_tail,
                      on_batch=output.batch)
    return SinkResult(batches=batches)
