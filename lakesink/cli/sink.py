"""`lakesink sink --config FILE`: archive Kafka topics to S3; each batch is rendered as it commits."""
from __future__ import annotations

import argparse
import contextlib
import functools
from typing import Any, Callable

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
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="what runs the batch's tasks: local worker processes, no Spark JVM, when Spark would only "
                        "schedule them on this machine (auto, the default: kafka.reader=direct, a path manifest, a "
                        "local master, no session yet), or always Spark, or local (an error when it cannot)")
    p.add_argument("--progress", choices=("auto", "bar", "lines", "none"), default="auto",
                   help="each batch's progress on stderr: a bar on a terminal, else a line every --progress-every "
                        "(auto, the default), or always bar/lines, or none")
    p.add_argument("--progress-every", default="30s", help="interval of the plain progress lines (30s, 1m, ...)")
    p.set_defaults(func=run)


#: ``--engine`` values
ENGINES = ("auto", "spark", "local")


def local_workers(cfg, engine: str, master: str | None) -> int | None:
    """How many local worker processes run a sink's tasks (:mod:`lakesink.driver.local_tasks`), or None when
    Spark runs them. ``auto`` picks local workers when Spark would only schedule Python tasks on a new local
    master (:func:`lakesink.wiring.spark_schedules_only`; no session here yet): as many as the master's task
    slots. ``local`` insists (an error naming why it cannot), also beside a local session this process already
    has; ``spark`` never."""
    from lakesink import wiring
    from lakesink.driver.local_tasks import local_parallelism
    from lakesink.errors import InvalidArgumentError
    from lakesink.spark import cluster_environment, spark_master, starts_local_jvm

    if engine not in ENGINES:
        raise InvalidArgumentError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
    if engine == "spark":
        return None
    resolved = spark_master(master)
    n = local_parallelism(resolved)
    why = None
    if not wiring.spark_schedules_only(cfg):
        why = ("the config needs Spark (kafka.reader=spark, or a catalog table for the manifest or the metrics "
               "table)")
    elif n is None:
        why = f"master {resolved!r} is not local"
    elif cluster_environment():
        why = "this process runs on a Spark cluster (Databricks, or $LAKESINK_SPARK_CLUSTER)"
    if why is not None:
        if engine == "local":
            raise InvalidArgumentError(f"--engine local: {why}")
        return None
    if engine == "auto" and not starts_local_jvm():
        return None  # a session is here already: it runs them
    return n


def log_output(job: str) -> tuple[str | None, int | None]:
    """A new log file for what this run's Spark JVM or local workers print: (its path, a file descriptor open
    for appending), or (None, None) with ``--verbose`` (they print to the terminal). :func:`run_log_file` names
    it afterwards."""
    import os

    global _run_log
    if _verbose:
        return None, None
    _run_log = new_log_file(job)
    return _run_log, os.open(_run_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def session(cfg, master: str | None, scheduler_only: bool = False):
    """The Spark session for ``cfg`` (S3A settings from the config), for a CLI command. A JVM this starts logs
    to a file (:func:`new_log_file`), not the terminal, unless ``--verbose``/``--debug``. ``scheduler_only``: see
    :func:`lakesink.spark.get_spark`."""
    import os

    from pyspark.sql import SparkSession

    from lakesink import wiring
    from lakesink.spark import get_spark

    quiet_query_error_loggers()
    starts_jvm = SparkSession.getActiveSession() is None
    # the JVM's own output (and its Python workers' stderr) goes to the file; this process's stays on the terminal
    log, fd = log_output(cfg.name) if starts_jvm else (None, None)
    try:
        spark = get_spark(app_name=f"lakesink-{cfg.name}", master=master, s3=wiring.s3_settings(cfg),
                          conf=quiet_spark_conf(log), scheduler_only=scheduler_only, jvm_output=fd)
    finally:
        if fd is not None:
            os.close(fd)
    if _active_stop is not None:  # pyspark's SparkContext replaced the SIGINT handler: ours again
        _active_stop.reinstall()
    return spark


class SessionInAdvance:
    """A sink's Spark session, started in a background thread as soon as the config is read: the JVM's start
    (seconds on a cold machine) overlaps the preflight, the manifest and the Kafka plan instead of following
    them. Calling it returns the session, waiting for the start and raising its error. A run that finds nothing
    to archive never calls it: the JVM, started or still starting, ends with this process (pyspark's gateway
    exits when its stdin pipe closes), so such a run costs the JVM's CPU but no wall time."""

    def __init__(self, start: Callable[[], Any]):
        import threading

        self._start = start
        self._session: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="lakesink-spark-start", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._session = self._start()
        except BaseException as e:  # noqa: BLE001 - re-raised in the thread that asks for the session
            self._error = e

    def __call__(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        if _active_stop is not None:  # here, in the main thread: signal handlers can only be set there
            _active_stop.reinstall()
        return self._session


LOG_FILE_ENV = "LAKESINK_SPARK_LOG_FILE"
_active_stop: "StopSignals | None" = None  # the running sink's signal handling (see StopSignals)
_run_log: str | None = None
_verbose = False


def set_verbose(verbose: bool) -> None:
    """``--verbose``/``--debug``: a Spark JVM this process starts logs to the terminal, not to a file. (Module
    state, not an environment variable: child processes, e.g. a test's subprocesses, must not inherit it.)"""
    global _verbose
    _verbose = bool(verbose)


def run_log_file() -> str | None:
    """The log file of the Spark JVM or local workers this process started (None: none, or they log to the
    terminal)."""
    return _run_log


def new_log_file(job: str) -> str:
    """A log file for this run's Spark: ``$LAKESINK_SPARK_LOG_FILE`` if set, else one per run under
    ``$LAKESINK_LOG_DIR`` (default ``<tmp>/lakesink-logs-<uid>``)."""
    import datetime as dt
    import os
    import tempfile

    if os.environ.get(LOG_FILE_ENV):
        return os.environ[LOG_FILE_ENV]
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    d = os.environ.get("LAKESINK_LOG_DIR") or os.path.join(tempfile.gettempdir(), f"lakesink-logs-{uid}")
    os.makedirs(d, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return os.path.join(d, f"{job}-{stamp}-{os.getpid()}.log")


def quiet_spark_conf(log: str | None) -> dict[str, str]:
    """Spark settings that keep the terminal for lakesink's own output: no console progress bars, and (with a
    ``log`` file) the driver's log4j -- Spark, Hadoop, task failures with Python tracebacks -- to that file."""
    from importlib.resources import files

    conf = {"spark.ui.showConsoleProgress": "false"}
    if log is not None:
        cfg_file = str(files("lakesink.cli").joinpath("log4j2-cli.properties"))
        conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{cfg_file} -Dlakesink.log.file={log}"
    return conf


def run(args: argparse.Namespace, output) -> SinkResult:
    """Archive; the first batch's phases start with the run's cold start: ``start`` (process start to
    here: interpreter, imports), ``config`` and ``init`` (manifest table, Kafka and store clients). A new local
    Spark starts in advance, right after the config is read (:class:`SessionInAdvance`): a path manifest is
    planned with delta-rs, without Spark, so the JVM starts while the plan is made; the first batch with
    something to archive waits for what is left of that start (its ``session`` phase). A run that finds nothing
    new never asks for the session and exits without waiting for it. When Spark would only schedule Python tasks
    here, local worker processes run them instead and no JVM starts (:func:`local_workers`, ``--engine``); they
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
    from lakesink import wiring
    from lakesink.spark import starts_local_jvm

    start = functools.partial(session, cfg, args.master, wiring.spark_schedules_only(cfg))
    workers = local_workers(cfg, getattr(args, "engine", "auto"), args.master)
    with contextlib.ExitStack() as ending:
        tasks = None
        if workers is not None:  # the workers start now, while the driver plans; Spark is not started at all
            tasks = ending.enter_context(start_local_tasks(cfg.name, workers))
            spark = start
        else:
            spark = SessionInAdvance(start) if starts_local_jvm() else start
        run_preflight(cfg)  # timed with `init`
        job = SinkJob(spark, cfg, tasks=tasks)
        startup["init"] = time.monotonic() - t
        return run_batches(args, output, job, startup, interval, every)


def start_local_tasks(job: str, workers: int):
    """The local engine's ``workers`` worker processes, logging to this run's log file."""
    import os

    from lakesink.driver.local_tasks import LocalTasks

    _log, fd = log_output(job)
    try:
        return LocalTasks(workers, output=fd)
    finally:
        if fd is not None:
            os.close(fd)


def run_batches(args: argparse.Namespace, output, job, startup: dict, interval: float, every: float) -> SinkResult:
    """Run ``job``'s batches as the arguments say, each rendered as it commits (the first with the cold start's
    ``startup`` phases), under :class:`StopSignals`."""
    from lakesink.cli.progress import ProgressDisplay

    display = ProgressDisplay(getattr(args, "progress", "auto"), every_s=every)
    job.on_progress = display

    def on_batch(result) -> None:
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
    whole group does not kill them mid-batch -- see :func:`lakesink.spark.launch_jvm_detached` and
    :mod:`lakesink.driver.local_tasks`). A second one abandons the batch at
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
        global _active_stop
        saved = {s: signal.signal(s, self.handle) for s in (signal.SIGTERM, signal.SIGINT)}
        _active_stop = self
        try:
            yield
        finally:
            _active_stop = None
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
