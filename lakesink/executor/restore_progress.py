"""Where restores keep their progress: the consumer group, its members, and the coverage it holds.

A restore's progress group (:func:`progress_group`) is never joined: each destination partition's committed offset
carries a :class:`~lakesink.executor.coverage.Coverage` in its metadata (written by
:mod:`lakesink.executor.restore` in the same Kafka transaction as the records). This module reads it back, on the
driver (:func:`group_coverages`, every ``lakesink-restore*`` group) and in the worker (:func:`read_coverage`).
"""
from __future__ import annotations

import time
from typing import Any, Mapping

from lakesink.errors import RestoreError, RestoreGroupActiveError
from lakesink.executor.committed import read_committed
from lakesink.executor.coverage import Coverage

__all__ = ["PROGRESS_READ_TIMEOUT_S", "progress_group", "routed_group", "kafka_error_of", "check_group_idle",
           "read_progress",
           "read_coverage", "group_coverages"]

#: how long a stable read of the progress offset retries UNSTABLE_OFFSET_COMMIT
PROGRESS_READ_TIMEOUT_S = 30.0


def progress_group(name: str | None = None) -> str:
    """The consumer group holding restores' progress (never joined by a restore itself): one per destination
    cluster, ``lakesink-restore``, unless a restore is given a ``name`` of its own."""
    return "lakesink-restore" if name is None else f"lakesink-restore-{name}"


def routed_group(name: str | None, source_topic: str, source_partition: int, spec: str) -> str:
    """The progress group of ONE source partition restored through a router (``--partitioner`` /
    ``--partition-map``, :class:`~lakesink.executor.partitioning.Router` ``spec``): only that source's worker
    commits to it, so workers of sources that share a destination partition never overwrite each other's
    progress. The spec is part of the name: coverage recorded under another routing (another map, another
    partition count) is another restore's, never this one's (its records went to other partitions)."""
    return f"{progress_group(name)}:{source_topic}:{source_partition}:{spec}"


def kafka_error_of(e: BaseException):
    """The KafkaError a KafkaException carries (None for another exception)."""
    return e.args[0] if e.args and hasattr(e.args[0], "code") else None


def check_group_idle(admin, group: str, timeout_s: float = 30.0) -> None:
    """Raise :class:`RestoreGroupActiveError` if ``group`` has members (a consumer in it would take the
    restore's progress offsets as its position)."""
    from confluent_kafka import KafkaError, KafkaException

    def failed(err) -> RestoreError:
        return RestoreError(f"cannot describe the restore's progress group {group!r}: {err}")

    try:  # a group the broker does not list has no members (describing one can time out instead of saying so)
        listed = admin.list_consumer_groups(request_timeout=timeout_s).result()
    except KafkaException as e:
        raise failed(kafka_error_of(e).str() if kafka_error_of(e) else e) from None
    if group not in {g.group_id for g in listed.valid}:
        return
    retriable = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                 KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError._TIMED_OUT)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
            break
        except KafkaException as e:
            err = kafka_error_of(e)
            if err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return
            if err is not None and err.code() in retriable and time.monotonic() < deadline:
                time.sleep(0.3)
                continue
            raise failed(err.str() if err else e) from None
    if desc.members:
        who = ", ".join(f"{m.client_id}@{m.host}" for m in desc.members[:3])
        raise RestoreGroupActiveError(
            f"the progress group {group!r} has {len(desc.members)} member(s) ({who}): a consumer in it would take "
            f"the restore's progress (source offsets) as its position; stop it (or use another restore name) "
            f"and run the restore again")


def read_progress(conf: Mapping[str, Any], group: str, topic: str, partition: int,
                  timeout_s: float = PROGRESS_READ_TIMEOUT_S, consumer: Any = None) -> tuple[int | None, str | None]:
    """The stable committed offset of ``group`` for ``topic``-``partition`` and its metadata, (None, None)
    if none (:func:`~lakesink.executor.committed.read_committed` with the client config ``conf``, or through
    ``consumer``, a never-subscribing consumer of ``group``: offsets a transaction is still settling are waited for
    up to ``timeout_s`` seconds)."""
    return read_committed(conf, group, [(topic, partition)], timeout_s, consumer=consumer)[(topic, partition)]


def read_coverage(conf: Mapping[str, Any], group: str, topic: str, partition: int,
                  timeout_s: float = PROGRESS_READ_TIMEOUT_S, consumer: Any = None) -> Coverage:
    """What earlier restores recorded in ``group`` for destination ``topic``-``partition`` (stable read; through
    ``consumer`` as :func:`read_progress`)."""
    return _decode(group, topic, partition, *read_progress(conf, group, topic, partition, timeout_s, consumer))


def _decode(group: str, topic: str, partition: int, offset: int | None, metadata: str | None) -> Coverage:
    try:
        return Coverage.decode(offset, metadata)
    except ValueError as e:
        raise RestoreError(f"progress group {group!r} for {topic}-{partition}: {e}; use another restore name") from None


def group_coverages(admin, conf: Mapping[str, Any], own_group: str, dests: list[tuple[str, int]],
                    timeout_s: float = 30.0
                    ) -> tuple[dict[tuple[str, int], Coverage], dict[str, dict[tuple[str, int], Coverage]]]:
    """The coverage of destination partitions ``dests`` recorded by ``own_group`` (stable reads), and by every
    other ``lakesink-restore*`` group of the cluster (restores with another name, or by an earlier lakesink),
    as ``(own, {group: {dest: coverage}})``. Metadata that is not lakesink's is left out of the others.
    ``admin`` lists the groups; ``conf`` (its client config) reads their offsets."""
    from confluent_kafka import KafkaException

    read = read_committed(conf, own_group, dests, timeout_s)
    own = {d: _decode(own_group, d[0], d[1], *read[d]) for d in dests}
    try:
        listed = admin.list_consumer_groups(request_timeout=timeout_s).result()
    except KafkaException as e:
        raise RestoreError(f"cannot list the destination cluster's consumer groups: "
                           f"{kafka_error_of(e).str() if kafka_error_of(e) else e}") from None
    others: dict[str, dict[tuple[str, int], Coverage]] = {}
    for g in sorted(x.group_id for x in listed.valid):
        if not g.startswith("lakesink-restore") or g == own_group:
            continue
        for (t, p), (offset, metadata) in read_committed(conf, g, dests, timeout_s).items():
            if offset is None:
                continue
            try:
                cov = Coverage.decode(offset, metadata)
            except ValueError:
                continue
            others.setdefault(g, {})[(t, p)] = cov
    return own, others
