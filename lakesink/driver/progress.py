"""A sink batch's progress while its Spark job runs, for a display (:mod:`lakesink.cli.progress`).

Two sources, polled by one driver thread every :data:`POLL_S`: an accumulator of
:class:`~lakesink.executor.progress.Counts` that every task adds its archived counts to when it completes
(:func:`lakesink.executor.progress.counted`), and Spark's status tracker (tasks completed of the active stages:
one task per planned Kafka range, so partitions done also counts ranges that held no record). Those arrive per
completed task; records read also arrive live, in UDP datagrams each task sends the driver every 0.5 s
(:class:`LiveReceiver`; best effort: where executors cannot reach the driver by UDP, the display moves per
completed task). Records archived, bytes and objects move when a task completes.

Tasks in local worker processes (:mod:`lakesink.driver.local_tasks`, no Spark) have no accumulator: the driver
adds each completed task's rows itself (:attr:`Tracking.done`), and the live datagrams come over the loopback.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from lakesink.executor.progress import Counts, CountsParam, counted, counts_of, uncounted

log = logging.getLogger("lakesink.driver.progress")

__all__ = ["Progress", "POLL_S", "Tracking", "DriverCounts", "LiveReceiver", "driver_host", "tasks_completed", "track"]

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
    """An accumulator's stand-in for tasks without Spark: the driver adds what each completed task returned."""

    def __init__(self) -> None:
        self.value = Counts()
        self.tasks = 0  # completed, those that read nothing included (one task per planned range)
        self._lock = threading.Lock()

    def add_rows(self, rows: list[str]) -> None:
        with self._lock:
            self.value = self.value + counts_of(rows)
            self.tasks += 1


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
                    self.read[str(m["k"])] = max(int(m["r"]), self.read.get(str(m["k"]), 0))
            except (ValueError, KeyError, TypeError):
                continue
            self.sock.settimeout(0)  # more may be queued: take them without waiting

    def records_read(self) -> int:
        return sum(self.read.values())

    def close(self) -> None:
        self.sock.close()


def driver_host(spark: Any) -> str | None:
    """The address the executors reach the driver at (None: unknown)."""
    try:
        import socket

        host = spark.sparkContext.getConf().get("spark.driver.host")
        return socket.gethostbyname(host) if host else None
    except Exception:  # noqa: BLE001
        return None


@contextlib.contextmanager
def track(spark: Any, listener: Callable[[Progress], None] | None, batch_id: int, partitions: int,
          poll_s: float = POLL_S) -> Iterator[Tracking]:
    """While the body runs the batch's Spark job (``spark`` None: its local tasks), call ``listener`` with its
    :class:`Progress` every ``poll_s`` and once more, ``done``, when the body succeeded. Yields the
    :class:`Tracking` the tasks need (its ``count`` is the identity, and nothing is sent, without a listener)."""
    acc: Any = None
    if listener is not None and spark is None:
        acc = DriverCounts()
    elif listener is not None:
        try:
            acc = spark.sparkContext.accumulator(Counts(), CountsParam())
        except Exception as e:  # noqa: BLE001 - e.g. Spark Connect has no SparkContext: no display, same batch
            log.debug("no progress display: %s", e)
    if acc is None:
        yield Tracking(uncounted)
        return
    live = None
    host = driver_host(spark) if spark is not None else "127.0.0.1"
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
        completed = tasks_completed(spark) if spark is not None else acc.tasks
        done_tasks[0] = max(done_tasks[0], c.partitions, completed)
        read = c.records_read if done or live is None else max(c.records_read, live.records_read())
        return Progress(batch_id, partitions, min(partitions, partitions if done else done_tasks[0]),
                        read, c.records, c.bytes, c.objects, time.monotonic() - t0, done)

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
        live_to = live.address if live is not None else None
        if isinstance(acc, DriverCounts):
            yield Tracking(uncounted, live_to, acc.add_rows)
        else:
            yield Tracking(functools.partial(counted, acc=acc), live_to)
        ok = True
    finally:
        stop.set()
        thread.join(timeout=5)
        if live is not None:
            live.close()
        if ok:
            call(snapshot(done=True))
