"""The direct reader: a Spark task reads its planned Kafka range with librdkafka and archives it in place.

The driver plans Kafka partition ranges (``topic, partition, start, end``, end exclusive) and runs
``spark.range(n, numPartitions=n)``: one Spark partition holding one id per range; :func:`read_and_archive`
is the ``mapInArrow`` body over those ids. For each row it consumes ``[start, end)`` with a confluent-kafka
``Consumer`` (assigned at ``start``; no group membership, nothing ever committed) and feeds Arrow
batches with exactly the columns Spark's Kafka read gives (:func:`arrow_schema`: ``value, partition,
offset, ts`` and, when used, ``key``, ``topic``, ``headers``, ``ts_type``) to
:func:`~lakesink.executor.task.archive_partitions` in the same task: Kafka → Arrow → archiver, no JVM hop.

End of range: the reader stops once it holds the record at ``end - 1``, at the first record whose offset
is ``>= end`` (never archived), or at a partition-EOF event whose offset (the broker's high watermark, or
with ``read_committed`` the last stable offset) is ``>= end``: offsets the broker skips (transaction markers,
aborted records under ``read_committed``, compaction gaps) never make it wait. An EOF *below* ``end`` means
the broker no longer has the planned range (truncated, or the plan came from another log): the task fails.
So does an offset-out-of-range (records deleted past ``start`` after planning; ``auto.offset.reset=error``),
any other partition error, and a read that makes no progress for :data:`STALL_TIMEOUT_S` (broker
unreachable): each as one :class:`~lakesink.errors.KafkaReadError` line naming the topic-partition
and the cause, so the batch commits nothing.
"""
from __future__ import annotations

import bisect
import itertools
import operator
import time
from typing import Any, Callable, Iterable, Iterator, Mapping

from lakesink.errors import KafkaReadError
from lakesink.executor.kept_consumer import borrow

__all__ = ["STALL_TIMEOUT_S", "ROWS_PER_BATCH", "POLL_TIMEOUT_S", "FETCH_QUEUE_BACKOFF_MS", "arrow_schema",
           "headers_column", "consumer_config", "record_offsets", "read_range", "read_and_archive"]

#: a read that makes no progress (no record, no end of range) for this long fails the task; the sink passes
#: ``kafka.retry.deadline.ms`` (the same default)
STALL_TIMEOUT_S = 60.0
#: Arrow rows per batch handed to the archiver (Spark's ``spark.sql.execution.arrow.maxRecordsPerBatch``)
ROWS_PER_BATCH = 10_000
#: a batch is handed on after this long even with fewer rows: a slow (throttled) read's records reach the
#: archiver, and the progress display's live counts (lakesink.executor.progress.live_counts), as they come
FLUSH_EVERY_S = 0.5
#: the longest one ``consume`` call waits. librdkafka's batch consume returns early only when it has all the
#: messages asked for, not on a partition-EOF event, so a long wait here is paid in full at the end of a range
#: that ends on a transaction marker or a compaction gap (measured by hand: a fixed 1 s per range at timeout 1.0)
POLL_TIMEOUT_S = 0.05
#: librdkafka's ``fetch.queue.backoff.ms`` unless the config sets it: once its local queue holds
#: ``queued.min.messages`` the fetcher pauses this long, and librdkafka's 1000 ms default left the archiver
#: idle for most of that pause (measured by hand, 250,000 records of 200 B: 1.5-2.9 s with it, 1.5-1.6 s at 50 ms)
FETCH_QUEUE_BACKOFF_MS = 50


def arrow_schema(key: bool, topic: bool, headers: bool, ts_type: bool = False):
    """The Arrow schema of Spark's Kafka read as :meth:`SinkJob._read <lakesink.driver.sink.SinkJob>` selects it
    (``ts_type``: Kafka's timestamp type id, -1 none / 0 CreateTime / 1 LogAppendTime, as Spark's
    ``timestampType``)."""
    import pyarrow as pa

    fields = [("value", pa.binary()), ("partition", pa.int32()), ("offset", pa.int64()), ("ts", pa.int64())]
    if key:
        fields.append(("key", pa.binary()))
    if topic:
        fields.append(("topic", pa.string()))
    if headers:
        fields.append(("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))))
    if ts_type:
        fields.append(("ts_type", pa.int32()))
    return pa.schema(fields)


def headers_column(hdrs: list, type_: Any) -> Any:
    """The ``headers`` column (``type_``: list<struct<key, value>>) of librdkafka's ``Message.headers()`` per record
    (a list of (key, value) tuples, or None): null for a record without headers (as Spark's read). The tuples are
    converted as they are (a dict per header cost ~10x as much: 3.7-4.4 µs per record of two headers against
    0.3-0.4, measured by hand). lakesink-native builds the same column from the lists' buffers when it is installed
    (:func:`lakesink.objects.formats.native.header_column`)."""
    import pyarrow as pa

    from lakesink.objects.formats.native import header_column

    got = header_column(hdrs, type_)
    if got is not None:
        return got
    return pa.array([h if h else None for h in hdrs], type_)


def consumer_config(kafka_options: Mapping[str, str], group_id: str) -> dict[str, Any]:
    """librdkafka consumer settings: the config's ``kafka.*`` keys as librdkafka names them, then the
    reader's own (assign-only, no commits, EOF events, no silent offset reset)."""
    from lakesink.config.kafka import librdkafka_options

    conf: dict[str, Any] = dict(librdkafka_options(kafka_options)[0])
    conf.setdefault("group.id", group_id)  # required by librdkafka; never joined, never committed to
    conf.setdefault("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS)
    conf.update({"enable.auto.commit": False, "enable.auto.offset.store": False, "enable.partition.eof": True,
                 "auto.offset.reset": "error"})
    return conf


_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)  # a (type, timestamp) pair's parts


def record_offsets(msgs: list, position: int, partition: int | None = None) -> list[int] | None:
    """The offsets of ``msgs`` when every one is a record (of ``partition``, when given) and they ascend from
    ``position`` on, else None (an event, a message of another partition, or an order :func:`read_range` must
    reject: its per-message loop sorts them out)."""
    if not msgs:
        return None
    cls = type(msgs[0])  # a batch's messages share their class: its methods mapped, no Python loop per message
    # identity, not list.count(None): KafkaError's == raises on None
    if not all(map(operator.is_, map(cls.error, msgs), itertools.repeat(None))):
        return None
    if partition is not None and not all(map(operator.eq, map(cls.partition, msgs), itertools.repeat(partition))):
        return None
    offs = list(map(cls.offset, msgs))
    if offs[0] < position or not all(map(operator.lt, offs, offs[1:])):
        return None
    return offs


def read_range(conf: Mapping[str, Any], topic: str, partition: int, start: int, end: int, *, key: bool = False,
               with_topic: bool = False, headers: bool = False, rows_per_batch: int = ROWS_PER_BATCH,
               stall_timeout_s: float = STALL_TIMEOUT_S, ts_type: bool = False,
               consumer_factory: Callable[[dict], Any] | None = None,
               clock: Callable[[], float] = time.monotonic) -> Iterator[Any]:
    """Arrow record batches of the records of ``topic``-``partition`` in ``[start, end)``, in offset order.
    ``consumer_factory`` builds the consumer from its settings (confluent-kafka's ``Consumer`` by default);
    ``clock`` is what the stall bound is measured on (a test scripts it)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    tp = f"{topic}-{partition}"
    if start >= end:
        return
    schema = arrow_schema(key, with_topic, headers, ts_type)
    causes: list[Any] = []

    from lakesink.config.kafka_errors import ErrorWatch

    watch = ErrorWatch(conf)  # the classification every client shares: auth/TLS failures end the read at once

    def on_error(err) -> None:  # client-level errors (broker down, auth): librdkafka retries; we remember
        causes.append(err)
        watch(err)

    try:  # a worker's kept consumer, reassigned (lakesink.executor.kept_consumer), or a new one
        loan = borrow(conf, topic, consumer_factory or Consumer, on_error, clock)
    except KafkaException as e:
        raise KafkaReadError(f"{tp}: cannot create a Kafka consumer: {e.args[0].str() if e.args else e}") from None
    consumer, clean = loan.consumer, False
    EOF = KafkaError._PARTITION_EOF
    values: list = []
    offsets: list = []
    tss: list = []
    keys: list = []
    hdrs: list = []
    ttypes: list = []
    position = start

    def flush():
        n = len(offsets)
        cols = [pa.array(values, pa.binary()), pa.repeat(pa.scalar(partition, pa.int32()), n),
                pa.array(offsets, pa.int64()), pa.array(tss, pa.int64())]
        if key:
            cols.append(pa.array(keys, pa.binary()))
        if with_topic:
            cols.append(pa.repeat(pa.scalar(topic, pa.string()), n))
        if headers:
            cols.append(headers_column(hdrs, schema.field("headers").type))
        if ts_type:  # librdkafka: 0 none, 1 CreateTime, 2 LogAppendTime; Kafka's ids are one less
            cols.append(pc.subtract(pa.array(ttypes, pa.int32()), pa.scalar(1, pa.int32())))
        batch = pa.RecordBatch.from_arrays(cols, schema=schema)
        values.clear(), offsets.clear(), tss.clear(), keys.clear(), hdrs.clear(), ttypes.clear()
        return batch

    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        last_progress = last_flush = clock()
        done = False
        while not done:
            # never more than rows_per_batch rows in a batch: Arrow batches of Spark's size
            msgs = consumer.consume(num_messages=rows_per_batch - len(offsets), timeout=POLL_TIMEOUT_S)
            fatal = [c for c in causes if c.fatal()]
            failure = watch.failure(connecting=False)
            if fatal or failure is not None:
                why = failure.message if failure is not None else fatal[0].str()
                raise KafkaReadError(f"{tp}: reading [{start}, {end}) failed at offset {position}: {why}")
            read_before = position
            offs = record_offsets(msgs, position, partition)
            if offs is not None:  # records only, in order: taken a column at a time
                cut = bisect.bisect_left(offs, end)
                if cut < len(offs):
                    done = True
                    msgs, offs = msgs[:cut], offs[:cut]
                if offs:
                    position = offs[-1] + 1
                    offsets += offs
                    cls = type(msgs[0])
                    values += map(cls.value, msgs)
                    stamps = list(map(cls.timestamp, msgs))
                    tss += map(_SECOND, stamps)
                    if ts_type:  # librdkafka's type ids, Kafka's once the batch is built (flush)
                        ttypes += map(_FIRST, stamps)
                    if key:
                        keys += map(cls.key, msgs)
                    if headers:
                        hdrs += map(cls.headers, msgs)
                msgs = ()
            for m in msgs:  # events among the records, offsets out of order, another partition: one at a time
                if m.partition() not in (partition, None):  # fetched for a kept consumer's previous assignment
                    continue
                err = m.error()
                if err is not None:
                    if err.code() == EOF:
                        if m.offset() >= end:
                            done = True
                            break
                        if m.offset() >= position:
                            raise KafkaReadError(
                                f"{tp}: the broker's log ends at offset {m.offset()}, before the planned end {end} "
                                f"of [{start}, {end}) (partition truncated since the batch was planned?)")
                        continue
                    raise KafkaReadError(f"{tp}: reading [{start}, {end}) failed at offset {position}: {err.str()}")
                off = m.offset()
                if off >= end:
                    done = True
                    break
                if off < position:  # never expected: a record already read (or before start)
                    raise KafkaReadError(f"{tp}: the broker returned offset {off} after {position - 1}")
                position = off + 1
                values.append(m.value())
                offsets.append(off)
                tst = m.timestamp()
                tss.append(tst[1])
                if ts_type:
                    ttypes.append(tst[0])
                if key:
                    keys.append(m.key())
                if headers:
                    hdrs.append(m.headers())
            if position >= end:  # the record at end - 1 is in hand: nothing of the range is left to wait for
                done = True
            # only a record or the end of the range is progress: error events (broker down, EOF events below
            # the position) must not keep a stalled read alive
            if position > read_before:
                last_progress = clock()
            elif not done and clock() - last_progress > stall_timeout_s:
                why = watch.seen[-1].message if watch.seen else "no record and no end-of-partition from the broker"
                raise KafkaReadError(f"{tp}: reading [{start}, {end}) made no progress for {stall_timeout_s:g}s "
                                     f"at offset {position} (kafka.retry.deadline.ms): {why}")
            if len(offsets) >= rows_per_batch or (done and offsets) or \
                    (offsets and clock() - last_flush >= FLUSH_EVERY_S):  # a slow read still moves (progress)
                yield flush()
                last_progress = last_flush = clock()  # the archiver's time is not the broker's
        if offsets:
            yield flush()
        clean = True
    finally:
        loan.give_back(clean, clock)


def read_and_archive(ids: Iterable[int], ranges: list[tuple[str, int, int, int]], parts, ctx, plans: dict,
                     columnar, kafka_options: Mapping[str, str], group_id: str, key: bool, with_topic: bool,
                     headers: bool, ts_type: bool = False, stall_timeout_s: float = STALL_TIMEOUT_S) -> Iterator[Any]:
    """A task's body: for each of its ``ids`` (a Python RDD's elements, or
    :func:`lakesink.runners.first_column` of a ``spark.range`` task's batches), read ``ranges[id]`` (topic,
    partition, start, end exclusive) and archive it with the run's ``parts`` (:class:`lakesink.wiring.TaskParts`);
    a read stalled for ``stall_timeout_s`` fails it. Yields Arrow batches of result rows
    (:func:`lakesink.runners.first_column` gives them one by one)."""
    from lakesink.executor.task import archive_partitions

    conf = consumer_config(kafka_options, group_id)
    for i in ids:
        topic, part, start, end = ranges[i]
        yield from archive_partitions(
            read_range(conf, topic, part, start, end, key=key, with_topic=with_topic, headers=headers,
                       ts_type=ts_type, stall_timeout_s=stall_timeout_s),
            parts, ctx, plans, columnar)
