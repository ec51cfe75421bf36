"""The Spark task runner: a job's tasks on Spark's executors (see :mod:`lakesink.runners`).

On a local master the tasks are a Python RDD's: a cold local driver JVM (every CLI run) then plans no Spark SQL
query and converts nothing to Arrow, about a second less of a cold start on two cores (measured by hand: first
job 3.1 -> 1.7 s, 1.4 s less JVM CPU). Elsewhere -- a cluster, Spark Connect (no SparkContext there), a shared
cluster where a Python RDD may not be allowed -- they run under ``spark.range(n, numPartitions=n).mapInArrow``:
exactly one id per task. Same tasks, same results.
"""
from __future__ import annotations

import contextlib
import functools
import logging
from typing import Any, Callable, Iterator

from lakesink.executor.progress import Counts, counted
from lakesink.runners import TaskFn, first_column
from lakesink.runners.progress import Progress, Tracking, track

log = logging.getLogger("lakesink.runners.spark")

__all__ = ["SparkRunner", "local_context", "CONNECT_PARALLELISM"]

#: Tasks a session without a SparkContext (Spark Connect) plans for when the server tells neither
#: ``spark.default.parallelism`` nor a local master: a serverless cluster scales its executors to the tasks.
CONNECT_PARALLELISM = 8


def local_context(spark: Any) -> Any:
    """The SparkContext of a session on a local master, else None (a cluster, or Spark Connect without one)."""
    from lakesink.manifest.table import is_connect

    if is_connect(spark):
        return None
    try:
        sc = spark.sparkContext
        return sc if sc.master.startswith("local") else None
    except Exception:  # noqa: BLE001 - Spark Connect and shared clusters have no SparkContext
        return None


def tasks_completed(spark: Any) -> int:
    """Tasks completed in the session's active stages (0 when the tracker cannot tell)."""
    try:
        tracker = spark.sparkContext.statusTracker()
        total = 0
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                total += info.numCompletedTasks
        return total
    except Exception:  # noqa: BLE001 - a display must never fail a batch
        return 0


def driver_host(spark: Any) -> str | None:
    """The address the executors reach the driver at (None: unknown)."""
    try:
        import socket

        host = spark.sparkContext.getConf().get("spark.driver.host")
        return socket.gethostbyname(host) if host else None
    except Exception:  # noqa: BLE001
        return None


class AccumulatorCounts:
    """A tracked batch's counter on Spark: an accumulator every task adds its counts to as it completes, and the
    status tracker's completed tasks."""

    def __init__(self, spark: Any):
        self.spark = spark
        from lakesink.executor.progress import CountsParam  # (imports pyspark: only where Spark runs)

        self.acc = spark.sparkContext.accumulator(Counts(), CountsParam())
        self.count = functools.partial(counted, acc=self.acc)

    @property
    def value(self) -> Counts:
        return self.acc.value

    def completed(self) -> int:
        return tasks_completed(self.spark)

    def done(self, rows: list[str]) -> None:
        """Nothing: the accumulator carries a completed task's counts."""


class SparkRunner:
    """Tasks on Spark. ``spark``: a SparkSession, or a zero-argument callable returning one, called when the
    first task runs (or :meth:`prepare`)."""

    name = "spark"

    def __init__(self, spark: Any):
        self._spark = spark

    @property
    def session(self) -> Any:
        """The session (started now if it was given as a callable)."""
        if callable(self._spark):
            self._spark = self._spark()
        return self._spark

    def cannot_run(self, cfg: Any) -> str | None:
        return None

    def prepare(self) -> bool:
        started = callable(self._spark)
        self.session  # noqa: B018 - starts it
        return started

    def run(self, fn: TaskFn, n: int, schema: str, on_done: Callable[[list[str]], None] | None = None) -> list[str]:
        spark = self.session
        sc = local_context(spark)
        if sc is not None:  # n slices of range(n): exactly one id per Spark partition
            return sc.parallelize(range(n), n).mapPartitions(lambda ids: first_column(fn(ids))).collect()
        rows = spark.range(0, n, 1, n).mapInArrow(lambda batches: fn(first_column(batches)), schema).collect()
        return [r[0] for r in rows]

    def frame(self, fn: TaskFn, n: int, schema: str, arrow_schema: Any) -> Any:
        spark = self.session
        if n == 0:
            return spark.createDataFrame([], schema)
        # range(n) in n slices: one id per Spark task (no Python RDD, no shuffle)
        return spark.range(0, n, 1, n).mapInArrow(lambda batches: fn(first_column(batches)), schema)

    def map_frame(self, df: Any, fn: Callable[[Iterator[Any]], Iterator[Any]], schema: str) -> list[str]:
        """``fn`` over a DataFrame's Arrow batches (e.g. Spark's Kafka source); the first column of its batches.
        Only a Spark runner has it: a config that reads Kafka through Spark is refused by the local runner
        (:meth:`lakesink.runners.local.LocalRunner.cannot_run`)."""
        return [r[0] for r in df.mapInArrow(fn, schema).collect()]

    def parallelism(self) -> int:
        """The SparkContext's default parallelism; on Spark Connect (no SparkContext in this process) the server's
        ``spark.default.parallelism``, else the task slots of a local ``spark.master``, else
        :data:`CONNECT_PARALLELISM`."""
        from lakesink.manifest.table import is_connect
        from lakesink.runners.local import local_parallelism

        spark = self.session
        if not is_connect(spark):
            try:
                return int(spark.sparkContext.defaultParallelism)
            except Exception:  # noqa: BLE001 - a shared cluster may refuse the SparkContext: as on Connect
                pass
        value = self.setting("spark.default.parallelism")
        if value and value.isdigit():
            return int(value)
        return local_parallelism(self.setting("spark.master") or "") or CONNECT_PARALLELISM

    def setting(self, key: str) -> str | None:
        try:
            value = self.session.conf.get(key, None)
        except Exception:  # noqa: BLE001 - a setting Spark Connect refuses to show is unset to us
            return None
        return None if value is None else str(value)

    @contextlib.contextmanager
    def track(self, listener: Callable[[Progress], None] | None, batch_id: int,
              partitions: int) -> Iterator[Tracking]:
        spark = self.session

        def counter() -> AccumulatorCounts | None:
            try:
                return AccumulatorCounts(spark)
            except Exception as e:  # noqa: BLE001 - e.g. Spark Connect has no SparkContext: no display, same batch
                log.debug("no progress display: %s", e)
                return None

        with track(listener, batch_id, partitions, counter, driver_host(spark)) as tracking:
            yield tracking
