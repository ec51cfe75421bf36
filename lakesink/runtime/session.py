"""The Spark session of a lakesink run: built from a config (S3A settings, quiet terminal, the run's log file),
or started in advance (:class:`SessionInAdvance`) so the JVM's start overlaps the driver's planning."""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["session", "SessionInAdvance", "quiet_query_error_loggers", "keep_signal_handlers"]

#: Called after a Spark session started in this process (main thread): pyspark's SparkContext installs its own
#: SIGINT handler, and a caller with its own signal handling (the CLI's StopSignals) puts its handlers back.
_signal_keeper: Callable[[], None] | None = None


def keep_signal_handlers(reinstall: Callable[[], None] | None) -> None:
    """Register ``reinstall`` (None: nothing) to run after a session starts (see :data:`_signal_keeper`)."""
    global _signal_keeper
    _signal_keeper = reinstall


def session(cfg, master: str | None, scheduler_only: bool = False):
    """The Spark session for ``cfg`` (S3A settings from the config), for a command or a notebook. A JVM this starts
    logs to a file (:func:`lakesink.runtime.logs.quiet_jvm`), not the terminal, unless ``--verbose``/``--debug``.
    ``scheduler_only``: see :func:`lakesink.runtime.spark.get_spark`."""
    from lakesink import wiring
    from lakesink.runtime.spark import get_spark

    quiet_query_error_loggers()
    # a JVM get_spark starts prints to the run's log file (lakesink.runtime.logs.quiet_jvm); this process's own
    # output stays on the terminal
    spark = get_spark(app_name=f"lakesink-{cfg.name}", master=master, s3=wiring.s3_settings(cfg),
                      scheduler_only=scheduler_only)
    if _signal_keeper is not None:  # pyspark's SparkContext replaced the SIGINT handler: the caller's again
        _signal_keeper()
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
        if _signal_keeper is not None:  # here, in the main thread: signal handlers can only be set there
            _signal_keeper()
        return self._session


def quiet_query_error_loggers() -> None:
    """PySpark logs every SQL analysis error as a JSON line on stderr before raising it; the CLI reports the
    error itself in one line (``--debug`` adds the traceback), so those loggers are silenced here."""
    import logging

    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)

