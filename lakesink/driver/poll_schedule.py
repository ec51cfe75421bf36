"""When a continuous sink polls next: at ``--interval``, or earlier when a file left open becomes closable.

With ``rotate.interval.ms`` (a time-based partitioner, a ``Record``/``RecordField`` timestamp) a file closes when a
record timestamped at or after its base + the interval is read. A batch that leaves files open reports, per
partition, when that is (:attr:`lakesink.executor.results.PartitionStatus.due_ms`); the earliest is the batch's
``due_ms``. When it lies after the batch's Kafka snapshot (the producer has not yet written the record that closes
the file), the record arrives about then: the next poll starts at ``due_ms + slack`` (converted to the monotonic
clock the loop waits on) instead of waiting for the interval. When it lies before the snapshot, the closing record
was not there although it was due: its arrival says nothing about the clock, so the interval stands.

The schedule is never later than the interval's (``--interval`` after the last poll began) and never sooner than
``min_gap_s`` after the last poll ended, so partitions rotating out of step do not cause a poll storm. It is only a
hint: what a poll reads and commits is decided by the manifest's offsets, as before; a crash loses nothing of it.
With the ``Wallclock`` extractor records are stamped with each batch's own clock, so re-read open files never close
on time and no ``due_ms`` is used.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NextPoll", "next_poll", "DUE", "INTERVAL"]

DUE = "a file is due"
INTERVAL = "interval"


@dataclass(frozen=True)
class NextPoll:
    """How long to wait before the next poll (seconds, >= 0) and why (:data:`DUE` or :data:`INTERVAL`)."""

    wait_s: float
    reason: str

    def words(self) -> str:
        return f"next poll in {self.wait_s:.1f} s: {self.reason}"


def next_poll(*, interval_s: float, started: float, now: float, due_ms: int | None, snapshot_ms: int | None,
              wall_now_ms: int, slack_s: float = 1.0, min_gap_s: float = 1.0) -> NextPoll:
    """The wait before the next poll of a continuous run.

    ``started``/``now``: the monotonic times the last poll began and ended; ``interval_s``: ``--interval``;
    ``due_ms``: the earliest time (epoch ms, record time) a file the last poll left open becomes closable, or None;
    ``snapshot_ms``: the wall-clock time of that poll's Kafka snapshot; ``wall_now_ms``: the wall clock at ``now``.
    """
    by_interval = max(0.0, interval_s - (now - started))
    if due_ms is None or snapshot_ms is None or due_ms + slack_s * 1000 <= snapshot_ms:
        return NextPoll(by_interval, INTERVAL)
    by_due = max(min_gap_s, (due_ms - wall_now_ms) / 1000.0 + slack_s)
    if by_due < by_interval:
        return NextPoll(by_due, DUE)
    return NextPoll(by_interval, INTERVAL)
