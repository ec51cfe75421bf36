"""One Kafka consumer per worker thread, kept from one partition read to the next.

A consumer's set-up is paid per consumer, not per record: its threads, its connections to the bootstrap broker,
the partition leaders and the group coordinator (librdkafka needs a ``group.id``, and looks its coordinator up
even for a consumer that only assigns), the metadata, and on close the same torn down. With one consumer per
planned range, a sink of 64 partitions paid it 64 times where one of 4 partitions paid it 4 times
(``bench/scale.py``). A local worker process (:func:`lakesink.executor.local_worker.serve`) calls
:func:`keep_consumers`: from then on each thread of it keeps the consumers of its last reads, unassigned, and the
next read with the same settings and topic reassigns one of them to its own range. Spark's Python workers do not
keep any: their lifetime is the cluster's, not the run's.

A consumer is lent again only once ``fetch.wait.max.ms`` has passed since its read ended. A read's prefetch reaches
the end of the log before the read ends, and the broker holds that last fetch up to ``fetch.wait.max.ms``
(librdkafka's 500 ms default); librdkafka sends a consumer's next fetch only when it has come back, so a consumer
reassigned sooner would wait for it. A read that finds none ready makes a new one, and a thread keeps at most
:data:`MAX_KEPT`: short ranges rotate over a few consumers, long ones reuse one. The memory a kept consumer's
threads freed is given back to the system after a read, at most once a :data:`TRIM_INTERVAL_S`.

A consumer goes back only after a read that ended cleanly; a failed or abandoned read closes it, and so does one
that reported a fatal error while it was kept. The reader skips any message of another partition (one fetched
for the consumer's previous assignment) and a consumer is never reused across topics, so a read only ever takes
its own partition's records.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
from typing import Any, Callable

__all__ = ["MAX_KEPT", "TRIM_INTERVAL_S", "keep_consumers", "keeping", "kept", "release_freed_memory", "borrow",
           "Loan"]

#: consumers one thread keeps at most (the oldest is closed): enough for ranges read in a fraction of
#: ``fetch.wait.max.ms`` each to rotate without making a new one
MAX_KEPT = 8
#: at most one :func:`release_freed_memory` per this many seconds (a call walks every malloc arena: a few ms)
TRIM_INTERVAL_S = 1.0
#: librdkafka's ``fetch.wait.max.ms`` default, and a margin for the fetch's round trip (seconds)
FETCH_WAIT_DEFAULT_S = 0.5
FETCH_RETURN_MARGIN_S = 0.05

_KEEPING = False
_LAST_TRIM = float("-inf")  # clock time of the last release_freed_memory
#: thread id -> the consumers its clean reads gave back, oldest first
_KEPT: dict[int, list["Loan"]] = {}
#: consumers kept by a parent process before a fork: never used, never freed in the child (closing or freeing
#: them there would wait for librdkafka threads that only the parent has)
_ORPHANS: list["Loan"] = []


def keep_consumers(on: bool = True) -> None:
    """Keep each thread's consumers between reads in this process (``on``), or close the kept ones and stop."""
    global _KEEPING, _LAST_TRIM
    _KEEPING, _LAST_TRIM = on, float("-inf")
    if not on:
        for pool in list(_KEPT.values()):
            for loan in pool:
                loan.close()
        _KEPT.clear()


def keeping() -> bool:
    """Whether this process keeps consumers between reads (:func:`keep_consumers`)."""
    return _KEEPING


def kept() -> int:
    """How many consumers this process keeps now (at most :data:`MAX_KEPT` per thread)."""
    return sum(len(pool) for pool in _KEPT.values())


def release_freed_memory() -> None:
    """Give the memory this process freed back to the system (glibc's ``malloc_trim``; nothing elsewhere). A kept
    consumer's threads keep their malloc arenas, and a read's freed fetch buffers stay in them (tens of MB after a
    read of 250,000 records) where a closed consumer's went back with its threads."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` from the symbols this process already has loaded, or None (another libc). Not
    ``ctypes.util.find_library``: it runs ``ldconfig`` in a child process, a fork of a worker at every call."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


class _Relay:
    """A consumer's ``error_cb``: hands each client error to the read holding the consumer; while it is kept,
    remembers whether one was fatal (then it is closed, not lent again)."""

    __slots__ = ("to", "fatal_while_kept")

    def __init__(self) -> None:
        self.to: Callable[[Any], None] | None = None
        self.fatal_while_kept = False

    def __call__(self, err: Any) -> None:
        to = self.to
        if to is not None:
            to(err)
        elif err.fatal():
            self.fatal_while_kept = True


@dataclasses.dataclass
class Loan:
    """A consumer lent to one read: ``consumer``, made by ``factory`` from settings ``key``, for ``topic``;
    ``fetch_wait_s`` its ``fetch.wait.max.ms``; ``ready_at`` when it may be lent again (``clock`` time)."""

    consumer: Any
    relay: _Relay
    key: Any
    topic: str
    fetch_wait_s: float
    ready_at: float = 0.0

    def give_back(self, clean: bool, clock: Callable[[], float] = time.monotonic) -> None:
        """End the read: after a ``clean`` one, keep the consumer (unassigned) for a later read of this thread
        where this process keeps consumers; else close it."""
        global _LAST_TRIM
        self.relay.to = None
        if not (clean and _KEEPING and self.key is not None):
            self.close()
            return
        try:
            self.consumer.unassign()
        except Exception:  # noqa: BLE001 - a consumer that cannot even unassign is not lent again
            self.close()
            return
        now = clock()
        self.ready_at = now + self.fetch_wait_s + FETCH_RETURN_MARGIN_S
        pool = _KEPT.setdefault(threading.get_ident(), [])
        pool.append(self)
        while len(pool) > MAX_KEPT:
            pool.pop(0).close()
        if now - _LAST_TRIM >= TRIM_INTERVAL_S:
            _LAST_TRIM = now
            release_freed_memory()

    def close(self) -> None:
        """Close the consumer (its errors on the way out are of no use to anyone)."""
        self.relay.to = None
        try:
            self.consumer.close()
        except Exception:  # noqa: BLE001
            pass


def _settings_key(conf: dict, factory: Callable) -> Any:
    try:
        key = (tuple(sorted(conf.items())), factory)
        hash(key)
    except TypeError:  # a setting that is not a plain value: such a consumer is not kept
        return None
    return key


def _fetch_wait_s(conf: dict) -> float:
    try:
        return max(0.0, float(conf["fetch.wait.max.ms"]) / 1000)
    except (KeyError, TypeError, ValueError):
        return FETCH_WAIT_DEFAULT_S


def borrow(conf: dict, topic: str, factory: Callable[[dict], Any], on_error: Callable[[Any], None],
           clock: Callable[[], float] = time.monotonic) -> Loan:
    """A consumer for one read of ``topic`` with settings ``conf``, its client errors going to ``on_error``: one this
    thread keeps with the same settings, ``factory`` and topic, ready (``clock``) and with no fatal error seen, else a
    new one (``factory({**conf, "error_cb": ...})``; its errors, e.g. KafkaException, propagate). Kept consumers of
    other settings (an earlier run's) or with a fatal error are closed."""
    key = _settings_key(conf, factory) if _KEEPING else None
    pool = _KEPT.get(threading.get_ident(), [])
    for stale in [k for k in pool if k.key != key or k.relay.fatal_while_kept]:
        pool.remove(stale)
        stale.close()
    now = clock()
    for loan in pool:
        if loan.topic == topic and loan.ready_at <= now:
            pool.remove(loan)
            loan.relay.to = on_error
            return loan
    relay = _Relay()
    consumer = factory({**conf, "error_cb": relay})
    relay.to = on_error
    return Loan(consumer, relay, key, topic, _fetch_wait_s(conf))


def _after_fork_in_child() -> None:
    for pool in _KEPT.values():
        _ORPHANS.extend(pool)
    _KEPT.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
