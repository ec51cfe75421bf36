"""lakesink: Kafka → S3 archives with Confluent S3-sink naming and a Delta manifest.

The notebook API is importable from here (``from lakesink import run, read_archive, restore, sql, status, get_spark, load_config``); each
name is loaded on first use, so ``import lakesink`` stays cheap (no Spark, no boto3)."""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "run": "lakesink.runtime.engine",
    "SinkJob": "lakesink.driver.sink",
    "BatchResult": "lakesink.driver.sink",
    "vacuum": "lakesink.driver.vacuum",
    "read_archive": "lakesink.driver.archive",
    "restore": "lakesink.driver.restore",
    "RestoreReport": "lakesink.driver.restore",
    "get_spark": "lakesink.runtime.spark",
    "session": "lakesink.runtime.session",
    "load_config": "lakesink.config",
    "SinkConfig": "lakesink.config",
    "Manifest": "lakesink.manifest",
    "LakesinkError": "lakesink.errors",
    "schema_check": "lakesink.driver.schema_check",
    "schema_history": "lakesink.driver.schema_check",
    "SchemaCheckReport": "lakesink.driver.schema_check",
    "sql": "lakesink.driver.sql",
    "register_views": "lakesink.driver.sql",
    "status": "lakesink.driver.status",
    "validate": "lakesink.driver.validate",
    "ValidationReport": "lakesink.driver.validate",
    "set_verbose": "lakesink.runtime.logs",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lakesink' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
