"""Unit tests assume a fresh process. Under ``make test`` a pytest-xdist worker may have run an integration file
first: it holds that file's Spark session and the run-log path its JVM was given (module state of
:mod:`lakesink.runtime.logs`). Each unit test starts without that log path; tests of commands that would reuse an
active session say so themselves (see ``no_active_spark_session``)."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_inherited_run_log(monkeypatch):
    from lakesink.runtime import logs

    monkeypatch.setattr(logs, "_run_log", None)


@pytest.fixture
def no_active_spark_session(monkeypatch):
    """This process behaves as one with no Spark session (an integration file's may be active in this worker)."""
    from pyspark.sql import SparkSession

    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
