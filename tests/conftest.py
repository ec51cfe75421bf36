"""Shared test setup: make Spark use this interpreter and loopback before any session starts."""
from __future__ import annotations

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
