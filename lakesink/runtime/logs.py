"""The log policy of a lakesink run: what the Spark JVM and the local workers it starts print goes to one log file
per run (``$LAKESINK_SPARK_LOG_FILE``, else under ``$LAKESINK_LOG_DIR``), not to the terminal, unless the caller
asked for it (``--verbose``/``--debug``: :func:`set_verbose`). The terminal keeps lakesink's own lines."""
from __future__ import annotations

__all__ = ["LOG_FILE_ENV", "log_output", "set_verbose", "verbose", "run_log_file", "new_log_file"]

LOG_FILE_ENV = "LAKESINK_SPARK_LOG_FILE"
_run_log: str | None = None
_verbose = False


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


def set_verbose(verbose: bool) -> None:
    """``--verbose``/``--debug``: a Spark JVM this process starts logs to the terminal, not to a file. (Module
    state, not an environment variable: child processes, e.g. a test's subprocesses, must not inherit it.)"""
    global _verbose
    _verbose = bool(verbose)


def verbose() -> bool:
    """Whether what this process starts logs to the terminal (:func:`set_verbose`)."""
    return _verbose


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
