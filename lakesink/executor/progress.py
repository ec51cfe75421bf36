"""Batch progress from the executors: each task's archived counts reach the driver through a Spark accumulator.

:func:`counted` wraps a task's result iterator (:func:`lakesink.executor.task.archive_partitions`' JSON rows) and
adds what they describe -- records read, records and bytes archived, objects, partitions -- to an accumulator of
:class:`Counts`. Spark merges task updates on the driver as each task completes (one task per Kafka partition),
which :mod:`lakesink.runners.progress` polls while the batch runs. Between completions, :func:`live_counts` sends
the records a task has read so far to the driver in UDP datagrams (best effort: the display's only live source,
since PySpark sends a task's accumulator updates when the task ends).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

__all__ = ["Counts", "CountsParam", "counted", "uncounted", "counts_of", "live_counts", "LIVE_EVERY_S"]


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


try:  # pyspark is there wherever a batch runs; the pure parts of this module do without it
    from pyspark.accumulators import AccumulatorParam
except ImportError:  # pragma: no cover
    AccumulatorParam = object  # type: ignore[misc,assignment]


class CountsParam(AccumulatorParam):  # type: ignore[misc,valid-type]
    """Spark accumulator parameter for :class:`Counts`."""

    def zero(self, value: Counts) -> Counts:
        return Counts()

    def addInPlace(self, value1: Counts, value2: Counts) -> Counts:
        return value1 + value2


def counts_of(rows: list[str]) -> Counts:
    """The :class:`Counts` of one task's result rows (JSON, :func:`lakesink.executor.results.encode_result`)."""
    from lakesink.executor.archiver import ArchivedRow
    from lakesink.executor.results import decode_result
    from lakesink.manifest import OBJECT

    c = Counts()
    for text in rows:
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
        acc.add(counts_of(b.column("row").to_pylist()))
        yield b


def uncounted(batches: Iterator[Any]) -> Iterator[Any]:
    """No accumulator (no one watches the batch's progress): ``batches`` as they are."""
    return batches


#: A task sends its live counts at most this often (and once more at its end).
LIVE_EVERY_S = 0.5


def live_counts(batches: Iterator[Any], to: Any, clock: Any = None) -> Iterator[Any]:
    """``batches`` (the Arrow batches a task reads) unchanged, with the records and value bytes read so far sent
    to the driver as UDP datagrams to ``to`` = ``(host, port, token)`` (at most every :data:`LIVE_EVERY_S`, and
    at the end): fire and forget, so a network that drops them only makes the display coarser (per completed
    task, from the accumulator). ``to`` None: ``batches`` as they are."""
    if to is None:
        yield from batches
        return
    import json
    import socket
    import time

    clock = clock or time.monotonic
    host, port, token = to
    sock = None
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError:
        pass
    key = None
    read = nbytes = 0
    last = clock()

    def send() -> None:
        if sock is not None and key is not None:
            try:
                sock.sendto(json.dumps({"t": token, "k": key, "r": read, "b": nbytes}).encode(), (host, port))
            except OSError:
                pass

    try:
        for b in batches:
            if b.num_rows:
                if key is None:
                    names = b.schema.names
                    part = b.column(names.index("partition"))[0].as_py()
                    key = f"{b.column(names.index('topic'))[0].as_py() if 'topic' in names else ''}-{part}"
                read += b.num_rows
                nbytes += b.column(b.schema.names.index("value")).nbytes
                if clock() - last >= LIVE_EVERY_S:
                    last = clock()
                    send()
            yield b
        send()
    finally:
        if sock is not None:
            sock.close()
