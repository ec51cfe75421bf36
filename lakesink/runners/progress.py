"""A sink batch's progress while its tasks run, for a display (:mod:`lakesink.cli.progress`).

Two sources, polled by one driver thread every :data:`POLL_S`: an accumulator of
:class:`~lakesink.executor.progress.Counts` that every task adds its archived counts to when it completes
(:func:`lakesink.executor.progress.counted`), and Spark's status tracker (tasks completed of the active stages:
one task per planned Kafka range, so partitions done also counts ranges that held no record). Those arrive per
completed task; records read also arrive live, in UDP datagrams each task sends the driver every 0.5 s
(:class:`LiveReceiver`; best effort: where executors cannot reach the driver by UDP, the display moves per
completed task). Records archived, bytes and objects move when a task completes.

Tasks in local worker processes (:mod:`lakesink.runners.local`, no Spark) have no accumulator: the driver
adds each completed task's rows itself (:attr:`Tracking.done`), and the live datagrams come over the loopback.

A restore is tracked the same way (one task per destination partition; live counts are records produced). The
job that knows its plan says how many records it expects (:func:`with_total`): the display shows records done of
that total, a rate and an ETA (:mod:`lakesink.cli.progress`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

from lakesink.executor.progress import Counts, counts_of, uncounted

log = logging.getLogger("lakesink.runners.progress")

__all__ = ["Progress", "POLL_S", "Tracking", "Counter", "DriverCounts", "LiveReceiver", "track", "with_total"]

#: How often the driver looks at the accumulator and the status tracker.
POLL_S = 0.5


@dataclass(frozen=True)
class Progress:
    """A batch (or a restore) so far: what its completed tasks archived (``records``, ``bytes``, ``objects``)
    and the records and bytes its tasks read (a restore: produced) so far, live (``records_read``,
    ``bytes_read``); ``records_total``: the records the plan expects (None: unknown), ``label`` what the display
    calls it (None: ``batch <id>``)."""

    batch_id: int
    partitions_total: int
    partitions_done: int = 0
    records_read: int = 0
    records: int = 0
    bytes: int = 0
    objects: int = 0
    elapsed_s: float = 0.0
    done: bool = False
    records_total: int | None = None
    bytes_read: int = 0
    label: str | None = None

    @property
    def name(self) -> str:
        return self.label if self.label is not None else f"batch {self.batch_id}"


def with_total(listener: Callable[[Progress], None] | None, records_total: int | None,
               label: str | None = None) -> Callable[[Progress], None] | None:
    """``listener`` called with each :class:`Progress` carrying the plan's ``records_total`` (and ``label``)."""
    if listener is None:
        return None

    def call(p: Progress) -> None:
        listener(dataclasses.replace(p, records_total=records_total, label=label))

    return call


@dataclass(frozen=True)
class Tracking:
    """What the tasks of a tracked batch need: ``count`` wraps each task's result iterator
    (:func:`~lakesink.executor.progress.counted`), ``live_to`` is where tasks send live counts
    (:func:`~lakesink.executor.progress.live_counts`; None: nowhere)."""

    count: Callable[[Iterator[Any]], Iterator[Any]]
    live_to: tuple[str, int, str] | None = None
    #: the driver calls it with each completed task's result rows when no accumulator carries them (local tasks)
    done: Callable[[list[str]], None] = lambda rows: None


class DriverCounts:
    """The counter of tasks without an accumulator (local workers): the driver adds what each completed task
    returned (:meth:`add_rows`, the tasks' ``done``)."""

    def __init__(self) -> None:
        self.value = Counts()
        self.tasks = 0  # completed, those that read nothing included (one task per planned range)
        self._lock = threading.Lock()
        self.count = uncounted  # nothing to add in the task

    def add_rows(self, rows: list[str]) -> None:
        with self._lock:
            self.value = self.value + counts_of(rows)
            self.tasks += 1

    done = add_rows

    def completed(self) -> int:
        return self.tasks


class Counter(Protocol):
    """Where a tracked batch's counts come from: ``value`` (the :class:`Counts` so far), ``completed()`` (tasks
    completed), ``count`` (wraps each task's result iterator, in the task), ``done`` (called by the driver with
    each completed task's rows)."""

    value: Counts
    count: Callable[[Iterator[Any]], Iterator[Any]]
    done: Callable[[list[str]], None]

    def completed(self) -> int: ...


class LiveReceiver:
    """The driver's end of :func:`~lakesink.executor.progress.live_counts`: a UDP socket on the driver's host,
    keeping each task's latest count (datagrams without this batch's token are ignored)."""

    def __init__(self, host: str):
        import secrets
        import socket

        self.token = secrets.token_hex(8)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.settimeout(0.2)
        self.address = (self.sock.getsockname()[0], self.sock.getsockname()[1], self.token)
        self.read: dict[str, int] = {}
        self.bytes: dict[str, int] = {}

    def drain(self) -> None:
        """Read what arrived (call it from one thread)."""
        import json
        import socket

        while True:
            try:
                data = self.sock.recv(4096)
            except (socket.timeout, BlockingIOError):
                return
            except OSError:
                return
            try:
                m = json.loads(data)
                if m.get("t") == self.token:
                    k = str(m["k"])
                    self.read[k] = max(int(m["r"]), self.read.get(k, 0))
                    self.bytes[k] = max(int(m.get("b") or 0), self.bytes.get(k, 0))
            except (ValueError, KeyError, TypeError):
                continue
            self.sock.settimeout(0)  # more may be queued: take them without waiting

    def records_read(self) -> int:
        return sum(self.read.values())

    def bytes_read(self) -> int:
        return sum(self.bytes.values())

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def track(listener: Callable[[Progress], None] | None, batch_id: int, partitions: int,
          counter: Callable[[], Counter | None], host: str | None, poll_s: float = POLL_S) -> Iterator[Tracking]:
    """While the body runs the batch's tasks, call ``listener`` with its :class:`Progress` every ``poll_s`` and
    once more, ``done``, when the body succeeded. ``counter`` makes the batch's :class:`Counter` (None: no
    display); ``host`` is where the tasks can send live counts (None: nowhere). Yields the :class:`Tracking` the
    tasks need (its ``count`` is the identity, and nothing is sent, without a listener)."""
    acc = counter() if listener is not None else None
    if acc is None:
        yield Tracking(uncounted)
        return
    live = None
    if host is not None:
        try:
            live = LiveReceiver(host)
        except OSError as e:
            log.debug("no live progress: %s", e)
    t0 = time.monotonic()
    stop = threading.Event()
    done_tasks = [0]

    def snapshot(done: bool = False) -> Progress:
        c: Counts = acc.value
        done_tasks[0] = max(done_tasks[0], c.partitions, acc.completed())
        read = c.records_read if done or live is None else max(c.records_read, live.records_read())
        return Progress(batch_id, partitions, min(partitions, partitions if done else done_tasks[0]),
                        read, c.records, c.bytes, c.objects, time.monotonic() - t0, done,
                        bytes_read=live.bytes_read() if live is not None else 0)

    def call(p: Progress) -> None:
        try:
            listener(p)
        except Exception as e:  # noqa: BLE001 - a display must never fail a batch
            log.debug("progress listener failed: %s", e)

    def poll() -> None:
        while not stop.wait(0 if live is not None else poll_s):
            if live is not None:
                live.sock.settimeout(poll_s)
                live.drain()  # waits up to poll_s for the first datagram
            call(snapshot())  # every poll: the elapsed time changes too (a display throttles itself)

    call(snapshot())
    thread = threading.Thread(target=poll, name="lakesink-progress", daemon=True)
    thread.start()
    ok = False
    try:
        yield Tracking(acc.count, live.address if live is not None else None, acc.done)
        ok = True
    finally:
        stop.set()
        thread.join(timeout=5)
        if live is not None:
            live.close()
        if ok:
            call(snapshot(done=True))
