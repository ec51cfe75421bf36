"""Consumer groups' committed offsets, read without joining the group.

Every read of a group's committed offsets (a restore's progress and coverage, the groups a restore places, the
sink's ``consumer.groups`` capture, ``manifest handover``) goes through :func:`read_committed`: a ``Consumer``
with the group's id that never subscribes (so it never becomes a member and never triggers a rebalance) asks
``committed()``. ``isolation.level=read_committed`` makes librdkafka send the OffsetFetch with ``require_stable``,
so offsets a transaction is still settling are waited for, not taken.

Why not ``AdminClient.list_consumer_group_offsets``: librdkafka (up to 2.16, issue #5040) dereferences a NULL
consumer-group handle when the coordinator answers that request with ``NOT_COORDINATOR`` -- a fresh group on a
coordinator still loading, or a coordinator moving during a rolling restart -- and the process dies with SIGSEGV.
The consumer's path re-queries the coordinator and retries instead.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping

from lakesink.errors import KafkaMetadataError

__all__ = ["PRODUCER_ONLY", "client_conf", "consumer_conf", "read_committed", "KafkaClients"]

#: librdkafka settings only a producer takes (the admin client and the consumers reading offsets get the rest)
PRODUCER_ONLY = frozenset({
    "transactional.id", "enable.idempotence", "acks", "request.required.acks", "linger.ms", "queue.buffering.max.ms",
    "batch.size", "batch.num.messages", "compression.type", "compression.codec", "transaction.timeout.ms",
    "message.timeout.ms", "delivery.timeout.ms", "queue.buffering.max.messages", "queue.buffering.max.kbytes",
    "retries", "max.in.flight.requests.per.connection", "max.in.flight", "partitioner",
    "sticky.partitioning.linger.ms", "delivery.report.only.error"})

# consumer settings that would make the reader join, commit, or read unstable offsets: always overridden
_READER = {"enable.auto.commit": False, "enable.auto.offset.store": False, "isolation.level": "read_committed",
           "enable.partition.eof": False}
_DROP = ("group.instance.id",)

# errors worth another try until the deadline (librdkafka retries most of them itself within one call)
_RETRIABLE = ("UNSTABLE_OFFSET_COMMIT", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
              "_TIMED_OUT", "_WAIT_COORD", "_TRANSPORT")


def client_conf(conf: Mapping[str, Any]) -> dict[str, Any]:
    """An admin client's config from a producer's (or any client's): without the producer-only keys."""
    return {k: v for k, v in conf.items() if k not in PRODUCER_ONLY}


class KafkaClients:
    """An admin client and one never-subscribing consumer per group (:func:`consumer_conf`), made from one client
    config when first asked for and shared by the work of one task: a restore task's destination partitions
    each asked for both, and every client costs CPU to start (threads, connections, metadata) and to close.
    What the task learned once through them is kept too (:meth:`topic`, :meth:`once`).
    :meth:`close` when the task ends."""

    def __init__(self, conf: Mapping[str, Any]):
        self.conf = client_conf(conf)
        self._admin: Any = None
        self._consumers: dict[str, Any] = {}
        self._topics: dict[str, Any] = {}
        self._done: set = set()

    def topic(self, name: str, timeout_s: float) -> Any:
        """The broker's metadata of topic ``name`` (``TopicMetadata``, or None when the broker does not know it), asked
        for once per task: every destination partition of a restore task checks its topic."""
        if name not in self._topics:
            self._topics[name] = self.admin().list_topics(name, timeout=timeout_s).topics.get(name)
        return self._topics[name]

    def once(self, check: tuple, run: Callable[[], None]) -> None:
        """Run ``run`` unless ``check`` already passed in this task (a check that raised runs again when asked)."""
        if check not in self._done:
            run()
            self._done.add(check)

    def admin(self) -> Any:
        """The admin client (``confluent_kafka.admin.AdminClient``)."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(self.conf)
        return self._admin

    def consumer(self, group: str) -> Any:
        """The consumer of ``group``: reads its committed offsets and supplies its metadata to transactions."""
        c = self._consumers.get(group)
        if c is None:
            from confluent_kafka import Consumer

            c = self._consumers[group] = Consumer(consumer_conf(self.conf, group))
        return c

    def close(self) -> None:
        """Close the consumers (nothing of theirs lives on the broker: they never joined their groups)."""
        consumers, self._consumers = list(self._consumers.values()), {}
        for c in consumers:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - nothing to release on the broker
                pass
        self._admin = None


def consumer_conf(conf: Mapping[str, Any], group: str) -> dict[str, Any]:
    """A never-subscribing consumer's config for reading ``group``'s offsets from a client config ``conf`` (an
    admin's or a producer's: the producer-only keys are dropped, librdkafka would warn about each)."""
    out = {k: v for k, v in client_conf(conf).items() if k not in _DROP}
    out.update(_READER)
    out["group.id"] = group
    return out


def read_committed(conf: Mapping[str, Any], group: str, partitions: Iterable[tuple[str, int]],
                   timeout_s: float = 30.0,
                   consumer: Any = None) -> dict[tuple[str, int], tuple[int | None, str | None]]:
    """``{(topic, partition): (committed offset or None, metadata or None)}`` of ``group`` (stable offsets only).
    ``consumer``: a never-subscribing consumer of ``group`` made from :func:`consumer_conf`, asked instead of a new
    one (and left open: a caller that keeps one for the group's metadata reads through it).

    Raises :class:`~lakesink.errors.KafkaMetadataError` naming the group when the offsets cannot be read within
    ``timeout_s`` (a retriable error past the deadline, or one that cannot succeed: authorization, for one)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    retriable = {getattr(KafkaError, n) for n in _RETRIABLE if hasattr(KafkaError, n)}
    deadline = time.monotonic() + timeout_s

    def failed(err: Any) -> KafkaMetadataError:
        what = err.str() if hasattr(err, "str") else str(err)
        return KafkaMetadataError(f"cannot read the committed offsets of consumer group {group!r} "
                            f"({', '.join(f'{t}-{p}' for t, p in wanted[:4])}{', ...' if len(wanted) > 4 else ''}): "
                            f"{what}")

    own = consumer is None
    if own:
        consumer = Consumer(consumer_conf(conf, group))
    try:
        while True:
            left = max(1.0, deadline - time.monotonic())
            try:
                got = consumer.committed([TopicPartition(t, p) for t, p in wanted], timeout=left)
            except KafkaException as e:
                err = e.args[0] if e.args and hasattr(e.args[0], "code") else None
                if err is not None and err.code() in retriable and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise failed(err if err is not None else e) from None
            bad = next((tp.error for tp in got if tp.error is not None), None)
            if bad is None:
                return {(tp.topic, tp.partition): ((tp.offset, tp.metadata or None) if tp.offset >= 0 else (None, None))
                        for tp in got}
            if bad.code() in retriable and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            raise failed(bad)
    finally:
        if own:
            consumer.close()
