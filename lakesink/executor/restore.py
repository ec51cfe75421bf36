"""Restore: archived records back to Kafka, exactly once, one source partition per worker.

:func:`restore_partition` replays the objects of ONE source partition into ONE destination topic-partition in
source-offset order (objects whose offsets interleave are merged; keys, headers and CreateTime timestamps kept)
with one transactional producer, whose ``transactional.id`` (:func:`transactional_id`) is derived from the
destination: a second restore into the same partition fences the first (a zombie can commit nothing more).
Progress is committed IN THE SAME Kafka transaction as the records (``send_offsets_to_transaction``) to the
consumer group :func:`progress_group`, keyed by the destination topic-partition: the offset metadata is a
:class:`~lakesink.executor.coverage.Coverage`, which source offsets of which source partition are in the
destination. A later restore reads it (stable read: ``UNSTABLE_OFFSET_COMMIT`` is retried while a transaction of
the previous run settles) and skips every record it covers, whatever that restore's selection; records of a
transaction that did not commit were never visible to ``read_committed`` consumers. So each record is in the
destination exactly once, whatever kills the worker and however the command is spelt.

Hazards the worker guards against (seen on a real broker):

- a consumer that joins the progress group would take the progress offsets (source offsets) as its
  position in the destination topic: the worker refuses to run while the group has members;
- the broker rejects timestamps more than ``log.message.timestamp.after.max.ms`` in the future (1 h on
  this broker): such a record fails the restore with one line naming it, before it is produced;
- a stable offset read right after a commit can answer ``UNSTABLE_OFFSET_COMMIT`` for about a second.

**Latest per key** (``latest_per_key``, :mod:`lakesink.executor.latest`): the worker reads its source partition's
selection twice, in source-offset order: first the keys and offsets alone (the ``.keys`` and ``.metadata.avro``
side files, :func:`~lakesink.executor.readback.read_key_positions`), then the records, producing only each key's
last record (a tombstone too, unless ``drop_tombstones``). The records left out as older versions (and dropped
tombstones) are part of what the run covers: its progress claims every selected offset up to the last record
it produced, as for a plain restore, so a rerun produces nothing more and a killed run's rerun produces each
kept record once. Only later records can supersede a record, so the first pass may skip the objects the
progress already holds up to the first one it does not (a resumed run scans from there on); after that it reads
every selected object's keys, covered or not (an already restored later version still supersedes).

**Another partition count** (``routers``, :mod:`lakesink.executor.partitioning`): with ``--partitioner default``
or ``--partition-map`` a worker restores ONE SOURCE partition into every destination partition its records reach,
with one transactional producer (a Kafka transaction spans partitions), so its records and its progress still
commit together. Its transactional id (:func:`routed_transactional_id`) and progress group
(:func:`~lakesink.executor.restore_progress.routed_group`) are its source partition's: sources that meet in one
destination partition never share a progress offset. The group holds the same coverage at every destination
partition the source can reach (read back from the first). Records are produced in source-offset order, each to
the partition the router names for its key as produced, so every key's records stay in one destination partition
in order (records of several sources interleave there: the source topic had no order across partitions either).

Size: over the ~500-line guide because one worker loop serves the plain, latest-per-key, another-registry and
routed restores; splitting it would split the transaction bookkeeping they share.

Transactions close every ``records_per_txn`` records or ``bytes_per_txn`` bytes (key + value + headers),
whichever comes first, and at the end. Records without a timestamp are produced without one (the
producer's clock). :func:`dry_run` is the plan from manifest rows alone. No Spark here: the driver runs
one worker per destination partition wherever it likes.
"""
from __future__ import annotations

import datetime as dt
import heapq
import logging
import threading
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from lakesink.errors import (InvalidArgumentError, RestoreError, RestoreFencedError,
                             RestoreProduceError, RestoreRefusedError, RestoreTimestampError)
from lakesink.executor.blockcut import BlockCounts
from lakesink.executor.committed import KafkaClients
from lakesink.executor.coverage import Interval, intersect, merge
from lakesink.executor.latest import KEEP, TOMBSTONE, LatestPerKey
from lakesink.executor.readback import (NO_CUT, ArchivedObject, Cut, ProduceColumns, read_key_positions,
                                       read_produce_columns, read_records)
from lakesink.executor.throttle import Throttle
from lakesink.executor.restore_progress import (check_group_idle, group_coverages, kafka_error_of, progress_group,
                                                read_coverage, read_progress, routed_group)

__all__ = ["DEFAULT_RECORDS_PER_TXN", "THROTTLED_TXN_S", "paced_records_per_txn", "DEFAULT_BYTES_PER_TXN",
           "DEFAULT_MAX_FUTURE_MS", "progress_group",
           "transactional_id", "routed_transactional_id", "produced_key_bytes", "transactional_producer_config",
           "RestoreSummary", "RestoreResult", "dry_run",
           "check_group_idle", "read_progress", "read_coverage", "group_coverages", "restore_partition", "clusters",
           "ProducerStarts", "DEFAULT_TIMEOUT_S",
           "produce_columns"]

log = logging.getLogger("lakesink.executor.restore")

#: a partition's bound on each Kafka call of its restore (``init_transactions``, commits, offset reads), seconds
DEFAULT_TIMEOUT_S = 60.0

#: records per transaction (``bytes_per_txn``, 16 MiB, closes one first for records over ~335 B): each commit
#: (flush, progress offsets, EndTxn) costs the worker ~10 ms of CPU, ~1 µs a record at 10,000 records (issue #30)
DEFAULT_RECORDS_PER_TXN = 50_000
DEFAULT_BYTES_PER_TXN = 16 * 1024 * 1024
#: seconds of records a ``--max-rate`` restore puts in one transaction at most
THROTTLED_TXN_S = 10
#: the broker's ``log.message.timestamp.after.max.ms`` (Kafka 4's default: one hour)
DEFAULT_MAX_FUTURE_MS = 3_600_000





def paced_records_per_txn(records_per_txn: int, max_rate: float) -> int:
    """Records per transaction of a ``--max-rate`` restore: a paced transaction stays open records / rate seconds,
    so at most :data:`THROTTLED_TXN_S` seconds of records, well inside the broker's transaction timeout
    (``transaction.timeout.ms``, librdkafka's default 60 s)."""
    return min(records_per_txn, max(1, int(max_rate * THROTTLED_TXN_S)))


def transactional_id(name: str | None, topic: str, partition: int) -> str:
    """One transactional id per progress group and destination partition: a newer restore into the same
    partition fences an older one (``:`` never appears in a topic name, so the default ids cannot collide with
    a named restore's)."""
    return f"lakesink-restore:{topic}:{partition}" if name is None else f"lakesink-restore-{name}-{topic}-{partition}"


def routed_transactional_id(name: str | None, topic: str, source_topic: str, source_partition: int) -> str:
    """The transactional id of a routed restore's worker (``--partitioner`` / ``--partition-map``): one per source
    partition and destination topic, since that worker's one producer writes every destination partition its
    records reach. A newer run of it fences an older one, whatever its routing."""
    if name is None:
        return f"lakesink-restore:{topic}:from:{source_topic}:{source_partition}"
    return f"lakesink-restore-{name}-{topic}-from-{source_topic}-{source_partition}"


@dataclass(frozen=True)
class RestoreSummary:
    """What a restore would read, from manifest rows alone. ``exact`` is False when the cut falls inside an
    object whose offsets (or timestamps) are not known from its row: ``records`` is then an upper bound."""

    objects: int
    records: int
    bytes: int
    exact: bool = True


def dry_run(objects: Iterable[ArchivedObject], cut: Cut = NO_CUT,
            count: Callable[[ArchivedObject], int | None] | None = None) -> RestoreSummary:
    """Objects, records and bytes (value objects and their side files) a restore with ``cut`` reads. ``count``:
    the exact number of an object's records inside the cut, for an object the cut falls inside whose rows cannot
    tell, and with a time cut for every object (its manifest bounds leave out records without a timestamp, which
    no time cut takes). None: unknown; :func:`~lakesink.executor.readback.count_in_cut` reads the metadata side
    file."""
    n_obj = records = size = 0
    exact = True
    for obj in objects:
        overlap = cut.object_overlap(obj)
        if overlap is False:
            continue
        n_obj += 1
        size += (obj.size_bytes or 0) + sum(int(s.get("size_bytes") or 0) for s in obj.side_files)
        if overlap is True and not (cut.by_time and count is not None):
            records += obj.record_count  # (a record without a timestamp is outside a time cut: only count knows)
            continue
        if obj.contiguous and not cut.by_time:  # offsets are first..last: count the cut exactly
            lo = max(obj.first_offset, cut.from_offset if cut.from_offset is not None else obj.first_offset)
            hi = min(obj.last_offset, cut.to_offset if cut.to_offset is not None else obj.last_offset)
            records += max(0, hi - lo + 1)
        else:
            inside = count(obj) if count is not None else None
            if inside is None:  # unknown: the whole object (what a restore reads of it without metadata)
                records += obj.record_count
                exact = exact and overlap is True
            else:
                records += inside
    return RestoreSummary(n_obj, records, size, exact)


@dataclass
class RestoreResult:
    """What one worker did: records produced, transactions committed, the progress it resumed from (None: a
    fresh start) and the next source offset it committed; with ``latest_per_key``, the records left out as older
    versions of their key (``superseded``) and the tombstones dropped (``tombstones_dropped``)."""

    produced: int = 0
    skipped: int = 0
    superseded: int = 0
    tombstones_dropped: int = 0
    transactions: int = 0
    resumed_from: int | None = None
    next_offset: int | None = None
    objects_read: int = 0
    #: Avro blocks and Block-GZIP chunks of the objects read that a cut inside them decoded and left unread
    blocks_read: int = 0
    blocks_skipped: int = 0
    bytes: int = 0
    seconds: float = 0.0
    events: list[str] = field(default_factory=list)
    #: with ``groups``: per consumer group, where it was placed (:meth:`lakesink.executor.groups.GroupCommitter.report`)
    groups: list[dict] = field(default_factory=list)


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


class _Txn:
    """The transactional producer of one worker and the bookkeeping of its open transaction."""

    def __init__(self, conf: dict, tid: str, consumer: Any, timeout_s: float):
        from confluent_kafka import Producer

        self.timeout_s = timeout_s
        self.errors: list[Any] = []
        self.fatal: Any = None  # the error behind librdkafka's "Local: Fatal error" (a fencing, usually)
        self.producer = Producer({**transactional_producer_config(conf, tid), "error_cb": self.on_error})
        # the progress group's, never subscribing (KafkaClients): reads the progress and supplies the group
        # metadata the offsets commit needs
        self.consumer = consumer
        self.open = False
        self.records = 0
        self.bytes = 0
        self._init: threading.Thread | None = None  # init_transactions started ahead (start_init)
        self._init_error: BaseException | None = None

    def start_init(self) -> None:
        """Run ``init_transactions`` on a thread; :meth:`init` waits for it."""
        def run() -> None:
            try:
                self.producer.init_transactions(self.timeout_s)
            except BaseException as e:  # noqa: BLE001 - raised by init(), in the partition that takes the producer
                self._init_error = e

        self._init = threading.Thread(target=run, name="lakesink-restore-init", daemon=True)
        self._init.start()

    def init(self) -> None:
        """``init_transactions``, or the end of the one :meth:`start_init` started (raising what it raised)."""
        if self._init is None:
            self.producer.init_transactions(self.timeout_s)
            return
        self.settle()
        if self._init_error is not None:
            raise self._init_error

    def settle(self, timeout_s: float | None = None) -> None:
        """Wait for an ``init_transactions`` started ahead to return (at most ``timeout_s``; None: until it does)."""
        if self._init is not None:
            self._init.join(timeout_s)

    def on_error(self, err) -> None:
        if err.fatal():
            self.fatal = err

    def on_delivery(self, err, msg) -> None:
        if err is not None:
            try:
                offset = msg.offset() if msg is not None else None
            except SystemError:
                # a fenced producer's flush() can serve this callback with its fatal error already raised: the
                # message's methods then fail, and flush() raises that error when the callback returns
                offset = None
            self.errors.append((err, offset))

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


class ProducerStarts:
    """Transactional producers started ahead, for a task that restores several destination partitions: while the
    task restores one partition, :meth:`start` creates the next one's producer and runs its ``init_transactions``
    on a thread (:meth:`_Txn.start_init`: a call that mostly waits for the transaction coordinator, longer the
    busier the broker is), and :func:`restore_partition` takes it instead of starting its own. Each partition
    still has its own producer and transactional id, and its ``init_transactions`` still completes before its
    progress is read (:meth:`_Txn.init`): only the waiting overlaps. :meth:`close` when the task ends (a started
    producer nobody took is dropped: its ``init_transactions`` produced nothing)."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self._started: dict[str, _Txn] = {}

    def start(self, conf: dict, tid: str, consumer: Any) -> None:
        """Start the producer of ``tid`` (``conf``: the client config as :func:`restore_partition` gets it)."""
        if tid not in self._started:
            self._started[tid] = _Txn(conf, tid, consumer, self.timeout_s)
            self._started[tid].start_init()

    def take(self, tid: str) -> "_Txn | None":
        """The started producer of ``tid`` (None: none was started)."""
        return self._started.pop(tid, None)

    def close(self) -> None:
        """Drop the producers nobody took (waiting at most ``timeout_s`` for each start to return)."""
        started, self._started = list(self._started.values()), {}
        for txn in started:
            txn.settle(self.timeout_s)


def _fail(e: BaseException, what: str, dest: str, txn: "_Txn | None" = None) -> RestoreError:
    from confluent_kafka import KafkaError

    err = kafka_error_of(e)
    if err is not None and err.code() == KafkaError._FATAL and txn is not None:
        txn.producer.poll(0)  # serves the error callback that names the cause
        err = txn.fatal or err
    text = err.str() if err is not None else str(e)
    if err is not None and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                          KafkaError.TRANSACTION_COORDINATOR_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
        return RestoreFencedError(f"{dest}: {what}: fenced by a newer producer with the same transactional.id "
                                  f"(another run of this restore); this run stops, nothing uncommitted is visible: {text}")
    if err is not None and err.code() == KafkaError.INVALID_TIMESTAMP:
        return RestoreTimestampError(f"{dest}: {what}: the broker refused a record's timestamp: {text}")
    return RestoreProduceError(f"{dest}: {what} failed (the open transaction was aborted; a rerun resumes from "
                               f"the last committed progress): {text}")


def restore_partition(name: str | None, topic: str, partition: int, objects: Iterable[ArchivedObject], store, fmt,
                      producer_config: Mapping[str, Any], *, keys_format=None, headers_format=None,
                      cut: Cut = NO_CUT, key_decoder: str = "bytes", value_decoder: str | None = None,
                      records_per_txn: int = DEFAULT_RECORDS_PER_TXN, bytes_per_txn: int = DEFAULT_BYTES_PER_TXN,
                      commit_per_object: bool = False, max_future_ms: int = DEFAULT_MAX_FUTURE_MS,
                      holes: Sequence[Interval] = (), again: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S,
                      latest_per_key: bool = False, drop_tombstones: bool = False, schema_ids: Any = None,
                      routers: Mapping[str, Any] | None = None, groups: Any = None, max_rate: float | None = None,
                      on_event: Callable[[str, dict], None] | None = None,
                      coarse_events: bool = False, clients: KafkaClients | None = None,
                      starts: ProducerStarts | None = None) -> RestoreResult:
    """Produce the records of ``objects`` (one source partition, any order) into ``topic``-``partition`` in
    source-offset order, exactly once: a record that any earlier restore into this destination already produced
    (the :class:`~lakesink.executor.coverage.Coverage` in progress group :func:`progress_group` of ``name``) is
    skipped, unless ``again``. ``holes``: the offset spans of the source partition's objects the restore did
    not select (its ``--where`` left them out), which its progress must not claim. ``producer_config``:
    librdkafka settings (``bootstrap.servers``, security, ...); ``transactional.id`` is set here. A transaction
    commits every ``records_per_txn`` records or ``bytes_per_txn`` bytes, also at each object's end with
    ``commit_per_object``, and at the end (a last transaction may carry progress only). ``on_event(point,
    info)`` is called at ``begin`` (a transaction opens), ``produced`` (after each record is handed to the
    producer; ``info`` has ``producer``, ``offset``, ``in_txn``) and ``committed`` (``next_offset``): tests use
    it to kill the worker at those points. With ``coarse_events``, a plain restore reports ``produced`` once per
    run of up to 256 records instead (``info``: ``producer``, ``offset`` of the run's last record, ``n`` records):
    what a progress display needs, at a fraction of the cost. ``latest_per_key``: only each key's last selected record is produced
    (``drop_tombstones``: not when it is a tombstone); see the module docstring. ``schema_ids``: an
    :class:`~lakesink.schemas.registry_copy.IdMap`: each value's and key's schema id is rewritten through it just
    before the record is produced (a record it cannot map fails the restore, naming it, and is not produced).
    ``routers``: destination topic -> :class:`~lakesink.executor.partitioning.Router`; when ``topic`` has one,
    ``partition`` is ignored and each record goes to the partition the router gives it (see "Another partition
    count" in the module docstring).
    ``groups``: a :class:`~lakesink.executor.groups.GroupTargets`: consumer groups placed on each destination
    partition in the transactions that produce their records (:mod:`lakesink.executor.groups`; routed: on every
    partition the router reaches, each at its own first record the group had not consumed).
    ``max_rate``: at most this many records a second (:class:`~lakesink.executor.throttle.Throttle`; None: no limit).
    ``clients``: the admin client and progress consumer to use (:class:`~lakesink.executor.committed.KafkaClients`,
    shared by the partitions of one task and closed by its owner); None: this call's own. The transactional
    producer is always this call's: its id is the destination partition's. ``starts``: producers started ahead
    (:class:`ProducerStarts`); this call takes its own from there when one was started for its id.

    Raises RestoreGroupActiveError, RestoreFencedError, RestoreTimestampError, RestoreProduceError (all
    RestoreError), or the reader's ArchiveReadError / StoreError; the open transaction is aborted first."""
    from confluent_kafka import KafkaException, TopicPartition

    if records_per_txn < 1 or bytes_per_txn < 1:
        raise InvalidArgumentError("records_per_txn and bytes_per_txn must be >= 1")
    if drop_tombstones and not latest_per_key:
        raise InvalidArgumentError("drop_tombstones needs latest_per_key (a plain restore keeps every record)")
    t0 = time.monotonic()
    # ``fmt``: the value format, or a function of the object giving its own (a job may have changed format.class
    # or its codec over its life; adopted archives mix codecs)
    fmt_of = fmt if callable(fmt) and not hasattr(fmt, "record_bytes") else (lambda _obj: fmt)
    objs = sorted(objects, key=lambda o: (o.first_offset, o.last_offset))
    sources = {(o.topic, o.kafka_partition) for o in objs}
    if len(sources) > 1:
        raise InvalidArgumentError(f"one worker restores one source partition, got {sorted(sources)}")
    src_topic, src_part = next(iter(sources)) if sources else ("", -1)
    router = (routers or {}).get(topic)
    if router is None:
        dest = f"restore into {topic}-{partition}"
        group, tid, slots = progress_group(name), transactional_id(name, topic, partition), (partition,)
    else:
        if not objs:
            return RestoreResult()
        dest = f"restore of {src_topic}-{src_part} into {topic} ({router.spec})"
        group = routed_group(name, src_topic, src_part, router.spec)
        tid = routed_transactional_id(name, topic, src_topic, src_part)
        slots = router.destinations(src_part)  # every slot of the group gets the same progress
    conf = dict(producer_config)
    if groups is not None:  # group offsets come from delivery reports
        conf["delivery.report.only.error"] = False
    shared = KafkaClients(conf) if clients is None else clients  # own clients are closed at the end
    admin = shared.admin()
    # once per task (clients shared by its partitions): listing every group of the cluster and the topic's
    # metadata per destination partition cost a 64-partition restore two round trips a partition
    shared.once(("idle", group), lambda: check_group_idle(admin, group, timeout_s))
    meta = shared.topic(topic, timeout_s)
    if router is not None and meta is not None and meta.error is None and len(meta.partitions) != router.num_partitions:
        raise RestoreRefusedError(f"{dest}: the destination topic has {len(meta.partitions)} partition(s) now, "
                                  f"the restore was planned for {router.num_partitions}; nothing was produced: run "
                                  f"it again")
    if meta is None or meta.error is not None or slots[0] not in meta.partitions:
        why = meta.error.str() if meta is not None and meta.error is not None else "no such topic-partition"
        raise RestoreError(f"{dest}: the destination topic-partition does not exist ({why}); create it first")
    result = RestoreResult()
    emit = on_event or (lambda point, info: None)
    new_value = schema_ids.rewriter("value") if schema_ids is not None else None
    new_key = schema_ids.rewriter("key") if schema_ids is not None else None
    txn = starts.take(tid) if starts is not None else None
    if txn is None:
        txn = _Txn(conf, tid, shared.consumer(group), timeout_s)
    throttle = Throttle(max_rate) if max_rate is not None else None
    if max_rate is not None:
        records_per_txn = paced_records_per_txn(records_per_txn, max_rate)
    blocks = BlockCounts()
    hook = None
    try:
        if groups is not None:  # one committer per destination partition this worker produces into
            hook = groups.committers(src_topic, src_part, topic, slots, shared.conf, admin, timeout_s)
        try:
            # fences any older producer of this id and aborts its open transaction (or completes one being
            # committed), so the progress read next is the last that committed (one started ahead: it has returned)
            txn.init()
        except KafkaException as e:
            raise _fail(e, "init_transactions", dest, txn) from None
        coverage = read_coverage(shared.conf, group, topic, slots[0], timeout_s, consumer=txn.consumer)
        mine = coverage.source(src_topic, src_part)
        result.resumed_from = (mine.high() + 1) if mine else None
        window = (cut.from_ts, cut.to_ts)
        run_lo = cut.from_offset if cut.from_offset is not None else 0
        cap = cut.to_offset
        selected = merge([(o.first_offset, o.last_offset) for o in objs])
        if not again:  # the driver checked this too, before a restore that committed since could have
            top = cap if cap is not None else (selected[-1][1] if selected else -1)
            hit = mine.conflicts(intersect(selected, [(run_lo, top)]))
            if hit:
                raise RestoreRefusedError(
                    f"{dest}: offsets {hit[0][0]}-{hit[0][1]} of {src_topic}-{src_part} may already be there (an "
                    f"earlier restore in group {group!r} produced part of them); nothing was produced: pass --again "
                    f"to produce them again (duplicates)")
        group_md = txn.consumer.consumer_group_metadata()

        def commit(upto: int, final: bool = False) -> None:
            """Commit the open transaction with the progress: everything selected up to offset ``upto``."""
            nonlocal coverage, mine
            now = mine.add(run_lo, upto, window, list(holes), selected)
            updated = coverage.with_source(src_topic, src_part, now)
            offset, md = updated.encode()
            if not txn.open and updated == coverage and not (hook is not None and hook.due(final)):
                return  # nothing new: no transaction
            txn.begin()
            try:
                if hook is not None:  # consumer groups, in the transaction of the records they point at or past
                    txn.producer.flush(timeout_s)
                    for gmd, tps in hook.offsets(final, lambda d: txn.consumer.get_watermark_offsets(
                            TopicPartition(topic, d), timeout_s)[1]):
                        txn.producer.send_offsets_to_transaction(tps, gmd, timeout_s)
                txn.producer.send_offsets_to_transaction([TopicPartition(topic, d, offset, md) for d in slots],
                                                         group_md, timeout_s)
                txn.producer.flush(timeout_s)
                if txn.errors:
                    raise _delivery_failure(txn.errors, dest)
                txn.producer.commit_transaction(timeout_s)
            except KafkaException as e:
                txn.abort()
                raise _fail(e, "commit", dest, txn) from None
            except RestoreError:
                txn.abort()
                raise
            txn.open = False
            if hook is not None:
                hook.committed()
            result.transactions += 1
            result.next_offset = offset
            coverage, mine = updated, now
            emit("committed", {"next_offset": offset})

        groups = clusters(objs)
        # a plain restore (no key-dependent choice, routing, id rewriting or group placement) produces each object's
        # columns in runs (:func:`produce_columns`); the others go record by record below
        fast = (not latest_per_key and router is None and new_value is None and hook is None
                and throttle is None)  # --max-rate paces record by record
        latest, kept, scanned = None, [], {}
        if latest_per_key:  # first pass: every key's last record (see the module docstring)
            latest = LatestPerKey(f"{src_topic}-{src_part}", drop_tombstones)
            prefix = not again
            for ci, cluster in enumerate(groups):
                members = [o for o in cluster if cut.object_overlap(o) is not False]
                if prefix and all(_held(mine, o, cut) for o in members):
                    continue  # covered, and nothing before it left to supersede: the second pass skips it too
                prefix = False
                pos = [read_key_positions(store, o, keys_format=keys_format, cut=cut, key_decoder=key_decoder)
                       for o in members]
                merged = pos[0] if len(pos) == 1 else _merge_positions(pos)
                latest.scan(*merged)
                scanned[ci] = len(merged[0])
            kept = latest.kept_offsets()

        for ci, cluster in enumerate(groups):
            c_lo, c_hi = cluster[0].first_offset, max(o.last_offset for o in cluster)
            check = not again and mine.touches(c_lo, c_hi)
            members = [o for o in cluster if cut.object_overlap(o) is not False]
            if latest is not None:
                if ci not in scanned or (check and all(_held(mine, o, cut) for o in members)):
                    result.skipped += sum(o.record_count for o in members)  # already there: not even read
                    continue
                k = bisect_left(kept, c_lo)
                if k == len(kept) or kept[k] > c_hi:
                    result.superseded += scanned[ci]  # every record an older version of its key: not read
                    continue
            if fast and not check and len(members) == 1:  # the plain restore's path: a column at a time
                cols = read_produce_columns(store, fmt_of(members[0]), members[0], keys_format=keys_format,
                                            headers_format=headers_format, cut=cut, key_decoder=key_decoder,
                                            value_decoder=value_decoder, blocks=blocks)
                result.objects_read += 1
                if cols is not None:
                    produce_columns(txn, cols, topic, partition, members[0], commit, result, emit, coarse_events,
                                     on_event is not None, records_per_txn, bytes_per_txn, max_future_ms, dest)
                if commit_per_object and txn.open:
                    commit(c_hi if cap is None else min(c_hi, cap))
                continue
            reads = []
            for obj in members:
                # (latest per key: records of one offset are counted across the cluster's objects, so all are read)
                if latest is None and check and _held(mine, obj, cut):
                    result.skipped += obj.record_count  # already there, every record: not even read
                    continue
                reads.append(read_records(store, fmt_of(obj), obj, keys_format=keys_format,
                                          headers_format=headers_format,
                                          cut=cut, key_decoder=key_decoder, value_decoder=value_decoder,
                                          blocks=blocks))
                result.objects_read += 1
            # objects of one commit group interleave in offsets (Field/TimeBased partitioners): one offset order
            records = reads[0] if len(reads) == 1 else list(heapq.merge(*reads, key=lambda r: r.offset))
            if not records:
                continue
            now_ms = int(time.time() * 1000)
            # routed: each record's destination from the key it is produced with (one numpy pass per read)
            routes = (router.route_many(src_part, [produced_key_bytes(r.key) for r in records])
                      if router is not None and router.keyed and new_key is None else None)
            for i, r in enumerate(records):
                verdict = KEEP if latest is None else latest.verdict(r.offset, r.key, r.value)
                if check and mine.covers(r.offset, r.timestamp):
                    result.skipped += 1
                    continue
                if verdict is not KEEP:
                    if verdict is TOMBSTONE:
                        result.tombstones_dropped += 1
                    else:
                        result.superseded += 1
                    continue
                if r.timestamp is not None and r.timestamp > now_ms + max_future_ms:
                    txn.abort()
                    when = dt.datetime.fromtimestamp(r.timestamp / 1000, dt.timezone.utc).isoformat()
                    raise RestoreTimestampError(
                        f"{dest}: record {r.topic}-{r.partition}@{r.offset} has timestamp {r.timestamp} ({when}), "
                        f"more than {max_future_ms} ms in the future: the broker refuses it "
                        f"(log.message.timestamp.after.max.ms); nothing after the last committed progress was "
                        f"produced")
                value, key = r.value, r.key
                if new_value is not None:  # another registry: its ids, the same datum bytes
                    value = new_value(value, r.topic, r.partition, r.offset)
                    key = new_key(key, r.topic, r.partition, r.offset)
                if router is None:
                    part = partition
                elif routes is not None:
                    part = int(routes[i])
                else:
                    part = router.route(src_part, produced_key_bytes(key))
                if throttle is not None:  # --max-rate: wait for this record's slot, serving delivery reports
                    wait = throttle.delay(result.produced)
                    while wait > 0:
                        txn.producer.poll(wait)
                        wait = throttle.delay(result.produced)
                txn.begin()
                if txn.records == 0:
                    emit("begin", {"offset": r.offset})
                on_delivery = txn.on_delivery if hook is None else hook.callback(r.offset, txn.on_delivery, part)
                while True:
                    try:  # timestamp 0 is librdkafka's "now", as for a record without one
                        txn.producer.produce(topic, value=value, key=key, partition=part,
                                             headers=r.headers or None, on_delivery=on_delivery,
                                             timestamp=r.timestamp or 0)
                        break
                    except BufferError:  # the local queue is full: let deliveries drain it
                        txn.producer.poll(0.1)
                    except KafkaException as e:
                        txn.abort()
                        raise _fail(e, f"produce of {r.topic}-{r.partition}@{r.offset}", dest, txn) from None
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
                    emit("produced", {"producer": txn.producer, "offset": r.offset, "in_txn": txn.records,
                                      "partition": part})
                if txn.errors:
                    txn.abort()
                    raise _delivery_failure(txn.errors, dest)
                # records a transform made of one Kafka record share its offset (lakesink.transforms): progress
                # is committed only after the last of them, or a resume would skip the rest
                group_open = i + 1 < len(records) and records[i + 1].offset == r.offset
                if (txn.records >= records_per_txn or txn.bytes >= bytes_per_txn) and not group_open:
                    commit(r.offset)
            if commit_per_object and txn.open:
                # every record of the objects is accounted for (produced, skipped, or outside the cut)
                commit(c_hi if cap is None else min(c_hi, cap))
        if objs:
            end = max(o.last_offset for o in objs)
            commit(end if cap is None else min(end, cap), final=True)
    finally:
        result.blocks_read, result.blocks_skipped = blocks.read, blocks.skipped
        if txn.open:
            txn.abort()
        if clients is None:
            shared.close()
        if hook is not None:
            hook.close()
            result.groups = hook.report()
        result.seconds = time.monotonic() - t0
    return result


#: records handed to the producer between two polls (delivery reports served, failures checked)
_RUN = 256


def produce_columns(txn: _Txn, cols: ProduceColumns, topic: str, partition: int, obj: ArchivedObject,
                     commit: Callable[[int], None], result: RestoreResult, emit: Callable[[str, dict], None],
                     coarse: bool, events: bool, records_per_txn: int, bytes_per_txn: int, max_future_ms: int,
                     dest: str) -> None:
    """Produce one object's records (a plain restore: every record of ``cols`` is produced, in order) with the
    record loop's rules, decided a column at a time: a transaction commits at the first record at which it holds
    ``records_per_txn`` records or ``bytes_per_txn`` bytes and the next record has another offset; a record
    timestamped more than ``max_future_ms`` ahead fails the restore before it is produced. Between the commits
    the records go to the producer in runs of :data:`_RUN`, the only Python per record being the ``produce``
    call (and ``on_event``'s ``produced``, per record when ``events`` and not ``coarse``)."""
    import numpy as np
    from confluent_kafka import KafkaException

    offs, sizes = cols.offsets, cols.sizes
    n = len(offs)
    stop = n
    ts = cols.timestamps_arrow
    limit = int(time.time() * 1000) + max_future_ms
    if ts.null_count < n:
        late = np.flatnonzero(ts.fill_null(0).to_numpy(zero_copy_only=False) > limit)
        if len(late):
            stop = int(late[0])
    values, keys, headers, stamps = cols.values, cols.keys, cols.headers, cols.timestamps
    produce, cb = txn.producer.produce, txn.on_delivery
    each = events and not coarse
    i = 0
    while i < stop:
        txn.begin()
        if txn.records == 0:
            emit("begin", {"offset": int(offs[i])})
        # the record at which this transaction is full (records or bytes), then past records sharing its offset
        # (records a transform made of one Kafka record: progress only after the last of them)
        full = min(i + records_per_txn - txn.records,
                   int(np.searchsorted(sizes, sizes[i] + bytes_per_txn - txn.bytes, "left")))
        end = max(full, i + 1)
        closes = end <= n
        if closes:
            end = int(np.searchsorted(offs, offs[end - 1], "right"))
        if end > stop:
            end, closes = stop, False
        a = i
        while a < end:
            b = min(a + _RUN, end)
            k = a
            while k < b:
                # positional: topic, value, key, partition, callback, on_delivery (an alias: None in the callback
                # slot would win over it, and no report would come), timestamp, headers
                try:
                    if each:
                        for k in range(k, b):
                            produce(topic, values[k], keys[k], partition, cb, None, stamps[k], headers[k])
                            txn.records += 1
                            emit("produced", {"producer": txn.producer, "offset": int(offs[k]),
                                              "in_txn": txn.records, "partition": partition})
                    else:
                        for k in range(k, b):
                            produce(topic, values[k], keys[k], partition, cb, None, stamps[k], headers[k])
                    k = b
                except BufferError:  # the local queue is full: let deliveries drain it
                    txn.producer.poll(0.1)
                except KafkaException as e:
                    txn.abort()
                    raise _fail(e, f"produce of {obj.topic}-{obj.kafka_partition}@{int(offs[k])}", dest,
                                txn) from None
            txn.producer.poll(0)  # serve (failed) delivery reports
            if not each:
                txn.records += b - a
            got = int(sizes[b] - sizes[a])
            txn.bytes += got
            result.produced += b - a
            result.bytes += got
            if events and coarse:
                emit("produced", {"producer": txn.producer, "offset": int(offs[b - 1]), "n": b - a,
                                  "partition": partition})
            if txn.errors:
                txn.abort()
                raise _delivery_failure(txn.errors, dest)
            a = b
        if closes:
            commit(int(offs[end - 1]))
        i = end
    if stop < n:
        txn.abort()
        t = stamps[stop]
        when = dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc).isoformat()
        raise RestoreTimestampError(
            f"{dest}: record {obj.topic}-{obj.kafka_partition}@{int(offs[stop])} has timestamp {t} ({when}), more "
            f"than {max_future_ms} ms in the future: the broker refuses it (log.message.timestamp.after.max.ms); "
            f"nothing after the last committed progress was produced")


def produced_key_bytes(key: Any) -> bytes | None:
    """The bytes a key is produced as (librdkafka encodes a str key as UTF-8): what the Java producer hashes."""
    return key.encode("utf-8") if isinstance(key, str) else key


def _held(mine, obj: ArchivedObject, cut: Cut) -> bool:
    """Whether every record of ``obj`` inside ``cut`` is already in the destination (``mine``: a SourceCoverage)."""
    return cut.object_overlap(obj) is True and mine.holds(obj.first_offset, obj.last_offset, obj.min_timestamp_ms,
                                                          obj.max_timestamp_ms)


def _merge_positions(pos: list[tuple[list[int], list]]) -> tuple[list[int], list]:
    """Several objects' (offsets, keys) in one offset order, ties in object order (as ``heapq.merge`` of their
    records in the second pass)."""
    merged = list(heapq.merge(*(zip(o, k) for o, k in pos), key=lambda x: x[0]))
    return [m[0] for m in merged], [m[1] for m in merged]


def clusters(objs: list[ArchivedObject]) -> list[list[ArchivedObject]]:
    """Objects (sorted by first offset) in runs whose offset spans overlap: each run is read as one."""
    out: list[list[ArchivedObject]] = []
    reach = -1
    for o in objs:
        if out and o.first_offset <= reach:
            out[-1].append(o)
            reach = max(reach, o.last_offset)
        else:
            out.append([o])
            reach = o.last_offset
    return out


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
