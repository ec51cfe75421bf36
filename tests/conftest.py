"""Shared test setup: make Spark use this interpreter and loopback before any session starts."""
from __future__ import annotations

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
# The suite starts dozens of short-lived dev brokers and registries: with the C1 compiler alone and the serial
# collector a broker's start and a test's traffic cost about half the CPU (measured here: 10.0 -> 5.6 CPU-s,
# 25 -> 13 s for a start and 100k records), and C2's faster code never pays for its compile time in a test.
os.environ.setdefault("LAKESINK_DEV_JVM_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
# The same for every Spark driver JVM the suite starts (its sessions, the CLI's in subprocesses, spark-submit jobs,
# the Spark Connect server): spark-submit adds $SPARK_SUBMIT_OPTS to the driver's java command. A session and a
# few small Delta jobs: 49 -> 25 CPU-s of the JVM, 81 -> 39 s (measured here, under load).
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")

# A pytest-xdist worker runs as `python -c …`: its __main__ has neither __spec__ nor __file__, which
# pyspark.sql.connect (imported by great_expectations) takes for a doctest run and answers with sys.exit(0).
_main = sys.modules.get("__main__")
if _main is not None and getattr(_main, "__spec__", None) is None and not hasattr(_main, "__file__"):
    _main.__file__ = "<pytest-xdist worker>"
