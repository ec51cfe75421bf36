"""One Kafka consumer per worker thread, kept from one partition read to the next.

A consumer's set-up is paid per consumer, not per record: its threads, its connections to the bootstrap broker,
the partition leaders and the group coordinator (librdkafka needs a ``group.id``, and looks its coordinator up
even for a consumer that only assigns), the metadata, and on close the same torn down. With one consumer per
planned range, a sink of 64 partitions paid it 64 times where one of 4 partitions paid it 4 times
(``bench/scale.py``). A local worker process (:func:`lakesink.executor.local_worker.serve`) calls
:func:`keep_consumers`: from then on each thread of it keeps the consumer of its last read, unassigned, and the
next read with the same settings and topic reassigns it to its own range. Spark's Python workers do not keep
one: their lifetime is the cluster's, not the run's.

A consumer goes back only after a read that ended cleanly; a failed or abandoned read closes it, and so does one
that reported a fatal error while it was kept. The reader skips any message of another partition (one fetched
for the consumer's previous assignment) and a consumer is never reused across topics, so a read only ever takes
its own partition's records.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any, Callable

__all__ = ["keep_consumers", "keeping", "kept", "borrow", "Loan"]

_KEEPING = False
#: thread id -> the consumer its last clean read gave back
_KEPT: dict[int, "Loan"] = {}
#: consumers kept by a parent process before a fork: never used, never freed in the child (closing or freeing
#: them there would wait for librdkafka threads that only the parent has)
_ORPHANS: list["Loan"] = []


def keep_consumers(on: bool = True) -> None:
    """Keep each thread's consumer between reads in this process (``on``), or close the kept ones and stop."""
    global _KEEPING
    _KEEPING = on
    if not on:
        for loan in list(_KEPT.values()):
            loan.close()
        _KEPT.clear()


def keeping() -> bool:
    """Whether this process keeps consumers between reads (:func:`keep_consumers`)."""
    return _KEEPING


def kept() -> int:
    """How many consumers this process keeps now (one at most per thread)."""
    return len(_KEPT)


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
    """A consumer lent to one read: ``consumer``, made by ``factory`` from settings ``key``, for ``topic``."""

    consumer: Any
    relay: _Relay
    key: Any
    topic: str
    reused: bool = False

    def give_back(self, clean: bool) -> None:
        """End the read: after a ``clean`` one, keep the consumer (unassigned) for this thread's next read where
        this process keeps consumers; else close it."""
        self.relay.to = None
        if not (clean and _KEEPING and self.key is not None):
            self.close()
            return
        try:
            self.consumer.unassign()
        except Exception:  # noqa: BLE001 - a consumer that cannot even unassign is not lent again
            self.close()
            return
        previous = _KEPT.pop(threading.get_ident(), None)
        if previous is not None and previous is not self:
            previous.close()
        _KEPT[threading.get_ident()] = self

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


def borrow(conf: dict, topic: str, factory: Callable[[dict], Any], on_error: Callable[[Any], None]) -> Loan:
    """A consumer for one read of ``topic`` with settings ``conf``, its client errors going to ``on_error``: this
    thread's kept one where it has the same settings, ``factory`` and topic and saw no fatal error, else a new one
    (``factory({**conf, "error_cb": ...})``; its errors, e.g. KafkaException, propagate)."""
    key = _settings_key(conf, factory) if _KEEPING else None
    kept = _KEPT.pop(threading.get_ident(), None)
    if kept is not None:
        if key is not None and kept.key == key and kept.topic == topic and not kept.relay.fatal_while_kept:
            kept.relay.to, kept.reused = on_error, True
            return kept
        kept.close()
    relay = _Relay()
    consumer = factory({**conf, "error_cb": relay})
    relay.to = on_error
    return Loan(consumer, relay, key, topic)


def _after_fork_in_child() -> None:
    _ORPHANS.extend(_KEPT.values())
    _KEPT.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
