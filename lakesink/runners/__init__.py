"""Task runners: what runs a job's tasks, chosen once per run (:mod:`lakesink.runtime.engine`).

Every job -- a sink batch, a restore, ``read_archive`` -- is ``n`` tasks, each a function of its task ids
(``fn(ids) -> Arrow batches``, ids ``0..n-1``, one id per task). A :class:`TaskRunner` runs them:

* :class:`~lakesink.runners.spark.SparkRunner`: Spark's executors (``spark.range(n).mapInArrow``; on a local
  master a Python RDD, which plans no SQL query); works on a cluster and over Spark Connect;
* :class:`~lakesink.runners.local.LocalRunner`: local worker processes, no JVM, for runs where Spark would only
  schedule Python tasks on this machine.

The jobs never ask which one they have: same tasks, same results. A runner also tracks a batch's progress
(:meth:`TaskRunner.track`) and says what it cannot run (:meth:`TaskRunner.cannot_run`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterable, Iterator, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from lakesink.runners.progress import Progress, Tracking

#: A task body: its ids in, Arrow record batches out
TaskFn = Callable[[Iterable[int]], Iterator["pa.RecordBatch"]]

__all__ = ["TaskFn", "TaskRunner", "first_column"]


class TaskRunner(Protocol):
    """Runs a job's ``n`` tasks (see the module docstring)."""

    #: "spark" or "local", for reports and logs
    name: str

    def cannot_run(self, cfg: Any) -> str | None:
        """Why this runner cannot run ``cfg``'s tasks (None: it can)."""

    def prepare(self) -> bool:
        """Start what the tasks need if it is not started yet (a session given as a callable); True if it did."""

    def run(self, fn: TaskFn, n: int, schema: str, on_done: Callable[[list[str]], None] | None = None) -> list[str]:
        """Run ``fn`` on ids ``0..n-1``, one per task; the first (string) column of every batch, in task order.
        ``schema`` is the batches' Spark DDL; ``on_done`` gets each task's strings as it completes, where the
        runner can tell."""

    def frame(self, fn: TaskFn, n: int, schema: str, arrow_schema: "pa.Schema") -> Any:
        """``fn``'s batches on ids ``0..n-1`` as one table: a lazy Spark DataFrame, or a ``pyarrow.Table``."""

    def parallelism(self) -> int:
        """How many tasks run at once."""

    def setting(self, key: str) -> str | None:
        """A Spark setting of the session the tasks run in (None: unset, or no session)."""

    def track(self, listener: "Callable[[Progress], None] | None", batch_id: int,
              partitions: int) -> "ContextManager[Tracking]":
        """A batch's progress while its tasks run (:func:`lakesink.runners.progress.track`)."""


def first_column(batches: Iterable["pa.RecordBatch"]) -> Iterator[Any]:
    """The values of each batch's first column, one by one: a task's result strings, or the ids a
    ``spark.range(...).mapInArrow`` task is handed."""
    for b in batches:
        yield from b.column(0).to_pylist()
