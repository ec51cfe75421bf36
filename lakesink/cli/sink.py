"""`lakesink sink --config FILE`: archive Kafka topics to S3; each batch is rendered as it commits."""
from __future__ import annotations

import argparse
import contextlib
from typing import Any

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
    p.add_argument("--engine", choices=("auto", "spark", "local"), default="auto",
                   help="what runs the batch's tasks: local worker processes, no Spark JVM, when Spark would only "
                        "schedule them on this machine (auto, the default: kafka.reader=direct, a path manifest, a "
                        "local master, no session yet), or always Spark, or local (an error when it cannot)")
    p.add_argument("--progress", choices=("auto", "bar", "lines", "none"), default="auto",
                   help="each batch's progress on stderr: a bar on a terminal, else a line every --progress-every "
                        "(auto, the default), or always bar/lines, or none")
    p.add_argument("--progress-every", default="30s", help="interval of the plain progress lines (30s, 1m, ...)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, output) -> SinkResult:
    """Archive; the first batch's phases start with the run's cold start: ``start`` (process start to
    here: interpreter, imports), ``config`` and ``init`` (manifest table, Kafka and store clients). A new local
    Spark starts in advance, right after the config is read (:class:`lakesink.runtime.session.SessionInAdvance`): a path manifest is
    planned with delta-rs, without Spark, so the JVM starts while the plan is made; the first batch with
    something to archive waits for what is left of that start (its ``session`` phase). A run that finds nothing
    new never asks for the session and exits without waiting for it. When Spark would only schedule Python tasks
    here, local worker processes run them instead and no JVM starts (:func:`lakesink.runtime.engine.local_workers`, ``--engine``); they
    start at the same point, and the run ends them."""
    import time

    from lakesink.config import load_config
    from lakesink.driver.sink import SinkJob, parse_interval

    startup = {"start": seconds_since_process_start()}
    t = time.monotonic()
    cfg = load_config(args.config)
    interval = parse_interval(args.interval)  # a bad --interval fails before Spark starts
    every = parse_interval(getattr(args, "progress_every", "30s"), "--progress-every")
    for w in cfg.warnings:
        output.warning(w)
    startup["config"], t = time.monotonic() - t, time.monotonic()
    from lakesink.runtime.engine import open_engine
    from lakesink.runtime.runs import RunRecorder

    run = RunRecorder(cfg, output.warning)
    with run:
        # the engine starts now (local workers, or Spark in advance), while the driver plans
        with open_engine(cfg, getattr(args, "engine", "auto"), args.master) as engine:
            run_preflight(cfg)  # timed with `init`
            job = SinkJob(engine.spark, cfg, runner=engine.runner)
            run.run_id = job.run_id
            startup["init"] = time.monotonic() - t
            return run_batches(args, output, job, startup, interval, every, on_batch=run.add)


def run_batches(args: argparse.Namespace, output, job, startup: dict, interval: float, every: float,
                on_batch: Any = None) -> SinkResult:
    """Run ``job``'s batches as the arguments say, each rendered as it commits (the first with the cold start's
    ``startup`` phases) and handed to ``on_batch``, under :class:`StopSignals`."""
    from lakesink.cli.progress import ProgressDisplay

    display = ProgressDisplay(getattr(args, "progress", "auto"), every_s=every)
    job.on_progress = display

    also = on_batch

    def on_batch(result) -> None:
        if also is not None:
            also(result)
        if startup:  # the first batch carries the cold start, in order, before its own phases
            result.seconds = {**startup, **result.seconds}
            startup.clear()
        display.close()
        if result.metrics_warning:
            output.warning(result.metrics_warning)
        output.batch(result)

    stop = StopSignals()
    try:
        with stop.installed():
            batches = job.run(once=not args.continuous, interval_s=interval, flush_tail=args.flush_tail,
                              on_batch=on_batch, stop=stop.event)
    finally:
        display.close()
    if stop.received:
        output.warning(stop_words(stop.received, batches))
    return SinkResult(batches=batches)


def stop_words(signal_name: str, batches: list) -> str:
    """The line a stopped run ends with: what this run committed, true also when its last batch (a poll that
    found nothing to commit, :attr:`lakesink.driver.sink.BatchResult.committed`) committed nothing."""
    said = f"{signal_name} received: stopped"
    committed = [b for b in batches if b.committed]
    if not committed:
        return f"{said}{'' if batches else ' before the first batch'}; nothing committed in this run"
    last = committed[-1]
    records = f"{last.records} records"
    if last is batches[-1]:
        return f"{said} after batch {last.batch_id} committed ({records})"
    return f"{said}; the last committed batch is {last.batch_id} ({records}); nothing committed after it"


class StopSignals:
    """SIGTERM/SIGINT during a sink run: the first one lets the batch in progress finish and commit, then the
    run stops (exit 0; the Spark JVM and the local workers run in their own process group, so a signal to the
    whole group does not kill them mid-batch -- see :func:`lakesink.runtime.spark.launch_jvm_detached` and
    :mod:`lakesink.runners.local`). A second one abandons the batch at
    once: the process exits 128+signal (130 SIGINT, 143 SIGTERM) and the manifest has nothing of the batch
    unless its commit had already happened (a Delta commit is one atomic log entry)."""

    def __init__(self) -> None:
        import threading

        self.event = threading.Event()
        self.received: str | None = None

    def handle(self, signum, _frame) -> None:
        import os
        import signal
        import sys

        name = signal.Signals(signum).name
        if self.received is None:
            self.received = name
            self.event.set()  # the one line comes when the batch has committed (or failed)
            return
        print(f"lakesink: error: {name} received again: batch abandoned; nothing of it was committed "
              f"unless its manifest commit had completed", file=sys.stderr, flush=True)
        os._exit(128 + signum)  # no teardown that could commit; the JVM and local workers end as their pipes close

    @contextlib.contextmanager
    def installed(self):
        """The handlers while the run lasts (main thread only; elsewhere, e.g. a notebook thread, none)."""
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            yield
            return
        from lakesink.runtime.session import keep_signal_handlers

        saved = {s: signal.signal(s, self.handle) for s in (signal.SIGTERM, signal.SIGINT)}
        keep_signal_handlers(self.reinstall)
        try:
            yield
        finally:
            keep_signal_handlers(None)
            for s, h in saved.items():
                signal.signal(s, h)

    def reinstall(self) -> None:
        """The handlers again, e.g. after pyspark's SparkContext set its own SIGINT handler (it cancels the
        running jobs, failing the batch instead of letting it finish)."""
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGTERM, signal.SIGINT):
                signal.signal(s, self.handle)


def run_preflight(cfg) -> None:
    """Broker, bucket and manifest location reachable (:mod:`lakesink.driver.preflight`), before the manifest
    table is created or Spark starts: a wrong address fails in seconds with exit code 5."""
    from lakesink.driver.preflight import preflight

    preflight(cfg)


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
