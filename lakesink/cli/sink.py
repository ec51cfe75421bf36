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
    """The Spark session for ``cfg`` (S3A settings from the config), for a CLI command."""
    from lakesink import wiring
    from lakesink.spark import get_spark

    quiet_query_error_loggers()
    return get_spark(app_name=f"lakesink-{cfg.name}", master=master, s3=wiring.s3_settings(cfg))


def run(args: argparse.Namespace, output) -> SinkResult:
    """Archive; the first batch's phases start with the run's cold start: ``start`` (process start to
    here: interpreter, imports), ``config`` and ``init`` (manifest table, Kafka and store clients). Spark
    starts only when a batch has something to archive (its ``session`` phase): a path manifest is planned and
    committed with delta-rs, so a run that finds nothing new never starts a JVM."""
    import time

    from lakesink.config import load_config
    from lakesink.driver.sink import SinkJob, parse_interval

    startup = {"start": seconds_since_process_start()}
    t = time.monotonic()
    cfg = load_config(args.config)
    interval = parse_interval(args.interval)  # a bad --interval fails before Spark starts
    for w in cfg.warnings:
        output.warning(w)
    startup["config"], t = time.monotonic() - t, time.monotonic()
    job = SinkJob(lambda: session(cfg, args.master), cfg)
    startup["init"] = time.monotonic() - t

    def on_batch(result) -> None:
        if startup:  # the first batch carries the cold start, in order, before its own phases
            result.seconds = {**startup, **result.seconds}
            startup.clear()
        output.batch(result)

    batches = job.run(once=not args.continuous, interval_s=interval, flush_tail=args.flush_tail,
                      on_batch=on_batch)
    return SinkResult(batches=batches)


def quiet_query_error_loggers() -> None:
    """PySpark logs every SQL analysis error as a JSON line on stderr before raising it; the CLI reports the
    error itself in one line (``--debug`` adds the traceback), so those loggers are silenced here."""
    import logging

    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


def seconds_since_process_start() -> float:
    """Wall time since this process started (Linux ``/proc``; 0.0 where that cannot be read)."""
    import os

    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0
