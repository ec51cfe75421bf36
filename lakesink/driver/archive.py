"""Reading the archive back through the manifest (never by listing the bucket), on the driver.

:func:`read_archive` is the archive as a Spark DataFrame of Kafka records: the committed objects a SQL
predicate over the manifest selects (:func:`select_objects`), read on the executors, one Spark task per
object. Orphans (uploads no manifest row references) are never read: only manifest rows are.

The per-object readers run where the records are needed, so they live in :mod:`lakesink.executor.readback`
(they also run in Spark's Python workers); this module keeps their names for driver-side callers and
notebooks. Every failure is a :class:`lakesink.errors.ArchiveReadError` or the store's own
:class:`lakesink.errors.StoreError` (missing object, :class:`~lakesink.errors.ObjectChangedError`); a bad
``where`` is an :class:`~lakesink.errors.ArchiveQueryError`.
"""
from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any

from lakesink import wiring
from lakesink.errors import ArchiveQueryError, InvalidArgumentError, ManifestError
from lakesink.executor.readback import (FIELDS, NO_CUT, ArchivedObject, Cut, RestoredRecord, iter_objects,
                                        read_object, read_records)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from lakesink.config import SinkConfig

__all__ = ["FIELDS", "ArchivedObject", "Cut", "RestoredRecord", "iter_objects", "read_object", "read_records",
           "as_config", "resolve_source", "manifest_frame", "select_objects", "read_archive", "query_error_line"]


def as_config(config: Any) -> "SinkConfig":
    """A SinkConfig from a SinkConfig, a dict or a config file path."""
    from lakesink.config import SinkConfig, load_config

    if isinstance(config, SinkConfig):
        return config
    return SinkConfig.from_dict(config) if isinstance(config, dict) else load_config(config)


def _is_manifest(obj: Any) -> bool:
    return hasattr(obj, "arrow") or hasattr(obj, "df")


def resolve_source(spark: Any, config_or_manifest: Any, config: Any = None) -> tuple["SinkConfig", Any]:
    """``(config, manifest)``: the manifest is the config's (``wiring.manifest``) unless one is passed; a
    passed manifest still needs the job's ``config`` (store, formats and decoders of its objects)."""
    if _is_manifest(config_or_manifest):
        if config is None:
            raise InvalidArgumentError("reading objects needs the job's config (its store, formats and decoders): "
                                       "pass config=... with a manifest")
        return as_config(config), config_or_manifest
    cfg = as_config(config_or_manifest if config is None else config)
    return cfg, wiring.manifest(cfg, spark)


def manifest_frame(spark: "SparkSession", manifest: Any) -> "DataFrame":
    """The manifest as a Spark DataFrame: the Spark engine's table, or a delta-rs table's rows handed to Spark
    (no Delta or S3A work in the JVM for a path manifest)."""
    if not manifest.exists():
        raise ManifestError(f"no manifest table at {manifest.location}: the job has not committed anything yet")
    if hasattr(manifest, "df"):
        return manifest.df()
    return spark.createDataFrame(manifest.arrow())


_SQLSTATE = re.compile(r"\s*SQLSTATE: .*$")


def query_error_line(e: BaseException) -> str:
    """Spark's analysis/parse error shortened to its useful line (no plan, no SQL echo, no SQLSTATE, no position)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    line = lines[0] if lines else type(e).__name__
    # positions would point into the query wrapped around the predicate: left out with the SQLSTATE
    return _SQLSTATE.sub("", line).rstrip(";").strip()[:400]


def select_objects(spark: "SparkSession", cfg: "SinkConfig", manifest: Any, where: str | None = None) -> list[ArchivedObject]:
    """The committed objects of job ``cfg.name`` that ``where`` (a Spark SQL predicate over the manifest's
    columns) selects, in (topic, partition, first offset) order. Only rows of kind ``object`` are ever returned.

    Raises ArchiveQueryError (one line) for a predicate that does not parse or names unknown columns."""
    from pyspark.errors import AnalysisException, ParseException
    from pyspark.sql import functions as F

    df = manifest_frame(spark, manifest).where((F.col("kind") == "object") & (F.col("job") == cfg.name))
    if where is not None and where.strip():
        # a WHERE clause of a SQL query, not an expression (F.expr would take "x = 1 AND" as "x = 1" aliased AND)
        view = f"lakesink_manifest_{uuid.uuid4().hex}"
        df.createOrReplaceTempView(view)
        try:
            df = spark.sql(f"SELECT * FROM {view} WHERE {where}")
            df.schema  # analysis is lazy on Spark Connect: force it here, not mid-run
        except (ParseException, AnalysisException) as e:
            raise ArchiveQueryError(f"--where {where!r}: {query_error_line(e)}") from None
    cols = ("topic", "kafka_partition", "object_key", "etag", "version_id", "first_offset", "last_offset",
            "record_count", "side_files", "format", "compression", "size_bytes", "schema_id", "min_timestamp",
            "max_timestamp", "kind")
    try:
        rows = df.select(*cols).collect()
    except (ParseException, AnalysisException) as e:
        raise ArchiveQueryError(f"--where {where!r}: {query_error_line(e)}") from None
    finally:
        if where is not None and where.strip():
            spark.catalog.dropTempView(view)
    return list(iter_objects(rows))


def read_archive(spark: "SparkSession", config_or_manifest: Any, where: str | None = None, *, config: Any = None,
                 cut: Cut = NO_CUT) -> "DataFrame":
    """The archived Kafka records of the committed objects ``where`` selects, as a DataFrame with columns
    topic, partition, offset, timestamp, timestamp_type, key (binary), value (binary), headers
    (array<struct<key:string, value:binary>>); the bytes follow :func:`read_records`' rules per format.

    ``config_or_manifest``: the job's config (SinkConfig, dict or file path; its manifest is read), or a
    manifest object with ``config=``. ``where``: a Spark SQL predicate over the manifest's columns, e.g.
    ``"topic = 'orders' AND max_timestamp >= '2026-11-01'"``; only rows of kind ``object`` of the config's job
    are read. ``cut``: offsets / timestamps inside the objects (a :class:`Cut`).

    The objects are chosen now (one manifest version); their records are read lazily, on the executors,
    one Spark task per object, each verified against the ETag and record count its row recorded. Record
    order holds within each object (partition, offset); the DataFrame as a whole has no order."""
    from lakesink.executor.archive_tasks import RECORD_DDL, read_archive_task

    cfg, manifest = resolve_source(spark, config_or_manifest, config)
    objects = select_objects(spark, cfg, manifest, where)
    if not objects:
        return spark.createDataFrame([], RECORD_DDL)
    n = len(objects)
    # range(n) in n slices: one id, one object, per Spark task (no Python RDD, no shuffle)
    return spark.range(0, n, 1, n).mapInArrow(lambda it: read_archive_task(it, objects, cfg, cut), RECORD_DDL)
