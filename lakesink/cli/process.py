"""The ``lakesink`` process's entry point: run a command, then end the process deliberately.

:func:`lakesink.cli.main.main` returns an exit code and leaves the interpreter running (tests and notebooks
call it in-process). A command-line run ends here instead: the Spark session, if one started, is stopped (its
event log is finalised, executors released), local services still registered are stopped, stdout/stderr are
flushed, and the process exits with
``os._exit``. Skipping the interpreter's own finalisation is deliberate: native libraries loaded by a run
(pyarrow's thread pools, delta-rs' runtime, librdkafka) keep threads whose static destructors can race the
interpreter's teardown -- seen here as a rare ``terminate called without an active exception`` abort *after*
a command had printed its result, turning a success into exit code -6 for a scheduler.
"""
from __future__ import annotations

import os
import sys


def stop_spark() -> None:
    """Stop the active Spark session of this process, if PySpark was imported and one is running."""
    if "pyspark" not in sys.modules:
        return
    try:
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        if session is not None:
            session.stop()
    except Exception:  # noqa: BLE001 - best effort on the way out; the JVM exits with this process anyway
        pass


def entry_point(argv: list[str] | None = None) -> None:
    """``lakesink …`` / ``python -m lakesink.cli …``: :func:`main`, then a clean, deterministic process exit."""
    from lakesink.cli.main import main

    code = main(argv)
    stop_spark()
    if "lakesink.devstack" in sys.modules:  # the demo's broker and S3 endpoint, if it left them running
        from lakesink.devstack import stop_registered

        stop_registered()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`lakesink … | head`)
            pass
    os._exit(code)


__all__ = ["entry_point", "stop_spark"]
