"""A sink batch's progress while its Spark job runs, for a display (:mod:`lakesink.cli.progress`).

Two sources, polled by one driver thread every :data:`POLL_S`: an accumulator of
:class:`~lakesink.executor.progress.Counts` that every task adds its archived counts to when it completes
(:func:`lakesink.executor.progress.counted`), and Spark's status tracker (tasks completed of the active stages:
one task per planned Kafka range, so partitions done also counts ranges that held no record). Updates arrive per
completed task: a batch of one partition shows its numbers when that partition is done.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from lakesink.executor.progress import Counts, CountsParam, counted, uncounted

log = logging.getLogger("lakesink.driver.progress")

__all__ = ["Progress", "POLL_S", "track"]

#: How often the driver looks at the accumulator and the status tracker.
POLL_S = 0.5


@dataclass(frozen=True)
class Progress:
    """A batch so far: what its completed tasks archived."""

    batch_id: int
    partitions_total: int
    partitions_done: int = 0
    records_read: int = 0
    records: int = 0
    bytes: int = 0
    objects: int = 0
    elapsed_s: float = 0.0
    done: bool = False


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


@contextlib.contextmanager
def track(spark: Any, listener: Callable[[Progress], None] | None, batch_id: int, partitions: int,
          poll_s: float = POLL_S) -> Iterator[Callable[[Iterator[Any]], Iterator[Any]]]:
    """While the body runs the batch's Spark job, call ``listener`` with its :class:`Progress` every ``poll_s``
    and once more, ``done``, when the body succeeded. Yields the wrapper every task's result
    iterator must go through (:func:`~lakesink.executor.progress.counted`; the identity without a listener)."""
    if listener is None:
        yield uncounted
        return
    acc = spark.sparkContext.accumulator(Counts(), CountsParam())
    t0 = time.monotonic()
    stop = threading.Event()
    done_tasks = [0]

    def snapshot(done: bool = False) -> Progress:
        c: Counts = acc.value
        done_tasks[0] = max(done_tasks[0], c.partitions, tasks_completed(spark))
        return Progress(batch_id, partitions, min(partitions, partitions if done else done_tasks[0]),
                        c.records_read, c.records, c.bytes, c.objects, time.monotonic() - t0, done)

    def call(p: Progress) -> None:
        try:
            listener(p)
        except Exception as e:  # noqa: BLE001 - a display must never fail a batch
            log.debug("progress listener failed: %s", e)

    def poll() -> None:
        while not stop.wait(poll_s):
            call(snapshot())  # every poll: the elapsed time changes too (a display throttles itself)

    call(snapshot())
    thread = threading.Thread(target=poll, name="lakesink-progress", daemon=True)
    thread.start()
    ok = False
    try:
        yield functools.partial(counted, acc=acc)
        ok = True
    finally:
        stop.set()
        thread.join(timeout=5)
        if ok:
            call(snapshot(done=True))
