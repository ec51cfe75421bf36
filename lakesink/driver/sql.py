"""Spark SQL over the manifest: the ``manifest`` table and the views of :mod:`lakesink.manifest.views`.

``register_views(spark, config)`` registers them as temp views in a session (notebooks then use
``spark.sql``); ``sql(spark, config, query)`` returns the query's DataFrame; ``run_query`` collects it for the
CLI. The broker is contacted only when ``lag`` (or ``end_offsets``) is registered, so queries over the
manifest alone work with the broker down.

Every name shows the config's job only: the ``manifest`` view is the manifest's rows of ``job = <config name>``
(several jobs may share one manifest) and every view reads it; ``metrics`` is filtered the same way.
``all_jobs=True`` (``lakesink sql --all-jobs``) shows every job's rows; ``lag`` stays the config's job's (its
end offsets are the config's topics on the config's broker).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakesink.driver.archive import manifest_frame, query_error_line, resolve_source
from lakesink.errors import ArchiveQueryError
from lakesink.manifest.views import END_OFFSET_COLUMNS, END_OFFSETS, MANIFEST, METRICS, VIEWS, needs_broker

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from lakesink.config import SinkConfig

__all__ = ["QueryResult", "register_views", "register_metrics", "sql", "run_query", "end_offset_rows", "DEFAULT_LIMIT"]

DEFAULT_LIMIT = 1000


@dataclass
class QueryResult:
    """A collected query: column names, rows (tuples of Python values) and whether ``limit`` cut it."""

    columns: list[str]
    rows: list[tuple]
    truncated: bool = False
    notes: list[str] = field(default_factory=list)


def end_offset_rows(cfg: "SinkConfig", topics: set[str]) -> list[tuple]:
    """``(job, topic, partition, earliest, end)`` from the broker for the job's configured topics plus
    ``topics`` (those its manifest rows name) that still exist."""
    from lakesink.driver.kafka_admin import job_bounds

    bounds = job_bounds(cfg.kafka_options, list(cfg.topics), cfg.topics_regex, topics,
                        cfg.kafka_retry_deadline_ms / 1000.0)
    return [(cfg.name, t, p, b.earliest, b.latest) for (t, p), b in sorted(bounds.items())]


def register_views(spark: "SparkSession", config_or_manifest: Any, *, config: Any = None,
                   with_lag: bool = True, all_jobs: bool = False) -> list[str]:
    """Register ``manifest`` and every view as session temp views; returns their names.

    Every view shows the rows of the config's job only, unless ``all_jobs`` (every job sharing the manifest).
    ``with_lag=False`` leaves out ``end_offsets`` and ``lag`` (no broker call)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType, IntegerType

    cfg, manifest = resolve_source(spark, config_or_manifest, config)
    mdf = manifest_frame(spark, manifest)
    if not all_jobs:
        # scoped where the base view is registered, so every view over it (and every user query) inherits it
        mdf = mdf.where(F.col("job") == cfg.name)
    mdf.createOrReplaceTempView(MANIFEST)
    names = [MANIFEST]
    if with_lag:
        topics = {r[0] for r in mdf.where(mdf.job == cfg.name).select("topic").distinct().collect()}
        schema = StructType([StructField(END_OFFSET_COLUMNS[0], StringType()),
                             StructField(END_OFFSET_COLUMNS[1], StringType()),
                             StructField(END_OFFSET_COLUMNS[2], IntegerType()),
                             StructField(END_OFFSET_COLUMNS[3], LongType()),
                             StructField(END_OFFSET_COLUMNS[4], LongType())])
        spark.createDataFrame(end_offset_rows(cfg, topics), schema).createOrReplaceTempView(END_OFFSETS)
        names.append(END_OFFSETS)
    for name, text in VIEWS.items():
        if name == "lag" and not with_lag:
            continue
        spark.sql(text).createOrReplaceTempView(name)
        names.append(name)
    if cfg is not None:
        register_metrics(spark, cfg, all_jobs=all_jobs)
        names.append(METRICS)
    return names


def register_metrics(spark: "SparkSession", cfg: "SinkConfig", *, all_jobs: bool = False) -> None:
    """The job's metrics table (:mod:`lakesink.manifest.metrics`) as the view ``metrics``: empty when turned off,
    not written yet, or unreadable (a warning: the manifest's views must not depend on it). Only the config's
    job's rows (jobs sharing a manifest share its default metrics table) unless ``all_jobs``."""
    import logging

    from pyspark.sql import functions as F

    from lakesink import wiring
    from lakesink.manifest.metrics import MetricsTable, metrics_ddl, metrics_location

    loc = metrics_location(cfg)
    frame = None
    if loc is not None:
        try:
            frame = MetricsTable(loc, wiring.s3_settings(cfg), spark).frame(spark)
        except Exception as e:  # noqa: BLE001
            logging.getLogger("lakesink.driver.sql").warning("metrics table %s not readable: %s", loc,
                                                             str(e).splitlines()[0] if str(e) else type(e).__name__)
    frame = frame if frame is not None else spark.createDataFrame([], metrics_ddl())
    (frame if all_jobs else frame.where(F.col("job") == cfg.name)).createOrReplaceTempView(METRICS)


def sql(spark: "SparkSession", config_or_manifest: Any, query: str, *, config: Any = None,
        all_jobs: bool = False) -> "DataFrame":
    """The DataFrame of ``query`` with the manifest and its views registered: the config's job's rows only,
    every job's with ``all_jobs``.

    Raises ArchiveQueryError (one line, exit code 2 in the CLI) for SQL that does not parse or names unknown
    tables or columns."""
    from pyspark.errors import AnalysisException, ParseException

    register_views(spark, config_or_manifest, config=config, with_lag=needs_broker(query), all_jobs=all_jobs)
    try:
        df = spark.sql(query)
        df.schema  # analysis is lazy on Spark Connect: fail here, not when collecting
    except (ParseException, AnalysisException) as e:
        raise ArchiveQueryError(f"query: {query_error_line(e)}") from None
    return df


def run_query(spark: "SparkSession", config_or_manifest: Any, query: str, *, config: Any = None,
              limit: int | None = DEFAULT_LIMIT, all_jobs: bool = False) -> QueryResult:
    """Run ``query`` and collect at most ``limit`` rows (None: all); the config's job's rows only unless
    ``all_jobs``."""
    from pyspark.errors import AnalysisException, ParseException

    df = sql(spark, config_or_manifest, query, config=config, all_jobs=all_jobs)
    try:
        rows = df.limit(limit + 1).collect() if limit is not None else df.collect()
    except (ParseException, AnalysisException) as e:
        raise ArchiveQueryError(f"query: {query_error_line(e)}") from None
    truncated = limit is not None and len(rows) > limit
    rows = rows[:limit] if truncated else rows
    notes = [f"first {limit} rows shown (--limit)"] if truncated else []
    return QueryResult(list(df.columns), [tuple(r) for r in rows], truncated, notes)
