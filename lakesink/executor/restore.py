"""Restore: archived records back to Kafka, exactly once, one destination partition per worker.

:func:`restore_partition` replays the ordered objects of ONE source partition into ONE destination
topic-partition (same per-partition order, keys, headers, CreateTime timestamps) with one transactional
producer, whose ``transactional.id`` (:func:`transactional_id`) is derived from the restore name and the
destination: a second run fences the first (a zombie can commit nothing more). Progress is committed IN
THE SAME Kafka transaction as the records (``send_offsets_to_transaction``) to the consumer group
:func:`progress_group` (``lakesink-restore-<name>``), keyed by the destination topic-partition, as the
next *source* offset to restore, with a metadata string naming the source. A rerun reads that offset
(stable read: ``UNSTABLE_OFFSET_COMMIT`` is retried while a transaction of the previous run settles) and
skips every record below it; records of a transaction that did not commit were never visible to
``read_committed`` consumers. So each record is in the destination exactly once, whatever kills the worker.

Hazards the worker guards against (seen on a real broker):

- a consumer that joins the progress group would take the progress offsets (source offsets) as its
  position in the destination topic: the worker refuses to run while the group has members;
- the broker rejects timestamps more than ``log.message.timestamp.after.max.ms`` in the future (1 h on
  this broker): such a record fails the restore with one line naming it, before it is produced;
- a stable offset read right after a commit can answer ``UNSTABLE_OFFSET_COMMIT`` for about a second.

Transactions close every ``records_per_txn`` records or ``bytes_per_txn`` bytes (key + value + headers),
whichever comes first, and at the end. Records without a timestamp are produced without one (the
producer's clock). :func:`dry_run` is the plan from manifest rows alone. No Spark here: the driver runs
one worker per destination partition wherever it likes.
"""
from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from lakesink.errors import (InvalidArgumentError, RestoreError, RestoreFencedError, RestoreGroupActiveError,
                             RestoreProduceError, RestoreTimestampError)
from lakesink.executor.readback import NO_CUT, ArchivedObject, Cut, read_records

__all__ = ["DEFAULT_RECORDS_PER_TXN", "DEFAULT_BYTES_PER_TXN", "DEFAULT_MAX_FUTURE_MS", "progress_group",
           "transactional_id", "transactional_producer_config", "progress_metadata", "RestoreSummary",
           "RestoreResult", "dry_run", "check_group_idle", "read_progress", "restore_partition"]

log = logging.getLogger("lakesink.executor.restore")

DEFAULT_RECORDS_PER_TXN = 10_000
DEFAULT_BYTES_PER_TXN = 16 * 1024 * 1024
#: the broker's ``log.message.timestamp.after.max.ms`` (Kafka 4's default: one hour)
DEFAULT_MAX_FUTURE_MS = 3_600_000
#: how long a stable read of the progress offset retries UNSTABLE_OFFSET_COMMIT
PROGRESS_READ_TIMEOUT_S = 30.0

# librdkafka settings only a producer takes (the admin client and the group-metadata consumer get the rest)
_PRODUCER_ONLY = {"transactional.id", "enable.idempotence", "acks", "request.required.acks", "linger.ms",
                  "queue.buffering.max.ms", "batch.size", "batch.num.messages", "compression.type",
                  "compression.codec", "transaction.timeout.ms", "message.timeout.ms", "delivery.timeout.ms",
                  "queue.buffering.max.messages", "queue.buffering.max.kbytes", "retries",
                  "max.in.flight.requests.per.connection", "max.in.flight", "partitioner", "sticky.partitioning.linger.ms"}


def progress_group(name: str) -> str:
    """The consumer group holding a restore's progress (never joined by the restore itself)."""
    return f"lakesink-restore-{name}"


def transactional_id(name: str, topic: str, partition: int) -> str:
    """One transactional id per restore and destination partition: a newer worker fences an older one."""
    return f"lakesink-restore-{name}-{topic}-{partition}"


def progress_metadata(source_topic: str, source_partition: int) -> str:
    """The offset-commit metadata naming the source partition of the committed (source) offset."""
    return f"lakesink-restore source={source_topic}-{source_partition}"


@dataclass(frozen=True)
class RestoreSummary:
    """What a restore would read, from manifest rows alone. ``exact`` is False when the cut falls inside an
    object whose offsets (or timestamps) are not known from its row: ``records`` is then an upper bound."""

    objects: int
    records: int
    bytes: int
    exact: bool = True


def dry_run(objects: Iterable[ArchivedObject], cut: Cut = NO_CUT) -> RestoreSummary:
    """Objects, records and bytes (value objects and their side files) a restore with ``cut`` reads."""
    n_obj = records = size = 0
    exact = True
    for obj in objects:
        overlap = cut.object_overlap(obj)
        if overlap is False:
            continue
        n_obj += 1
        size += (obj.size_bytes or 0) + sum(int(s.get("size_bytes") or 0) for s in obj.side_files)
        if overlap is True:
            records += obj.record_count
            continue
        if obj.contiguous and not cut.by_time:  # offsets are first..last: count the cut exactly
            lo = max(obj.first_offset, cut.from_offset if cut.from_offset is not None else obj.first_offset)
            hi = min(obj.last_offset, cut.to_offset if cut.to_offset is not None else obj.last_offset)
            records += max(0, hi - lo + 1)
        else:
            records += obj.record_count
            exact = False
    return RestoreSummary(n_obj, records, size, exact)


@dataclass
class RestoreResult:
    """What one worker did: records produced, transactions committed, the progress it resumed from (None: a
    fresh start) and the next source offset it committed."""

    produced: int = 0
    transactions: int = 0
    resumed_from: int | None = None
    next_offset: int | None = None
    objects_read: int = 0
    bytes: int = 0
    seconds: float = 0.0
    events: list[str] = field(default_factory=list)


def transactional_producer_config(conf: Mapping[str, Any], tid: str) -> dict[str, Any]:
    """A restore worker's producer settings: the job's client settings without consumer-only properties
    (``isolation.level`` and the like, which a producer warns about, once per property and instance),
    idempotent, with transactional id ``tid``."""
    from lakesink.config.kafka import CONSUMER_ONLY

    out = {k: v for k, v in conf.items() if k not in CONSUMER_ONLY}
    # only failed deliveries call back into Python (the worker acts on errors alone; a report per record
    # was ~1 µs of Python each), unless the job's settings ask otherwise
    out.setdefault("delivery.report.only.error", True)
    out.update({"transactional.id": tid, "enable.idempotence": True})
    return out


def _client_conf(conf: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in conf.items() if k not in _PRODUCER_ONLY}


def _err(e: BaseException):
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
        raise failed(_err(e).str() if _err(e) else e) from None
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
            err = _err(e)
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


def read_progress(admin, group: str, topic: str, partition: int,
                  timeout_s: float = PROGRESS_READ_TIMEOUT_S) -> tuple[int | None, str | None]:
    """The stable committed offset of ``group`` for ``topic``-``partition`` and its metadata, (None, None)
    if none. ``UNSTABLE_OFFSET_COMMIT`` (a transaction with offsets still settling) is retried for up to
    ``timeout_s`` seconds."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

    deadline = time.monotonic() + timeout_s
    retriable = (KafkaError.UNSTABLE_OFFSET_COMMIT, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                 KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR)
    while True:
        try:
            req = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, partition)])]
            res = admin.list_consumer_group_offsets(req, require_stable=True, request_timeout=10)[group].result()
            tp = res.topic_partitions[0]
            err = tp.error
        except KafkaException as e:
            err = _err(e)
            if err is None:
                raise RestoreError(f"cannot read the progress of group {group!r} for {topic}-{partition}: {e}") from None
            tp = None
        if err is None:
            return (tp.offset, tp.metadata or None) if tp.offset >= 0 else (None, None)
        if err.code() in retriable and time.monotonic() < deadline:
            time.sleep(0.2)
            continue
        raise RestoreError(f"cannot read the progress of group {group!r} for {topic}-{partition}: {err.str()}")


class _Txn:
    """The transactional producer of one worker and the bookkeeping of its open transaction."""

    def __init__(self, conf: dict, tid: str, group: str, timeout_s: float):
        from confluent_kafka import Consumer, Producer

        self.timeout_s = timeout_s
        self.errors: list[Any] = []
        self.producer = Producer(transactional_producer_config(conf, tid))
        # never subscribes: the consumer only supplies the group metadata the offsets commit needs
        self.consumer = Consumer({**_client_conf(conf), "group.id": group, "enable.auto.commit": False,
                                  "isolation.level": "read_committed"})
        self.open = False
        self.records = 0
        self.bytes = 0

    def on_delivery(self, err, msg) -> None:
        if err is not None:
            self.errors.append((err, msg.offset() if msg is not None else None))

    def begin(self) -> None:
        if not self.open:
            self.producer.begin_transaction()
            self.open, self.records, self.bytes = True, 0, 0

    def abort(self) -> None:
        if self.open:
            self.open = False
            try:
                self.producer.abort_transaction(self.timeout_s)
            except Exception as e:  # noqa: BLE001 - already failing; the broker aborts it on timeout / fencing
                log.warning("abort_transaction failed: %s", e)

    def close(self) -> None:
        try:
            self.consumer.close()
        except Exception:  # noqa: BLE001 - nothing to release on the broker
            pass


def _fail(e: BaseException, what: str, dest: str) -> RestoreError:
    from confluent_kafka import KafkaError

    err = _err(e)
    text = err.str() if err is not None else str(e)
    if err is not None and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                          KafkaError.TRANSACTION_COORDINATOR_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
        return RestoreFencedError(f"{dest}: {what}: fenced by a newer producer with the same transactional.id "
                                  f"(another run of this restore); this run stops, nothing uncommitted is visible: {text}")
    if err is not None and err.code() == KafkaError.INVALID_TIMESTAMP:
        return RestoreTimestampError(f"{dest}: {what}: the broker refused a record's timestamp: {text}")
    return RestoreProduceError(f"{dest}: {what} failed (the open transaction was aborted; a rerun resumes from "
                               f"the last committed progress): {text}")


def restore_partition(name: str, topic: str, partition: int, objects: Iterable[ArchivedObject], store, fmt,
                      producer_config: Mapping[str, Any], *, keys_format=None, headers_format=None,
                      cut: Cut = NO_CUT, key_decoder: str = "bytes", value_decoder: str | None = None,
                      records_per_txn: int = DEFAULT_RECORDS_PER_TXN, bytes_per_txn: int = DEFAULT_BYTES_PER_TXN,
                      commit_per_object: bool = False, max_future_ms: int = DEFAULT_MAX_FUTURE_MS,
                      timeout_s: float = 60.0,
                      on_event: Callable[[str, dict], None] | None = None) -> RestoreResult:
    """Produce the records of ``objects`` (one source partition, any order: sorted here by offset) into
    ``topic``-``partition`` exactly once, resuming from the progress committed by earlier runs of restore
    ``name``. ``producer_config``: librdkafka settings (``bootstrap.servers``, security, ...);
    ``transactional.id`` is set here. A transaction commits every ``records_per_txn`` records or
    ``bytes_per_txn`` bytes, also at each object's end with ``commit_per_object``, and at the end (a last
    transaction may carry progress only). ``on_event(point, info)`` is called at ``begin`` (a transaction opens),
    ``produced`` (after each record is handed to the producer; ``info`` has ``producer``, ``offset``,
    ``in_txn``) and ``committed`` (``next_offset``): tests use it to kill the worker at those points.

    Raises RestoreGroupActiveError, RestoreFencedError, RestoreTimestampError, RestoreProduceError (all
    RestoreError), or the reader's ArchiveReadError / StoreError; the open transaction is aborted first."""
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    if records_per_txn < 1 or bytes_per_txn < 1:
        raise InvalidArgumentError("records_per_txn and bytes_per_txn must be >= 1")
    t0 = time.monotonic()
    objs = sorted(objects, key=lambda o: o.first_offset)
    sources = {(o.topic, o.kafka_partition) for o in objs}
    if len(sources) > 1:
        raise InvalidArgumentError(f"one worker restores one source partition, got {sorted(sources)}")
    src_topic, src_part = next(iter(sources)) if sources else ("", -1)
    dest = f"restore {name!r} → {topic}-{partition}"
    group = progress_group(name)
    conf = dict(producer_config)
    admin = AdminClient(_client_conf(conf))
    check_group_idle(admin, group, timeout_s)
    meta = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if meta is None or meta.error is not None or partition not in meta.partitions:
        why = meta.error.str() if meta is not None and meta.error is not None else "no such topic-partition"
        raise RestoreError(f"{dest}: the destination topic-partition does not exist ({why}); create it first")
    result = RestoreResult()
    emit = on_event or (lambda point, info: None)
    txn = _Txn(conf, transactional_id(name, topic, partition), group, timeout_s)
    try:
        try:
            # fences any older producer of this id and aborts its open transaction (or completes one being
            # committed), so the progress read next is the last that committed
            txn.producer.init_transactions(timeout_s)
        except KafkaException as e:
            raise _fail(e, "init_transactions", dest) from None
        committed, committed_meta = read_progress(admin, group, topic, partition)
        source_meta = progress_metadata(src_topic, src_part)
        if committed is not None and sources and committed_meta not in (None, source_meta):
            raise RestoreError(f"{dest}: the progress group {group!r} holds progress of another source "
                               f"({committed_meta!r}, this restore reads {src_topic}-{src_part}): use another "
                               f"restore name")
        result.resumed_from = committed
        start = committed if committed is not None else cut.from_offset
        group_md = txn.consumer.consumer_group_metadata()
        done_upto = committed  # next source offset already committed

        def commit(next_offset: int) -> None:
            nonlocal done_upto
            txn.begin()
            try:
                txn.producer.send_offsets_to_transaction(
                    [TopicPartition(topic, partition, next_offset, source_meta)], group_md, timeout_s)
                txn.producer.flush(timeout_s)
                if txn.errors:
                    raise _delivery_failure(txn.errors, dest)
                txn.producer.commit_transaction(timeout_s)
            except KafkaException as e:
                txn.abort()
                raise _fail(e, "commit", dest) from None
            except RestoreError:
                txn.abort()
                raise
            txn.open = False
            result.transactions += 1
            result.next_offset = done_upto = next_offset
            emit("committed", {"next_offset": next_offset})

        cap = cut.to_offset + 1 if cut.to_offset is not None else None
        for obj in objs:
            if start is not None and obj.last_offset < start:
                continue
            lows = [x for x in (start, cut.from_offset) if x is not None]
            sub = Cut(max(lows) if lows else None, cut.to_offset, cut.from_ts, cut.to_ts)
            if sub.object_overlap(obj) is False:
                continue
            records = read_records(store, fmt, obj, keys_format=keys_format, headers_format=headers_format, cut=sub,
                                   key_decoder=key_decoder, value_decoder=value_decoder)
            result.objects_read += 1
            now_ms = int(time.time() * 1000)
            for i, r in enumerate(records):
                if r.timestamp is not None and r.timestamp > now_ms + max_future_ms:
                    txn.abort()
                    when = dt.datetime.fromtimestamp(r.timestamp / 1000, dt.timezone.utc).isoformat()
                    raise RestoreTimestampError(
                        f"{dest}: record {r.topic}-{r.partition}@{r.offset} has timestamp {r.timestamp} ({when}), "
                        f"more than {max_future_ms} ms in the future: the broker refuses it "
                        f"(log.message.timestamp.after.max.ms); nothing after offset {done_upto} was committed")
                txn.begin()
                if txn.records == 0:
                    emit("begin", {"offset": r.offset})
                while True:
                    try:  # timestamp 0 is librdkafka's "now", as for a record without one
                        txn.producer.produce(topic, value=r.value, key=r.key, partition=partition,
                                             headers=r.headers or None, on_delivery=txn.on_delivery,
                                             timestamp=r.timestamp or 0)
                        break
                    except BufferError:  # the local queue is full: let deliveries drain it
                        txn.producer.poll(0.1)
                    except KafkaException as e:
                        txn.abort()
                        raise _fail(e, f"produce of {r.topic}-{r.partition}@{r.offset}", dest) from None
                if not result.produced & 0xFF:  # serve delivery reports every 256 records, not per record
                    txn.producer.poll(0)
                size = len(r.value or b"") + len(r.key or b"")
                if r.headers:
                    size += sum([len(k) + len(v) if v else len(k) for k, v in r.headers])
                txn.records += 1
                txn.bytes += size
                result.produced += 1
                result.bytes += size
                if on_event is not None:
                    emit("produced", {"producer": txn.producer, "offset": r.offset, "in_txn": txn.records})
                if txn.errors:
                    txn.abort()
                    raise _delivery_failure(txn.errors, dest)
                # records a transform made of one Kafka record share its offset (lakesink.transforms): progress
                # (the next source offset) is committed only after the last of them, or a resume would skip the rest
                group_open = i + 1 < len(records) and records[i + 1].offset == r.offset
                if (txn.records >= records_per_txn or txn.bytes >= bytes_per_txn) and not group_open:
                    commit(r.offset + 1)
            if commit_per_object and txn.open:
                # every record of the object is accounted for (produced, or outside the cut)
                commit(obj.last_offset + 1 if cap is None else min(obj.last_offset + 1, cap))
        if txn.open or (objs and (done_upto is None or _final(objs, cap) > done_upto)):
            commit(_final(objs, cap))
    finally:
        if txn.open:
            txn.abort()
        txn.close()
        result.seconds = time.monotonic() - t0
    return result


def _final(objs: list[ArchivedObject], cap: int | None) -> int:
    """The next source offset once every object is restored (capped by the cut's end)."""
    upto = objs[-1].last_offset + 1
    return upto if cap is None else min(upto, cap)


def _delivery_failure(errors: list, dest: str) -> RestoreError:
    from confluent_kafka import KafkaError

    err, _off = errors[0]
    if err.code() == KafkaError.INVALID_TIMESTAMP:
        return RestoreTimestampError(f"{dest}: the broker refused a record's timestamp ({err.str()}); "
                                     f"check log.message.timestamp.after.max.ms / before.max.ms")
    if err.code() == KafkaError.INVALID_RECORD:  # what this broker answers for a timestamp out of bounds too
        return RestoreProduceError(
            f"{dest}: the broker refused {len(errors)} record(s) as invalid: {err.str()}; a timestamp outside the "
            f"topic's message.timestamp.before.max.ms / after.max.ms, or a null key on a compacted topic, are the "
            f"usual causes; the open transaction was aborted")
    if err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
        return RestoreFencedError(f"{dest}: fenced by a newer producer with the same transactional.id: {err.str()}")
    return RestoreProduceError(f"{dest}: {len(errors)} record(s) not delivered, first: {err.str()}; the open "
                               f"transaction was aborted")
