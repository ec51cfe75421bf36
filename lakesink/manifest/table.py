"""The manifest: a Delta table with one row per committed object (or offset range without one).

It is the single source of truth for what is archived and where the next batch starts:
``next offset(job, topic, partition) = max(range_end) + 1``. A batch's rows are appended in ONE
Delta transaction tagged ``txnAppId=job, txnVersion=batch_id``; Delta skips a repeated or stale
version silently, so every commit carries ``userMetadata`` naming job, batch and run, and afterwards
the table history must hold that commit with all our rows, else we fail loudly (another run won). The table is append-only; ``schemas/manifest.sql`` is generated from ``COLUMNS``.

Everything here is SQL or the DataFrame API, so a Spark Connect session works as a classic one: the history is
``DESCRIBE HISTORY``, not the Delta Python API (``DeltaTable.forPath``), whose Connect route needs the Delta Connect
server plugin that a Connect server may lack (``CONNECT_INVALID_PLAN.NO_HANDLER_FOR_EXTENSION``). The one JVM
call left, :meth:`Manifest.warm_commit`, is an optimisation skipped on Connect.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable


from lakesink.errors import FencedError, ManifestError
from lakesink.manifest.location import parse_location
from lakesink.manifest.rows import COLUMNS, ManifestRow

log = logging.getLogger("lakesink.manifest")

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession



def ddl(location: str) -> str:
    """CREATE TABLE statement for a manifest at a path or catalog name."""
    target = _sql_target(location)
    cols = ",\n".join(
        f"  {n} {t}{'' if nullable else ' NOT NULL'} COMMENT '{c.replace(chr(39), '')}'"
        for n, t, nullable, c in COLUMNS)
    return (f"CREATE TABLE IF NOT EXISTS {target} (\n{cols}\n) USING DELTA\n"
            f"PARTITIONED BY (topic)\n"
            f"TBLPROPERTIES ('delta.appendOnly' = 'true')")


def is_connect(spark: object) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no SparkContext, no py4j: SQL and DataFrames only).
    pyspark's own class test; a process without the Connect client (the ``connect`` extra) has no such session."""
    import sys

    module = sys.modules.get("pyspark.sql.connect.session")
    return module is not None and isinstance(spark, module.SparkSession)


def _is_path(location: str) -> bool:
    return parse_location(location).is_path  # the one path-or-catalog rule (lakesink.manifest.location)


def _sql_target(location: str) -> str:
    return parse_location(location).sql_target


@dataclass(frozen=True)
class PartitionState:
    """What the manifest knows about one (job, topic, partition)."""

    topic: str
    partition: int
    next_offset: int
    kafka_cluster_id: str | None
    topic_id: str | None


@dataclass(frozen=True)
class ManifestSnapshot:
    partitions: dict[tuple[str, int], PartitionState]
    last_batch_id: int  # -1 if the job never committed

    @property
    def next_batch_id(self) -> int:
        return self.last_batch_id + 1


class Manifest:
    """A manifest table at ``location``: a path (``s3a://…``, ``/…``, ``file:/…``) or a catalog name."""

    def __init__(self, spark: "SparkSession", location: str):
        self.spark = spark
        self.location = location

    # -- table
    def ensure(self, attempts: int = 5) -> None:
        """Create the table if it does not exist (idempotent, safe to race).

        Two runs creating the same new path table race in Delta: the loser sees
        ProtocolChangedException, or DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION while the winner's
        first commit is not yet visible. Retrying CREATE TABLE IF NOT EXISTS then finds the table.
        """
        import time

        for attempt in range(attempts):
            try:
                self.spark.sql(ddl(self.location))
                return
            except Exception as e:  # noqa: BLE001 - py4j wraps everything
                if "already exists" in str(e).lower() or "DELTA_TABLE_ALREADY_EXISTS" in str(e):
                    return
                if attempt == attempts - 1:
                    raise ManifestError(f"cannot create manifest table {self.location}: {_first_line(e)}") from None
                time.sleep(0.5 * (attempt + 1))

    def exists(self) -> bool:
        """Whether the table exists yet (a job that never ran has none). A path table on a Spark Connect session:
        whether ``DESCRIBE HISTORY`` finds it (Delta's ``isDeltaTable`` needs the Delta Connect plugin there)."""
        try:
            if not _is_path(self.location):
                return bool(self.spark.catalog.tableExists(self.location))
            if is_connect(self.spark):
                return self._path_table_found()
            from delta.tables import DeltaTable

            return bool(DeltaTable.isDeltaTable(self.spark, self.location))
        except ManifestError:
            raise
        except Exception as e:  # noqa: BLE001
            raise ManifestError(f"cannot read manifest {self.location}: {_first_line(e)}") from None

    def _path_table_found(self) -> bool:
        """A path table's history answers (True), or Delta says there is no table there (False); anything else
        (an unreachable store, access denied) raises."""
        try:
            self._history(1).collect()
            return True
        except Exception as e:  # noqa: BLE001
            if _no_table_error(e):
                return False
            raise

    def df(self) -> "DataFrame":
        if _is_path(self.location):
            return self.spark.read.format("delta").load(self.location)
        return self.spark.table(self.location)

    # -- reads
    def snapshot(self, job: str) -> ManifestSnapshot:
        """Next offsets and last batch id of ``job``, read in one query (one table version)."""
        from pyspark.sql import functions as F

        try:
            rows = (self.df().where(F.col("job") == job)
                    .groupBy("topic", "kafka_partition")
                    .agg(F.max("range_end").alias("last"),
                         F.max_by("kafka_cluster_id", "range_end").alias("cluster"),
                         F.max_by("topic_id", "range_end").alias("topic_id"),
                         F.max("batch_id").alias("batch"))
                    .collect())
        except Exception as e:  # noqa: BLE001
            raise ManifestError(f"cannot read manifest {self.location}: {_first_line(e)}") from None
        parts = {(r.topic, r.kafka_partition): PartitionState(r.topic, r.kafka_partition, r.last + 1, r.cluster, r.topic_id)
                 for r in rows}
        last = max((r.batch for r in rows), default=-1)
        return ManifestSnapshot(parts, last)

    def committed_keys(self, job: str | None = None) -> set[str]:
        """Every object key (value and side files) the manifest references."""
        from pyspark.sql import functions as F

        df = self.df()
        if job:
            df = df.where(F.col("job") == job)
        df = df.where(F.col("kind") == "object")
        keys = {r.object_key for r in df.select("object_key").collect() if r.object_key}
        side = df.select(F.explode_outer("side_files.key").alias("k")).where("k is not null").collect()
        keys.update(r.k for r in side)
        return keys

    def topics(self, job: str) -> set[str]:
        """Every topic ``job`` has rows for."""
        from pyspark.sql import functions as F

        return {r.topic for r in self.df().where(F.col("job") == job).select("topic").distinct().collect()}

    def committed_owners(self, keys: set[str]) -> dict[str, set[str]]:
        """For each of ``keys`` (value or side-file keys) that any row references: the jobs whose rows
        do. One query; keys no row references are absent."""
        from pyspark.sql import functions as F

        if not keys:
            return {}
        wanted = list(keys)
        df = self.df().where(F.col("kind") == "object")
        values = df.where(F.col("object_key").isin(wanted)).select("job", F.col("object_key").alias("k"))
        sides = (df.select("job", F.explode("side_files.key").alias("k")).where(F.col("k").isin(wanted)))
        owners: dict[str, set[str]] = {}
        for r in values.union(sides).distinct().collect():
            owners.setdefault(r.k, set()).add(r.job)
        return owners

    # -- commit
    def commit(self, job: str, batch_id: int, run_id: str, rows: Iterable[ManifestRow]) -> int:
        """Append ``rows`` in one transaction (txnAppId=job, txnVersion=batch_id); return the count.

        Raises FencedError if Delta skipped the write (batch already committed by another run)
        or a concurrent writer won the same batch id.

        Delta skips a write whose txnVersion is not above the stored one with only an INFO log, so
        the commit is verified afterwards: the write carries ``userMetadata`` naming job, batch and
        run, and the table history after the version seen before the write must hold exactly one
        commit with it, of ``len(rows)`` rows. (Reading the history reads a few commit files on the
        driver; reading the rows back would run a query over the new table version.)
        """
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        rows = [r.stamped(job, batch_id, run_id, now) for r in rows]
        if not rows:
            return 0
        tag = commit_tag(job, batch_id, run_id)
        before = self.version()
        df = self.spark.createDataFrame([r.as_tuple() for r in rows], schema=self.spark_schema())
        writer = (df.coalesce(1).write.format("delta").mode("append")
                  .option("txnAppId", job).option("txnVersion", batch_id).option("userMetadata", tag))
        try:
            if _is_path(self.location):
                writer.save(self.location)
            else:
                writer.saveAsTable(self.location)
        except Exception as e:  # noqa: BLE001
            msg = str(e)
            if "ConcurrentTransaction" in msg or "DELTA_CONCURRENT_TRANSACTION" in msg or "ConcurrentAppend" in msg:
                raise FencedError(
                    f"job {job!r} batch {batch_id}: another run committed the same batch concurrently; "
                    f"this run ({run_id}) committed nothing") from None
            raise ManifestError(f"commit of job {job!r} batch {batch_id} to {self.location} failed: "
                                f"{_first_line(e)}") from None
        mine = self.commits_since(before, tag)
        present = sum(mine)
        if len(mine) != 1 or present != len(rows):
            raise FencedError(
                f"job {job!r} batch {batch_id} was already committed by another run; this run ({run_id}) "
                f"committed nothing ({present}/{len(rows)} rows in {len(mine)} commit(s) of this run). "
                f"Re-run to continue from the manifest.")
        return present

    def warm_commit(self) -> None:
        """Resolve the table's current transaction ids now, best effort (path tables, classic PySpark).

        Delta resolves them in every append with ``txnAppId``: on a snapshot it has not resolved
        them for, three state-reconstruction jobs, about half of a small commit. Called while the
        executors archive, it takes that off the commit's critical path; the append then finds
        them cached on the same snapshot (or, if another writer committed meanwhile, resolves them
        itself as before). Nothing here can change what is committed.
        """
        if not _is_path(self.location) or is_connect(self.spark):
            return  # a Connect session has no JVM in this process: the append resolves them itself
        try:
            jvm = self.spark._jvm
            none = jvm.scala.Option.empty()
            delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(self.spark._jsparkSession, self.location)
            delta_log.update(False, none, none).setTransactions()
        except Exception as e:  # noqa: BLE001 - no JVM access (Spark Connect), another Delta version
            log.debug("manifest %s: transaction ids not pre-resolved: %s", self.location, _first_line(e))

    def _history(self, limit: int) -> "DataFrame":
        """The table's last ``limit`` commits, newest first (``DESCRIBE HISTORY``: the same command as the Delta
        Python API's ``history()``, on every session kind, Spark Connect without Delta's plugin included)."""
        return self.spark.sql(f"DESCRIBE HISTORY {_sql_target(self.location)} LIMIT {int(limit)}")

    def version(self) -> int:
        """The table's latest version (-1 if it has no commit yet)."""
        rows = self._history(1).select("version").collect()
        return rows[0].version if rows else -1

    def commits_since(self, version: int, tag: str) -> list[int]:
        """Output row counts of the commits after ``version`` whose userMetadata is ``tag``."""
        limit = 8
        while True:
            hist = self._history(limit).select("version", "userMetadata", "operationMetrics").collect()
            newer = [h for h in hist if h.version > version]
            if len(newer) < len(hist) or len(hist) < limit:  # reached ``version`` (or the table's start)
                return [int((h.operationMetrics or {}).get("numOutputRows", -1))
                        for h in newer if h.userMetadata == tag]
            limit *= 4

    def spark_schema(self):
        from pyspark.sql.types import StructType

        return StructType.fromDDL(", ".join(f"{n} {t}" for n, t, _nullable, _c in COLUMNS))


def commit_tag(job: str, batch_id: int, run_id: str) -> str:
    """The ``userMetadata`` of a lakesink commit (``DESCRIBE HISTORY`` shows it)."""
    return json.dumps({"lakesink_job": job, "batch_id": batch_id, "run_id": run_id}, separators=(",", ":"))


#: Delta's answers for "no Delta table at this path" (error classes, and the words of older messages)
_NO_TABLE = ("DELTA_MISSING_DELTA_TABLE", "DELTA_PATH_DOES_NOT_EXIST", "DELTA_TABLE_NOT_FOUND", "PATH_NOT_FOUND",
             "is not a Delta table")


def _no_table_error(e: Exception) -> bool:
    """Whether ``e`` says there is no Delta table at the path (not that the store failed)."""
    get = getattr(e, "getCondition", None) or getattr(e, "getErrorClass", None)
    try:
        condition = get() if get is not None else None
    except Exception:  # noqa: BLE001
        condition = None
    if condition and any(condition.startswith(c) for c in _NO_TABLE[:4]):
        return True
    return any(word in str(e) for word in _NO_TABLE)


def _first_line(e: Exception) -> str:
    """The first meaningful line: py4j's "An error occurred while calling oN.x." names no cause."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    if lines[0].startswith("An error occurred while calling") and len(lines) > 1:
        return lines[1].lstrip(": ")
    return lines[0]


def write_ddl_file(path: str, location: str = "lakesink.manifest") -> None:
    """Regenerate ``schemas/manifest.sql`` (a test keeps it in sync with ``COLUMNS``)."""
    with open(path, "w") as f:
        f.write("-- Generated by lakesink.manifest.write_ddl_file from lakesink/manifest/rows.py COLUMNS.\n"
                "-- The sink creates the table itself; use this to create it up front in a catalog.\n")
        f.write(ddl(location) + ";\n")
