"""Batch progress from the executors: each task's archived counts reach the driver through a Spark accumulator.

:func:`counted` wraps a task's result iterator (:func:`lakesink.executor.task.archive_partitions`' JSON rows) and
adds what they describe -- records read, records and bytes archived, objects, partitions -- to an accumulator of
:class:`Counts`. Spark merges task updates on the driver as each task completes (one task per Kafka partition),
which :mod:`lakesink.runners.progress` polls while the batch runs. Between completions, :func:`live_counts` sends
the records a task has read so far to the driver in UDP datagrams (best effort: the display's only live source,
since PySpark sends a task's accumulator updates when the task ends).

A restore's tasks go the same way: :func:`counts_of` also reads a restore task's result row (records produced),
and :class:`LiveSender` sends the records a restore worker has produced so far (:func:`produced_counts`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

__all__ = ["Counts", "CountsParam", "counted", "uncounted", "counts_of", "live_counts", "LIVE_EVERY_S", "LiveSender",
           "produced_counts"]


@dataclass(frozen=True)
class Counts:
    """What completed tasks of a batch archived."""

    partitions: int = 0
    records_read: int = 0
    records: int = 0
    bytes: int = 0
    objects: int = 0

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(self.partitions + other.partitions, self.records_read + other.records_read,
                      self.records + other.records, self.bytes + other.bytes, self.objects + other.objects)


def __getattr__(name: str) -> Any:
    """``CountsParam``, made at its first use: importing pyspark costs ~0.4 CPU-s, which the local engine's
    processes (the CLI, its workers), importing this module for the rest, never pay."""
    if name != "CountsParam":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:  # pyspark is there wherever Spark runs the tasks
        from pyspark.accumulators import AccumulatorParam
    except ImportError:  # pragma: no cover
        AccumulatorParam = object  # type: ignore[misc,assignment]

    class CountsParam(AccumulatorParam):  # type: ignore[misc,valid-type]
        """Spark accumulator parameter for :class:`Counts`."""

        def zero(self, value: Counts) -> Counts:
            return Counts()

        def addInPlace(self, value1: Counts, value2: Counts) -> Counts:
            return value1 + value2

    globals()["CountsParam"] = CountsParam
    return CountsParam


def counts_of(rows: list[str]) -> Counts:
    """The :class:`Counts` of one task's result rows (JSON, :func:`lakesink.executor.results.encode_result`; or a
    restore task's row, :func:`lakesink.executor.archive_tasks.restore_task`: its records dealt with as read, those
    produced as records, their bytes)."""
    import json

    from lakesink.executor.archiver import ArchivedRow
    from lakesink.executor.results import decode_result
    from lakesink.manifest import OBJECT

    c = Counts()
    for text in rows:
        if '"produced"' in text:
            r = json.loads(text)
            if "produced" in r and "row" not in r:  # a restore worker's result
                handled = sum(int(r.get(k) or 0) for k in ("produced", "skipped", "superseded",
                                                            "tombstones_dropped"))
                c = c + Counts(partitions=1, records_read=handled, records=int(r["produced"]),
                               bytes=int(r.get("bytes") or 0))
                continue
        d = decode_result(text)
        if isinstance(d, ArchivedRow):
            r = d.row
            c = c + Counts(records=r.record_count, bytes=r.size_bytes or 0, objects=int(r.kind == OBJECT))
        else:
            c = c + Counts(partitions=1, records_read=d.read)
    return c


def counted(batches: Iterator[Any], acc: Any) -> Iterator[Any]:
    """``batches`` (Arrow batches of result rows) unchanged, their counts added to ``acc`` as they pass."""
    for b in batches:
        acc.add(counts_of(b.column(0).to_pylist()))  # "row" (sink) or "result" (restore)
        yield b


def uncounted(batches: Iterator[Any]) -> Iterator[Any]:
    """No accumulator (no one watches the batch's progress): ``batches`` as they are."""
    return batches


#: A task sends its live counts at most this often (and once more at its end).
LIVE_EVERY_S = 0.5


class LiveSender:
    """A task's end of the live counts: ``add(records, nbytes)`` as they pass, sent as one UDP datagram to ``to`` =
    ``(host, port, token)`` under ``key`` at most every :data:`LIVE_EVERY_S` (``clock``), and by :meth:`close`.
    Fire and forget: a network that drops them only makes the display coarser. ``to`` None: sends nothing."""

    def __init__(self, to: Any, key: str | None = None, clock: Any = None):
        import socket
        import time

        self.to, self.key, self.clock = to, key, clock or time.monotonic
        self.read = self.nbytes = 0
        self.last = self.clock()
        self.sock = None
        if to is not None:
            try:
                self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            except OSError:
                pass

    def add(self, records: int, nbytes: int = 0) -> None:
        self.read += records
        self.nbytes += nbytes
        if self.sock is not None and self.clock() - self.last >= LIVE_EVERY_S:
            self.last = self.clock()
            self.send()

    def send(self) -> None:
        import json

        if self.sock is not None and self.key is not None:
            host, port, token = self.to
            try:
                self.sock.sendto(json.dumps({"t": token, "k": self.key, "r": self.read, "b": self.nbytes}).encode(),
                                 (host, port))
            except OSError:
                pass

    def close(self) -> None:
        """Send the last counts, then close the socket."""
        if self.sock is not None:
            self.send()
            self.sock.close()
            self.sock = None


def live_counts(batches: Iterator[Any], to: Any, clock: Any = None) -> Iterator[Any]:
    """``batches`` (the Arrow batches a task reads) unchanged, with the records and value bytes read so far sent
    to the driver (:class:`LiveSender`; at most every :data:`LIVE_EVERY_S`, and at the end). ``to`` None:
    ``batches`` as they are."""
    if to is None:
        yield from batches
        return
    sender = LiveSender(to, clock=clock)
    try:
        for b in batches:
            if b.num_rows:
                if sender.key is None:
                    names = b.schema.names
                    part = b.column(names.index("partition"))[0].as_py()
                    sender.key = f"{b.column(names.index('topic'))[0].as_py() if 'topic' in names else ''}-{part}"
                sender.add(b.num_rows, b.column(b.schema.names.index("value")).nbytes)
            yield b
    finally:
        sender.close()


def produced_counts(to: Any, key: str, on_event: Any = None, clock: Any = None) -> tuple[Any, LiveSender]:
    """A restore worker's ``on_event`` (:func:`lakesink.executor.restore.restore_partition`) that counts the
    records delivered so far into a :class:`LiveSender` to ``to`` under ``key`` (then calls ``on_event``, if any),
    and that sender (close it when the worker ends). Delivered, not handed over: at each ``produced`` record the
    records handed to the producer less those it still holds (``len(producer)``: queued, in flight, or delivered
    but not yet reported), at each ``committed`` transaction all of them."""
    sender = LiveSender(to, key, clock)
    handed = [0]

    def event(point: str, info: dict) -> None:
        if point == "produced":
            handed[0] += info.get("n", 1)  # a coarse event stands for its run of records
            try:
                held = len(info["producer"])
            except (KeyError, TypeError):
                held = 0
            sender.add(max(0, handed[0] - held - sender.read))
        elif point == "committed":
            sender.add(handed[0] - sender.read)
        if on_event is not None:
            on_event(point, info)

    return event, sender
