"""The task bodies of ``read_archive`` and ``restore`` (they run where the job's runner runs tasks).

The driver (:mod:`lakesink.driver.archive`, :mod:`lakesink.driver.restore`) picks the objects from the manifest
and closes over them; each task gets its ids (:mod:`lakesink.runners`: one id per task) and works on the
objects (or the destination partition) those ids name:

- :func:`read_archive_task`: the records of a group of objects, an Arrow batch of :data:`RECORD_COLUMNS` per object
  (:func:`lakesink.executor.readback.read_records`: ETag and record count verified);
- :func:`restore_task`: destination partitions restored by :func:`lakesink.executor.restore.restore_partition`
  (several per task when the driver groups them, :func:`lakesink.driver.restore.task_groups`); one row of JSON
  (:data:`RESTORE_RESULT_DDL`) per partition.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from lakesink.executor.readback import NO_CUT, ArchivedObject, Cut, RestoredRecord, read_record_batch, read_records

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from lakesink.wiring import TaskParts

__all__ = ["RECORD_COLUMNS", "RECORD_DDL", "RESTORE_RESULT_DDL", "arrow_record_schema", "ObjectReader",
           "records_batch", "read_archive_task", "PartitionJob", "restore_task"]

#: read_archive's columns, in order (Spark DDL); ``timestamp`` is the Kafka record timestamp (null when the
#: object has no record-metadata side file), ``timestamp_type`` CreateTime / LogAppendTime / NoTimestampType
RECORD_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers")
RECORD_DDL = ("topic string, partition int, offset bigint, timestamp timestamp, timestamp_type string, "
              "key binary, value binary, headers array<struct<key:string,value:binary>>")
RESTORE_RESULT_DDL = "result string"


def arrow_record_schema() -> "pa.Schema":
    """The Arrow form of :data:`RECORD_DDL` (Spark's TIMESTAMP is microseconds, UTC)."""
    import pyarrow as pa

    return pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                      ("timestamp", pa.timestamp("us", tz="UTC")), ("timestamp_type", pa.string()),
                      ("key", pa.binary()), ("value", pa.binary()),
                      ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))])


def records_batch(records: list[RestoredRecord], schema: "pa.Schema | None" = None) -> "pa.RecordBatch":
    """One Arrow batch of ``records`` in :data:`RECORD_COLUMNS` order."""
    import pyarrow as pa

    schema = schema or arrow_record_schema()
    cols = [
        pa.array([r.topic for r in records], pa.string()),
        pa.array([r.partition for r in records], pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([None if r.timestamp is None else r.timestamp * 1000 for r in records], pa.int64())
        .cast(pa.timestamp("us", tz="UTC")),
        pa.array([r.timestamp_type for r in records], pa.string()),
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], schema.field("headers").type),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


class ObjectReader:
    """Reads one job's objects (its :class:`~lakesink.wiring.TaskParts`): one store client and one format per
    (format, compression) per task."""

    def __init__(self, parts: "TaskParts"):
        from lakesink.store import open_store

        self.parts = parts
        self.store = open_store(parts.store)
        self.keys_format = parts.keys_format.build()
        self.headers_format = parts.headers_format.build()
        self._formats: dict[tuple[str, str | None], Any] = {}

    def value_format(self, obj: ArchivedObject) -> Any:
        """The format ``obj`` was written with: its row's format and compression, the config's other options
        (a job may have changed ``format.class`` or the compression between runs)."""
        name = obj.format or self.parts.value_format.name
        key = (name, obj.compression)
        fmt = self._formats.get(key)
        if fmt is None:
            fmt = self._formats[key] = self.parts.format_spec(name).build(obj.compression)
        return fmt

    def records(self, obj: ArchivedObject, cut: Cut = NO_CUT) -> list[RestoredRecord]:
        return read_records(self.store, self.value_format(obj), obj, keys_format=self.keys_format,
                            headers_format=self.headers_format, cut=cut, key_decoder=self.parts.key_decoder.name,
                            value_decoder=self.parts.value_decoder.name)

    def batch(self, obj: ArchivedObject, schema: "pa.Schema", cut: Cut = NO_CUT) -> "pa.RecordBatch | None":
        """:meth:`records` as one Arrow batch of ``schema`` (:func:`arrow_record_schema`), or None."""
        return read_record_batch(self.store, self.value_format(obj), obj, schema, keys_format=self.keys_format,
                                 headers_format=self.headers_format, cut=cut, key_decoder=self.parts.key_decoder.name,
                                 value_decoder=self.parts.value_decoder.name)


def read_archive_task(ids: Iterable[int], groups: list[list[ArchivedObject]], parts: "TaskParts",
                      cut: Cut = NO_CUT) -> Iterator["pa.RecordBatch"]:
    """For each id, the records of each object of ``groups[id]``, one batch per object, in order (one group
    per Spark task when the ids are spread so)."""
    reader = ObjectReader(parts)
    schema = arrow_record_schema()
    for i in ids:
        for obj in groups[i]:
            batch = reader.batch(obj, schema, cut)
            if batch is not None and batch.num_rows:
                yield batch


@dataclass(frozen=True)
class PartitionJob:
    """One destination partition of a restore: its source partition and that partition's objects."""

    source_topic: str
    source_partition: int
    topic: str
    partition: int
    objects: tuple[ArchivedObject, ...]
    #: offset spans of the source partition's objects the restore's --where left out (its progress must not claim them)
    holes: tuple[tuple[int, int], ...] = ()


def restore_task(ids: Iterable[int], jobs: list[PartitionJob], parts: "TaskParts", name: str | None,
                 producer_config: dict, cut: Cut, options: dict) -> Iterator["pa.RecordBatch"]:
    """For each id, restore ``jobs[id]`` (:func:`~lakesink.executor.restore.restore_partition`); one JSON row
    per destination partition: the job's identity and the worker's :class:`RestoreResult` fields. The task's
    partitions share one admin client and one progress consumer (:class:`~lakesink.executor.committed.KafkaClients`);
    each has its own transactional producer, started while the partition before it is restored
    (:class:`~lakesink.executor.restore.ProducerStarts`; a plain restore)."""
    import pyarrow as pa

    from lakesink.executor.committed import KafkaClients
    from lakesink.executor.progress import produced_counts
    from lakesink.executor.restore import (DEFAULT_TIMEOUT_S, ProducerStarts, progress_group, restore_partition,
                                           transactional_id)

    reader = ObjectReader(parts)
    options = dict(options)
    progress_to = options.pop("progress_to", None)  # where the driver's display takes live counts (or None)
    clients = KafkaClients(producer_config)
    # the next partition's producer starts while this one is restored (a plain restore: one producer per destination
    # partition, the config as given)
    starts = ProducerStarts(float(options.get("timeout_s", DEFAULT_TIMEOUT_S)))
    ahead = not any(options.get(k) for k in ("routers", "groups"))
    ids = list(ids)
    try:
        for n, i in enumerate(ids):
            job = jobs[i]
            if ahead and n + 1 < len(ids):
                nxt = jobs[ids[n + 1]]
                starts.start(dict(producer_config), transactional_id(name, nxt.topic, nxt.partition),
                             clients.consumer(progress_group(name)))
            fmt = reader.value_format  # each object's own format and codec (the row says which)
            on_event, live = produced_counts(progress_to, f"{job.topic}-{job.partition}")
            try:
                res = restore_partition(name, job.topic, job.partition, job.objects, reader.store, fmt,
                                        producer_config, keys_format=reader.keys_format,
                                        headers_format=reader.headers_format, cut=cut,
                                        key_decoder=parts.key_decoder.name, value_decoder=parts.value_decoder.name,
                                        holes=job.holes, on_event=on_event if progress_to is not None else None,
                                        coarse_events=True, clients=clients, starts=starts, **options)
            finally:
                live.close()
            out = {"id": i, **asdict(res)}
            out.pop("events", None)
            yield pa.RecordBatch.from_pydict({"result": [json.dumps(out)]})
    finally:
        starts.close()
        clients.close()
