"""SQL over the manifest: the ``manifest`` table and the views of :mod:`lakesink.manifest.views`, on Spark or DuckDB.

``register_views(spark, config)`` registers them as temp views in a session (notebooks then use
``spark.sql``); ``sql(spark, config, query)`` returns the query's DataFrame; ``run_query`` collects it for the
CLI. The broker is contacted only when ``lag`` (or ``end_offsets``) is registered, so queries over the
manifest alone work with the broker down.

Every name shows the config's job only: the ``manifest`` view is the manifest's rows of ``job = <config name>``
(several jobs may share one manifest) and every view reads it; ``metrics`` and ``consumer_groups`` (the groups
table, :mod:`lakesink.manifest.groups`) are filtered the same way.
``all_jobs=True`` (``lakesink sql --all-jobs``) shows every job's rows; ``lag`` stays the config's job's (its
end offsets are the config's topics on the config's broker).

Two engines, one dialect (Spark SQL, as docs/sql.md writes it): a path manifest (delta-rs) is queried in
DuckDB (:mod:`lakesink.manifest.duck`, no JVM, about a second) unless Spark is asked for; a catalog manifest needs
Spark. On both, every statement is checked first (:func:`lakesink.manifest.queries.query_statements`): queries
only, over these names only, so a query cannot read another job's table, a path or a table function.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakesink.errors import ArchiveQueryError, InvalidArgumentError
from lakesink.manifest.queries import orders_rows, query_statements
from lakesink.manifest.views import (CONSUMER_GROUPS, END_OFFSET_COLUMNS, END_OFFSETS, MANIFEST, METRICS, VIEWS,
                                     needs_broker)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from lakesink.config import SinkConfig

__all__ = ["QueryResult", "register_views", "register_metrics", "sql", "run_query", "end_offset_rows", "DEFAULT_LIMIT",
           "QUERY_NAMES", "ENGINES", "sql_engine", "open_duckdb", "statement_names", "manifest_columns", "SqlSession", "run_queries",
           "read_manifest"]

DEFAULT_LIMIT = 1000
#: What a query may read, on either engine.
QUERY_NAMES = (MANIFEST, END_OFFSETS, METRICS, CONSUMER_GROUPS, *VIEWS)
#: ``lakesink sql --engine``: auto = DuckDB for a path manifest, Spark for a catalog one.
ENGINES = ("auto", "duckdb", "spark")


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

    from lakesink.driver.archive import manifest_frame, resolve_source

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
        register_groups(spark, cfg, all_jobs=all_jobs)
        names.append(CONSUMER_GROUPS)
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


def register_groups(spark: "SparkSession", cfg: "SinkConfig", *, all_jobs: bool = False) -> None:
    """The consumer-groups table (:mod:`lakesink.manifest.groups`) as the view ``consumer_groups``, as
    :func:`register_metrics` does the metrics table (empty when not written yet or unreadable)."""
    from pyspark.sql import functions as F

    from lakesink import wiring
    from lakesink.manifest.groups import GroupsTable, groups_ddl, groups_location

    loc = groups_location(cfg.manifest_location)
    try:
        frame = GroupsTable(loc, wiring.s3_settings(cfg), spark).frame(spark)
    except Exception as e:  # noqa: BLE001 - the manifest's views must not depend on it
        logging.getLogger("lakesink.driver.sql").warning("consumer groups table %s not readable: %s", loc,
                                                         str(e).splitlines()[0] if str(e) else type(e).__name__)
        frame = spark.createDataFrame([], groups_ddl())
    (frame if all_jobs else frame.where(F.col("job") == cfg.name)).createOrReplaceTempView(CONSUMER_GROUPS)


def _groups_arrow(cfg: "SinkConfig", all_jobs: bool):
    """The consumer-groups table as Arrow for the DuckDB route (empty when not written yet or unreadable)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from lakesink import wiring
    from lakesink.manifest.groups import GroupsTable, arrow_schema, groups_location

    loc = groups_location(cfg.manifest_location)
    try:
        table = GroupsTable(loc, wiring.s3_settings(cfg)).arrow()
    except Exception as e:  # noqa: BLE001 - as on the Spark route
        logging.getLogger("lakesink.driver.sql").warning("consumer groups table %s not readable: %s", loc,
                                                         str(e).splitlines()[0] if str(e) else type(e).__name__)
        table = pa.Table.from_batches([], schema=arrow_schema())
    return table if all_jobs or not table.num_rows else table.filter(pc.equal(table["job"], cfg.name))


def _metrics_arrow(cfg: "SinkConfig", all_jobs: bool):
    """The metrics table as Arrow for the DuckDB route (empty when turned off, not written yet, or unreadable)."""
    import pyarrow as pa

    from lakesink import wiring
    from lakesink.manifest.metrics import MetricsTable, metrics_location
    from lakesink.manifest.metrics import arrow_schema as metrics_schema

    loc = metrics_location(cfg)
    metrics = pa.Table.from_batches([], schema=metrics_schema())  # not Schema.empty_table(): it imports pandas
    if loc is not None:
        try:
            metrics = MetricsTable(loc, wiring.s3_settings(cfg)).arrow()
        except Exception as e:  # noqa: BLE001 - as on the Spark route: the views must not depend on it
            logging.getLogger("lakesink.driver.sql").warning(
                "metrics table %s not readable: %s", loc, str(e).splitlines()[0] if str(e) else type(e).__name__)
    if not all_jobs and metrics.num_rows:
        import pyarrow.compute as pc

        metrics = metrics.filter(pc.equal(metrics["job"], cfg.name))
    return metrics


def sql(spark: "SparkSession", config_or_manifest: Any, query: str, *, config: Any = None,
        all_jobs: bool = False) -> "DataFrame":
    """The DataFrame of ``query`` with the manifest and its views registered: the config's job's rows only,
    every job's with ``all_jobs``.

    Raises ArchiveQueryError (one line, exit code 2 in the CLI) for SQL that does not parse or names unknown
    tables or columns."""
    statements = query_statements(query, QUERY_NAMES)
    if len(statements) > 1:
        raise ArchiveQueryError(f"query: {len(statements)} statements; this runs one (lakesink sql --file runs several)")
    register_views(spark, config_or_manifest, config=config, with_lag=needs_broker(query), all_jobs=all_jobs)
    return statement_frame(spark, statements[0])


def statement_frame(spark: "SparkSession", statement: str) -> "DataFrame":
    """``statement`` (checked by :func:`query_statements`) on the views already registered, analysed now."""
    from pyspark.errors import AnalysisException, ParseException

    from lakesink.driver.archive import query_error_line

    try:
        df = spark.sql(statement)
        df.schema  # analysis is lazy on Spark Connect: fail here, not when collecting
    except (ParseException, AnalysisException) as e:
        raise ArchiveQueryError(f"query: {query_error_line(e)}") from None
    return df


def run_query(spark: "SparkSession", config_or_manifest: Any, query: str, *, config: Any = None,
              limit: int | None = DEFAULT_LIMIT, all_jobs: bool = False) -> QueryResult:
    """Run ``query`` and collect at most ``limit`` rows (None: all); the config's job's rows only unless
    ``all_jobs``. A query without its own ``ORDER BY`` gets its rows ordered by their columns, left to right (the
    views' natural key), as on the DuckDB route."""
    return collect(sql(spark, config_or_manifest, query, config=config, all_jobs=all_jobs), query, limit)


def collect(df: "DataFrame", query: str, limit: int | None) -> QueryResult:
    """At most ``limit`` rows of ``query``'s frame ``df``, ordered by its columns when ``query`` has no ORDER BY."""
    from pyspark.errors import AnalysisException, ParseException

    from lakesink.driver.archive import query_error_line

    try:
        if not orders_rows(query):  # the caller checked it is one query
            df = df.orderBy(*[c for c, t in df.dtypes if not t.startswith("map")])
        rows = df.limit(limit + 1).collect() if limit is not None else df.collect()
    except (ParseException, AnalysisException) as e:
        raise ArchiveQueryError(f"query: {query_error_line(e)}") from None
    truncated = limit is not None and len(rows) > limit
    rows = rows[:limit] if truncated else rows
    notes = [f"first {limit} rows shown (--limit)"] if truncated else []
    return QueryResult(list(df.columns), [tuple(r) for r in rows], truncated, notes)


def sql_engine(cfg: "SinkConfig", requested: str = "auto") -> str:
    """``duckdb`` or ``spark``: what runs ``lakesink sql`` for ``cfg``. DuckDB needs a path manifest (and a path
    metrics table, when there is one); asking for it with a catalog table is a usage error naming the table."""
    from lakesink import wiring

    if requested not in ENGINES:
        raise InvalidArgumentError(f"--engine {requested!r}: one of {', '.join(ENGINES)}")
    if requested == "spark":
        return "spark"
    catalog = wiring.catalog_table(cfg)
    if catalog is None:
        return "duckdb"
    if requested == "duckdb":
        raise InvalidArgumentError(f"--engine duckdb reads path tables only, and {catalog}: use --engine spark")
    return "spark"


def statement_names(statements: list[str]) -> set[str]:
    """The names of :data:`QUERY_NAMES` that ``statements`` (checked by :func:`query_statements`) may read, by a
    word match: a name in a string or a column alias counts too, so it can name too many, never too few."""
    import re

    return {n for n in QUERY_NAMES if any(re.search(rf"\b{n}\b", s, re.I) for s in statements)}


def _reads(names: set[str]) -> set[str]:
    """``names`` with every name the views among them read (after ``FROM``/``JOIN`` in their SQL), transitively:
    ``lag`` reads ``committed_offsets``, every view ``manifest``."""
    import re

    out, todo = set(names), [n for n in names if n in VIEWS]
    while todo:
        for n in re.findall(r"\b(?:from|join)\s+(\w+)", VIEWS[todo.pop()], re.I):
            if n.lower() in QUERY_NAMES and n.lower() not in out:
                out.add(n.lower())
                todo.extend([n.lower()] if n.lower() in VIEWS else [])
    return out


def manifest_columns(names: set[str]) -> list[str] | None:
    """The manifest columns the views among ``names`` (see :func:`statement_names`) read, in table order; None
    (every column) when ``names`` holds ``manifest`` itself, which a query may read whole. ``job`` and ``topic``
    always (the lag view's topics). A word match over the views' SQL, so a column too many at worst."""
    import re

    from lakesink.manifest.rows import COLUMN_NAMES

    if MANIFEST in names:
        return None
    words: set[str] = {"job", "topic"}
    for n in _reads(names) & set(VIEWS):
        text = VIEWS[n]
        if "*" in text.lower().replace("count(*)", ""):  # a view reading every column
            return None
        words.update(w.lower() for w in re.findall(r"\w+", text))
    return [c for c in COLUMN_NAMES if c in words]


def read_manifest(cfg: "SinkConfig", *, all_jobs: bool = False, names: set[str] | None = None) -> Any:
    """The rows of ``cfg``'s path manifest that :func:`open_duckdb` hands DuckDB for statements reading ``names``
    (None: every column): the config's job's only unless ``all_jobs``, as delta-rs returns them (an arro3 table)."""
    from lakesink import wiring
    from lakesink.errors import ManifestError

    manifest = wiring.manifest(cfg)
    if not manifest.exists():
        raise ManifestError(f"no manifest table at {manifest.location}: the job has not committed anything yet")
    return manifest.scan(job=None if all_jobs else cfg.name, columns=None if names is None else manifest_columns(names),
                         native=True)


def open_duckdb(cfg: "SinkConfig", *, all_jobs: bool = False, with_lag: bool = True, names: set[str] | None = None,
                rows: Any = None):
    """A :class:`lakesink.manifest.duck.DuckViews` of ``cfg``'s path manifest (read by delta-rs), its metrics
    table and, ``with_lag``, the broker's end offsets: the config's job's rows only unless ``all_jobs``.

    ``names`` (:func:`statement_names` of the statements to run; None: all): only the views and tables they read
    (and what those views read) are registered, and only the manifest columns those views read are read -- the
    manifest read and each view's transpilation are most of a one-query ``lakesink sql`` process's time. The
    manifest is handed to DuckDB as delta-rs returns it: pyarrow (and numpy with it) is imported only for the
    metrics and groups tables and the broker's end offsets, when a statement reads them. ``rows``: the manifest
    already read for these ``names`` (:func:`read_manifest`), else it is read here."""
    from lakesink.manifest.duck import DuckViews

    reads = None if names is None else _reads(names)
    rows = rows if rows is not None else read_manifest(cfg, all_jobs=all_jobs, names=names)
    tables = {MANIFEST: rows}
    if reads is None or METRICS in reads:
        tables[METRICS] = _metrics_arrow(cfg, all_jobs)
    if reads is None or CONSUMER_GROUPS in reads:
        tables[CONSUMER_GROUPS] = _groups_arrow(cfg, all_jobs)
    if with_lag:
        import pyarrow as pa

        own = pa.RecordBatchReader.from_stream(rows).read_all()
        topics = {t for j, t in zip(own["job"].to_pylist(), own["topic"].to_pylist()) if j == cfg.name}
        schema = pa.schema([(END_OFFSET_COLUMNS[0], pa.string()), (END_OFFSET_COLUMNS[1], pa.string()),
                            (END_OFFSET_COLUMNS[2], pa.int32()), (END_OFFSET_COLUMNS[3], pa.int64()),
                            (END_OFFSET_COLUMNS[4], pa.int64())])
        tables[END_OFFSETS] = pa.Table.from_pylist(
            [dict(zip(END_OFFSET_COLUMNS, r)) for r in end_offset_rows(cfg, topics)], schema=schema)
    return DuckViews(tables, None if reads is None else reads & set(VIEWS))


class SqlSession:
    """Several queries on one engine: one DuckDB connection (the broker is asked for end offsets the first time a
    statement needs ``lag``/``end_offsets``) or one Spark session. ``lakesink sql --file`` and its interactive
    mode use one; :func:`run_queries` is the one-call form."""

    def __init__(self, cfg: "SinkConfig", *, engine: str = "auto", spark: Any = None, all_jobs: bool = False):
        self.cfg, self.all_jobs, self.spark = cfg, all_jobs, spark
        self.engine = sql_engine(cfg, engine)
        if self.engine == "spark" and spark is None:
            raise InvalidArgumentError("the Spark route of lakesink sql needs a Spark session")
        self._db: Any = None
        self._db_lag = False
        self._db_names: set[str] = set()  # what the open connection holds (statement_names of what it was opened for)
        self._views: bool | None = None  # Spark: None until registered, then whether with lag

    def _duck(self, with_lag: bool, names: set[str]):
        """The connection, opened again (holding what it held and ``names``) when it lacks a name or lag."""
        if self._db is None or (with_lag and not self._db_lag) or not names <= self._db_names:
            if self._db is not None:
                self._db.close()
            with_lag = with_lag or self._db_lag
            self._db_names |= names
            self._db = open_duckdb(self.cfg, all_jobs=self.all_jobs, with_lag=with_lag, names=self._db_names)
            self._db_lag = with_lag
        return self._db

    def run(self, text: str, limit: int | None = DEFAULT_LIMIT) -> list[QueryResult]:
        """Every statement of ``text`` (``;``-separated), in order; at most ``limit`` rows each (None: all).
        Every statement is checked before the first runs."""
        statements = query_statements(text, QUERY_NAMES)
        results = []
        if self.engine == "duckdb":
            db = self._duck(any(needs_broker(s) for s in statements), statement_names(statements))
            for s in statements:
                columns, rows, truncated = db.query(s, limit, order=not orders_rows(s))
                results.append(QueryResult(columns, rows, truncated,
                                           [f"first {limit} rows shown (--limit)"] if truncated else []))
            return results
        session = self.spark() if callable(self.spark) else self.spark
        self.spark = session
        lag = any(needs_broker(s) for s in statements)
        if self._views is None or (lag and not self._views):  # once per session (again only to add lag)
            register_views(session, self.cfg, with_lag=lag, all_jobs=self.all_jobs)
            self._views = lag
        return [collect(statement_frame(session, s), s, limit) for s in statements]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> "SqlSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_queries(cfg: "SinkConfig", text: str, *, engine: str = "auto", spark: Any = None,
                limit: int | None = DEFAULT_LIMIT, all_jobs: bool = False) -> list[QueryResult]:
    """Every statement of ``text`` (``;``-separated Spark SQL queries), in order, on one connection or session:
    DuckDB or Spark as :func:`sql_engine` decides (``spark``: a session or a zero-argument callable returning one,
    needed only for the Spark route). At most ``limit`` rows each (None: all)."""
    with SqlSession(cfg, engine=engine, spark=spark, all_jobs=all_jobs) as session:
        return session.run(text, limit)
