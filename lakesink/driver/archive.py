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
from typing import TYPE_CHECKING, Any

from lakesink import wiring
from lakesink.errors import ArchiveQueryError, InvalidArgumentError, ManifestError
from lakesink.manifest.rows import TOMBSTONE_KINDS, live_objects
from lakesink.manifest.views import LIVE_OBJECT, LIVE_OBJECTS
from lakesink.executor.readback import (FIELDS, NO_CUT, ArchivedObject, Cut, RestoredRecord, iter_objects,
                                        read_object, read_records)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from lakesink.config import SinkConfig

__all__ = ["FIELDS", "ArchivedObject", "Cut", "RestoredRecord", "iter_objects", "read_object", "read_records",
           "as_config", "resolve_source", "manifest_frame", "select_objects", "split_objects", "object_bytes", "pack_objects",
           "read_archive", "query_error_line", "setting_bytes"]


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
    """The committed objects of job ``cfg.name`` that ``where`` (one boolean Spark SQL expression over the
    manifest's columns) selects, in (topic, partition, first offset) order. Only rows of kind ``object`` of the
    config's job are ever returned: the predicate is a filter of its own on a frame already filtered by job and
    kind, so no predicate can widen it (``job = 'other'`` selects nothing).

    Raises ArchiveQueryError (one line, exit 2 in the CLI) for a predicate that is not one expression (a
    subquery, set operation, ``;`` or table reference: :func:`lakesink.manifest.queries.where_predicate`), does
    not parse, or names unknown columns."""
    return split_objects(spark, cfg, manifest, where)[0]


#: The manifest columns an :class:`ArchivedObject` is built from.
OBJECT_COLUMNS = ("topic", "kafka_partition", "object_key", "etag", "version_id", "first_offset", "last_offset",
                  "record_count", "side_files", "format", "compression", "size_bytes", "schema_id", "min_timestamp",
                  "max_timestamp", "kind", "note")


def split_objects(spark: "SparkSession | None", cfg: "SinkConfig", manifest: Any,
                  where: str | None = None) -> tuple[list[ArchivedObject], list[ArchivedObject]]:
    """:func:`select_objects`' objects, and the job's objects ``where`` left out, from one read of the manifest
    (the predicate evaluated as a column: NULL counts as not selected). A path manifest (delta-rs) is filtered in
    DuckDB (no JVM; ``spark`` unused), or without a predicate by :func:`lakesink.manifest.rows.live_objects`; a
    catalog manifest by Spark."""
    from lakesink.manifest.queries import where_predicate

    # checked before the manifest is read: a refused predicate touches nothing
    predicate = where_predicate(where) if where is not None and where.strip() else None
    if not hasattr(manifest, "scan"):
        return _split_in_spark(spark, cfg, manifest, predicate, where)
    if not manifest.exists():
        raise ManifestError(f"no manifest table at {manifest.location}: the job has not committed anything yet")
    if predicate is None:  # nothing to evaluate: the live-object rule in Python, no DuckDB to start and no views to
        # translate with sqlglot (a fixed cost of every cold restore and read_archive)
        rows = manifest.scan(job=cfg.name, columns=["job", *OBJECT_COLUMNS]).to_pylist()
        return list(iter_objects(live_objects(rows))), []
    return _split_in_duckdb(cfg, manifest, predicate, where)


def _split_in_duckdb(cfg: "SinkConfig", manifest: Any, predicate: str,
                     where: str | None) -> tuple[list[ArchivedObject], list[ArchivedObject]]:
    from lakesink.manifest.duck import DuckViews

    chosen = f"coalesce(({predicate}), false)"
    # live objects only: an expired object (superseded by its tombstone) is gone, not an error
    query = (f"SELECT {', '.join(OBJECT_COLUMNS)}, {chosen} AS lakesink_selected FROM {LIVE_OBJECTS} "
             f"WHERE {LIVE_OBJECT}")
    with DuckViews({"manifest": manifest.scan(job=cfg.name)}) as db:
        try:
            (_name, kind), = db.column_types(f"SELECT ({predicate}) AS p FROM manifest")
            if kind not in ("BOOLEAN", '"NULL"', "NULL"):
                raise ArchiveQueryError(f"--where {where!r}: is a {spark_type_name(kind)}, not a boolean "
                                        f"expression over the manifest's columns")
            columns, rows, _ = db.query(query)
        except ArchiveQueryError as e:
            if str(e).startswith("--where"):
                raise
            raise ArchiveQueryError(f"--where {where!r}: {str(e).removeprefix('query: ')}") from None
    dicts = [dict(zip(columns, r)) for r in rows]
    return (list(iter_objects(d for d in dicts if d["lakesink_selected"])),
            list(iter_objects(d for d in dicts if not d["lakesink_selected"])))


def spark_type_name(duckdb_type: str) -> str:
    """Spark's word for a DuckDB column type, so an error reads the same on both engines."""
    t = duckdb_type.upper()
    for prefix, name in (("VARCHAR", "string"), ("BIGINT", "bigint"), ("INTEGER", "int"), ("DOUBLE", "double"),
                         ("DECIMAL", "decimal"), ("TIMESTAMP", "timestamp"), ("DATE", "date"), ("STRUCT", "struct"),
                         ("FLOAT", "float"), ("SMALLINT", "smallint"), ("BLOB", "binary")):
        if t.startswith(prefix):
            return name
    return "array" if t.endswith("[]") else duckdb_type.lower()


def _split_in_spark(spark: "SparkSession", cfg: "SinkConfig", manifest: Any, predicate: str | None,
                    where: str | None) -> tuple[list[ArchivedObject], list[ArchivedObject]]:
    from pyspark.errors import AnalysisException, ParseException
    from pyspark.sql import functions as F

    frame = manifest_frame(spark, manifest).where(F.col("job") == cfg.name)
    identity = ["job", "topic", "kafka_partition", "object_key", "etag_or_empty"]
    tombs = (frame.where(F.col("kind").isin(*TOMBSTONE_KINDS))
             .withColumn("etag_or_empty", F.coalesce(F.col("etag"), F.lit(""))).select(*identity))
    # live objects only: an expired object (superseded by its tombstone) is gone, not an error
    df = (frame.where(F.col("kind") == "object").withColumn("etag_or_empty", F.coalesce(F.col("etag"), F.lit("")))
          .join(tombs, on=identity, how="left_anti").drop("etag_or_empty"))
    cols = OBJECT_COLUMNS
    try:
        # the predicate is a column of its own on the scoped frame (never SQL text around it); its text is the
        # checked expression as sqlglot rendered it, so Spark parses nothing the check did not see
        chosen = F.lit(True)
        if predicate is not None:
            # its own type first (forcing analysis, lazy on Spark Connect): coalesce would cast a non-boolean
            kind = df.select(F.expr(predicate).alias("p")).schema["p"].dataType.simpleString()
            if kind != "boolean":
                raise ArchiveQueryError(f"--where {where!r}: is a {kind}, not a boolean expression over the "
                                        f"manifest's columns")
            chosen = F.coalesce(F.expr(predicate), F.lit(False))
        df = df.select(*cols, chosen.alias("lakesink_selected"))
        rows = df.collect()
    except (ParseException, AnalysisException) as e:
        raise ArchiveQueryError(f"--where {where!r}: {query_error_line(e)}") from None
    return (list(iter_objects(r for r in rows if r["lakesink_selected"])),
            list(iter_objects(r for r in rows if not r["lakesink_selected"])))


#: Spark's defaults for ``spark.sql.files.maxPartitionBytes`` / ``spark.sql.files.openCostInBytes``
MAX_PARTITION_BYTES = 128 * 1024 * 1024
OPEN_COST_BYTES = 4 * 1024 * 1024


def object_bytes(obj: ArchivedObject) -> int:
    """What reading ``obj`` fetches: its value object and side files, by the manifest's sizes (0 if unknown)."""
    return (obj.size_bytes or 0) + sum(int(s.get("size_bytes") or 0) for s in obj.side_files)


def pack_objects(sizes: list[int], max_partition_bytes: int = MAX_PARTITION_BYTES,
                 open_cost_bytes: int = OPEN_COST_BYTES, parallelism: int = 1) -> list[list[int]]:
    """Objects (by index) grouped into read tasks the way Spark's file sources group files: a task takes
    objects up to ``min(max_partition_bytes, max(open_cost_bytes, total / parallelism))`` bytes, each object
    counting its size plus ``open_cost_bytes``; an object is never split, and one larger than that limit is a
    task of its own. Objects stay in the given (topic, partition, offset) order, so each task's records come
    in order. ``total`` counts the open cost of every object, as Spark's does."""
    if not sizes:
        return []
    total = sum(sizes) + open_cost_bytes * len(sizes)
    limit = min(max_partition_bytes, max(open_cost_bytes, total // max(1, parallelism)))
    tasks: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i, size in enumerate(sizes):
        if current and used + size > limit:
            tasks.append(current)
            current, used = [], 0
        current.append(i)
        used += size + open_cost_bytes
    tasks.append(current)
    return tasks


def setting_bytes(runner: Any, key: str, default: int) -> int:
    """A byte-size or count setting of the runner's session (``128m``, ``4194304``), or ``default``."""
    value = runner.setting(key)
    if value is None:
        return default
    text = str(value).strip().lower().rstrip("b")
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    try:
        return int(float(text[:-1]) * units[text[-1]]) if text[-1:] in units else int(text)
    except (ValueError, IndexError):
        return default


def read_archive(spark: "SparkSession", config_or_manifest: Any, where: str | None = None, *, config: Any = None,
                 cut: Cut = NO_CUT, runner: Any = None) -> "DataFrame":
    """The archived Kafka records of the committed objects ``where`` selects, as a DataFrame with columns
    topic, partition, offset, timestamp, timestamp_type, key (binary), value (binary), headers
    (array<struct<key:string, value:binary>>); the bytes follow :func:`read_records`' rules per format.

    ``config_or_manifest``: the job's config (SinkConfig, dict or file path; its manifest is read), or a
    manifest object with ``config=``. ``where``: one boolean Spark SQL expression over the manifest's columns,
    e.g. ``"topic = 'orders' AND max_timestamp >= '2026-11-01'"`` (no subquery, set operation or table
    reference: :func:`select_objects`); only rows of kind ``object`` of the config's job are read, whatever it
    says. ``cut``: offsets / timestamps inside the objects (a :class:`Cut`).

    The objects are chosen now (one manifest version); their records are read lazily, on the executors,
    each object by one Spark task, each verified against the ETag and record count its row recorded. Objects
    are packed into tasks as Spark's file sources pack files (:func:`pack_objects`, with the session's
    ``spark.sql.files.maxPartitionBytes`` and ``openCostInBytes``): a task costs tens of milliseconds of
    scheduling whatever it reads, so many small objects are read a few per task, large ones one per task.
    Record order holds within each object (partition, offset); the DataFrame as a whole has no order."""
    from lakesink.executor.archive_tasks import RECORD_DDL, arrow_record_schema, read_archive_task

    if runner is None:
        from lakesink.runners.spark import SparkRunner

        runner = SparkRunner(spark)
    cfg, manifest = resolve_source(spark, config_or_manifest, config)
    objects = select_objects(spark, cfg, manifest, where)
    groups: list[list[ArchivedObject]] = []
    if objects:
        tasks = pack_objects([object_bytes(o) for o in objects],
                             setting_bytes(runner, "spark.sql.files.maxPartitionBytes", MAX_PARTITION_BYTES),
                             setting_bytes(runner, "spark.sql.files.openCostInBytes", OPEN_COST_BYTES),
                             runner.parallelism())
        groups = [[objects[i] for i in task] for task in tasks]
    parts = wiring.task_parts(cfg)  # one group of objects per task, read with the job's parts
    return runner.frame(lambda ids: read_archive_task(ids, groups, parts, cut), len(groups), RECORD_DDL,
                        arrow_record_schema())
