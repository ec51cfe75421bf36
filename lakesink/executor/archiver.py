"""One Kafka partition's records → closed objects in the store → manifest rows (runs on executors).

The counterpart of Confluent's TopicPartitionWriter: the rotation state machine decides which
file each record goes to and when all open files close together; this module opens the format
writers on object-store streams, closes and uploads them on every commit, and describes each
closed group as manifest rows. It holds no Spark and no driver state, so it runs the same in a
Python worker on any node.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from lakesink.hooks import NO_HOOKS, Hooks
from lakesink.manifest.rows import TOMBSTONES_NOTE, ManifestRow, SideFile, advance_row, filtered_row, object_row
from lakesink.objects.formats.base import RecordView
from lakesink.objects.records import SinkRecord
from lakesink.objects.rotation import Advance, Append, AppendMany, AppendSpan, Commit, Rotator
from lakesink.store import ObjectStore, PendingWrite, WrittenObject, upload_metadata
from lakesink.transforms import grouped
from lakesink.errors import ArchiveConsistencyError

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.wiring import TaskParts


@dataclass(frozen=True)
class ArchivedRow:
    """A manifest row built on an executor, with the uploads that met an existing object (``pending``):
    the driver resolves those against the manifest before the row can be committed."""

    row: ManifestRow
    pending: tuple[PendingWrite, ...] = ()


#: Records handed to the format writers at once (``write_many``): amortises per-call overhead.
WRITE_BATCH = 4096


@dataclass
class _OpenFile:
    key: str
    writers: dict[RecordView, tuple[Any, Any]]  # view -> (format writer, object writer)
    pending: list[SinkRecord] = field(default_factory=list)

    def flush(self) -> None:
        if self.pending:
            for fw, _ow in self.writers.values():
                fw.write_many(self.pending)
            self.pending.clear()

    def write_payloads(self, payloads: Any, schema: Any, offsets: list[int], timestamps: list[int],
                       timestamp_types: list[int] | None, sides: dict[RecordView, tuple[Any, Any]]) -> None:
        self.flush()  # records of earlier, per-record batches come first
        for view, (fw, _ow) in self.writers.items():
            if view is RecordView.METADATA:
                fw.write_columns(offsets, timestamps, timestamp_types)
            elif view is RecordView.VALUE:
                fw.write_payloads(payloads, schema)
            else:
                fw.write_payloads(*sides[view])


@dataclass
class BatchContext:
    """What every executor task of a batch needs (pickled into the Spark closure)."""

    job: str
    run_id: str
    batch_id: int
    cluster_id: str | None
    topic_ids: dict[str, str | None]
    flush_tail: bool = False
    hooks: Hooks = NO_HOOKS  # picklable: see lakesink.hooks
    progress_to: tuple[str, int, str] | None = None  # (host, port, token): live counts (lakesink.executor.progress)
    #: builds the dead-letter producer from its librdkafka settings (None: confluent-kafka's Producer; tests
    #: pass a recording one)
    dead_letter_producer: Any = None


class PartitionArchiver:
    """Archives one Kafka partition from ``start_offset`` (the manifest's next offset)."""

    def __init__(self, parts: "TaskParts", store: ObjectStore, topic: str, partition: int, start_offset: int,
                 ctx: BatchContext, clock: Callable[[], int] | None = None,
                 schedule_anchor_ms: int | None = None):
        from lakesink.objects import naming

        self.parts, self.store, self.ctx = parts, store, ctx
        self.topic, self.partition = topic, partition
        self.naming = parts.naming
        self._naming = naming
        self.formats = {RecordView.VALUE: parts.value_format.build()}
        if parts.store_keys:
            self.formats[RecordView.KEYS] = parts.keys_format.build()
        if parts.store_headers:
            self.formats[RecordView.HEADERS] = parts.headers_format.build()
        metadata = parts.metadata_format()
        if metadata is not None:  # <base>.metadata.avro: offset, timestamp, timestamp type of every record
            self.formats[RecordView.METADATA] = metadata
        kwargs: dict[str, Any] = {"schedule_anchor_ms": schedule_anchor_ms}
        if clock:
            kwargs["clock"] = clock
        self.partitioner = parts.partitioner()
        ps = parts.partitioner_settings
        #: the encoded partition of tombstones (behavior.on.null.values=write), whose files have no value object
        self._tombstones = ps.tombstone_encoded_partition if ps.behavior_on_null_values == "write" else None
        self.rotator = Rotator(parts.rotation, self.partitioner, start_offset, **kwargs)
        self.open: dict[str, _OpenFile] = {}
        # offsets read (in order) and those of them ignored; [*_pos:] not yet accounted by a commit
        self._read: list[int] = []
        self._read_pos = 0
        self._ignored: list[int] = []
        self._ignored_pos = 0
        self._ignore_nulls = parts.behavior_on_null_values == "ignore"
        self.rows: list[ArchivedRow] = []
        #: records archived by :meth:`process_run` (the columnar path), reported in the task's status row
        self.columnar_records = 0
        # lakesink.transforms: records may share an offset (one Kafka record made many); offsets read up to
        # here were dropped unless processed (told to the rotator before the next records)
        self._grouped = parts.transforms is not None
        self._read_through: int | None = None
        # offsets a transform dropped (ascending), [_dropped_pos:] not yet accounted by a commit: those inside a
        # commit group's object spans become its filtered row (the gaps view's holes cannot show them)
        self._dropped: list[int] = []
        self._dropped_pos = 0

    # -- input
    def process(self, record: SinkRecord) -> None:
        self.process_many((record,))

    def process_many(self, records) -> None:
        """:meth:`process` for each of ``records`` (in offset order), through ``Rotator.process_many``."""
        if records:
            self._apply_read_through(records[0].offset)
        self._read.extend([r.offset for r in records])
        if self._ignore_nulls:
            self._ignored.extend([r.offset for r in records if r.value is None])
        events: list = []
        try:
            if self._grouped and grouped(records):
                self.rotator.process_groups(records, events)
            else:
                self.rotator.process_many(records, events)
        except BaseException:
            for ev in events:  # what per-record processing applied before the failing record
                self._apply(ev)
            raise
        for ev in events:
            self._apply(ev)

    def process_run(self, offsets: list[int], timestamps: list[int], payloads: Any, schema: Any,
                    timestamp_types: list[int] | None = None,
                    sides: dict[str, tuple[Any, Any]] | None = None) -> bool:
        """Columnar :meth:`process_many` (:mod:`lakesink.executor.columnar`): records that are all written
        (no null value) with one ``schema``, under the Default partitioner and count-only rotation or a
        time-based partitioner on the records' own timestamps (the Record extractor: files cut from the
        timestamps, :meth:`Rotator.process_time_run <lakesink.objects.rotation.Rotator.process_time_run>`), given
        as their ascending offsets, timestamps and format payloads (one per record: a pyarrow array or a list,
        sliceable), and their Kafka timestamp type ids (None when the read did not carry them), and with stored
        keys/headers their side files' ``sides`` (``{"keys": (payloads, schema), "headers": ...}``:
        :meth:`ColumnarPlan.side_payloads
        <lakesink.executor.columnar.ColumnarPlan.side_payloads>`). Returns False, having done nothing, if the
        rotator cannot take the run in bulk; then feed the records to :meth:`process_many`."""
        if offsets:
            self._apply_read_through(offsets[0])
        side = {RecordView(v): p for v, p in (sides or {}).items()}
        missing = [v.value for v in self.formats if v in (RecordView.KEYS, RecordView.HEADERS) and v not in side]
        if missing:
            raise ArchiveConsistencyError(f"{self.topic}-{self.partition}: a columnar run without its "
                                          f"{' and '.join(missing)} column")
        if self.partitioner.time_based:  # the encoded partition of each record's own time, per distinct bucket
            bucketing = getattr(self.partitioner, "record_time_buckets", None)  # TimeBasedPartitioner's
            buckets = bucketing(timestamps) if bucketing is not None and self.rotator.time_runs else None
            events = None if buckets is None else self.rotator.process_time_run(offsets, timestamps, *buckets, schema)
        else:
            enc = self.partitioner.encode_partition(_PartitionOnly(self.topic, self.partition))
            events = self.rotator.process_run(offsets, timestamps, enc, schema)
        if events is None:
            return False
        self.columnar_records += len(offsets)
        self._read.extend(offsets)
        for ev in events:
            if isinstance(ev, AppendSpan):
                f = self.open.get(ev.encoded_partition) or self._open_file(ev.encoded_partition, ev.file_start_offset)
                a, b = ev.start, ev.stop
                f.write_payloads(payloads[a:b], schema, offsets[a:b], timestamps[a:b],
                                 None if timestamp_types is None else timestamp_types[a:b],
                                 {v: (p[a:b], s) for v, (p, s) in side.items()})
            else:
                self._apply(ev)
        return True

    def finish(self) -> list[ArchivedRow]:
        """End of the batch: close what rotation closes; abort (leave uncommitted) the rest."""
        self._apply_read_through()
        for ev in self.rotator.finish(flush_tail=self.ctx.flush_tail):
            self._apply(ev)
        self.abort()
        return self.rows

    def read_through(self, offset: int) -> None:
        """The Kafka records up to ``offset`` were read: those a transform dropped are never given to
        :meth:`process_many`/:meth:`process_run`, yet belong to the committed range (told to the rotator
        before a later record, or at :meth:`finish`)."""
        self._read_through = offset if self._read_through is None else max(offset, self._read_through)

    def note_dropped(self, offsets: list[int]) -> None:
        """Offsets (ascending) whose Kafka records a transform dropped (the SQL and then the Python transform of
        one batch each note theirs, so a call may go below an earlier one's)."""
        if offsets and len(self._dropped) > self._dropped_pos and offsets[0] < self._dropped[-1]:
            self._dropped[self._dropped_pos:] = sorted(self._dropped[self._dropped_pos:] + list(offsets))
        else:
            self._dropped.extend(offsets)

    def _apply_read_through(self, before: int | None = None) -> None:
        if self._read_through is not None and (before is None or self._read_through < before):
            self.rotator.skip_through(self._read_through)
            self._read_through = None

    def abort(self) -> None:
        """Drop open files: their records are re-read by the next batch."""
        for f in self.open.values():
            for _fw, ow in f.writers.values():
                ow.abort()
        self.open.clear()

    # -- events
    def _apply(self, ev) -> None:
        if isinstance(ev, AppendMany):
            f = self.open.get(ev.encoded_partition) or self._open_file(ev.encoded_partition, ev.file_start_offset)
            pending, recs = f.pending, ev.records
            i, n = 0, len(recs)
            while i < n:  # the same write_many runs as one Append at a time would give
                take = WRITE_BATCH - len(pending)
                pending.extend(recs[i:i + take] if i or take < n else recs)
                i += take
                if len(pending) >= WRITE_BATCH:
                    f.flush()
        elif isinstance(ev, Append):
            f = self.open.get(ev.encoded_partition) or self._open_file(ev.encoded_partition, ev.file_start_offset)
            f.pending.append(ev.record)
            if len(f.pending) >= WRITE_BATCH:
                f.flush()
        elif isinstance(ev, Commit):
            self._check_accounting(ev.range_start, ev.range_end, sum(fs.record_count for fs in ev.files))
            self._commit(ev)
            self._note_filtered(ev.range_end, [(fs.start_offset, fs.last_offset) for fs in ev.files])
        elif isinstance(ev, Advance):
            self._check_accounting(ev.range_start, ev.range_end, 0)
            self.rows.append(self._advance_row(ev.range_start, ev.range_end))
            self._note_filtered(ev.range_end, [])

    def _open_file(self, encoded: str, start_offset: int) -> _OpenFile:
        vfmt = self.formats[RecordView.VALUE]
        key = self._naming.value_key(self.naming, self.topic, self.partition, encoded, start_offset, vfmt.extension)
        meta = upload_metadata(self.ctx.job, self.ctx.run_id, self.ctx.batch_id)
        writers: dict[RecordView, tuple[Any, Any]] = {}
        for view, fmt in self.formats.items():
            if view is RecordView.VALUE and encoded == self._tombstones:
                continue  # Confluent writes a tombstone file's keys (and headers), never its null values
            k = key if view is RecordView.VALUE else \
                self._naming.side_key(key, vfmt.extension, view.value, fmt.extension)
            ow = self.store.open_writer(k, meta)
            writers[view] = (fmt.open_object_writer(ow, view, k), ow)
        f = self.open[encoded] = _OpenFile(key, writers)
        return f

    def _commit(self, ev: Commit) -> None:
        vext = self.formats[RecordView.VALUE].extension
        # values, then keys, then headers (Confluent's order); a crash in between leaves orphans only
        for fs in sorted(ev.files, key=lambda fs: fs.start_offset):
            f = self.open.pop(fs.encoded_partition)
            f.flush()
            results = {}
            index: list[tuple[str, WrittenObject | PendingWrite]] = []
            for view, (fw, ow) in f.writers.items():
                fw.close()
                if fw.record_count != fs.record_count:
                    raise ArchiveConsistencyError(
                        f"{f.key}: {view.value} writer holds {fw.record_count} records, rotation says "
                        f"{fs.record_count}")
                results[view] = ow.commit()
                for suffix, data in fw.side_files().items():
                    skey = self._naming.index_key(f.key, vext) if suffix == ".index.json" else f.key + suffix
                    meta = upload_metadata(self.ctx.job, self.ctx.run_id, self.ctx.batch_id)
                    index.append(("index", self.store.put_bytes(skey, data, meta)))
            value = results.pop(RecordView.VALUE, None)
            sides = [(view.value, res) for view, res in results.items()] + index
            self.rows.append(self._object_row(fs, ev.range_start, ev.range_end, value, sides, f.key))
            self.ctx.hooks.executor("after_upload")
        if self.open:
            raise ArchiveConsistencyError(f"{self.topic}-{self.partition}: files left open after a commit: "
                                          f"{sorted(self.open)}")

    def _check_accounting(self, range_start: int, range_end: int, archived: int) -> None:
        """Records read in [range_start, range_end] = records in the group's files + ignored ones."""
        pos = bisect_right(self._read, range_end, self._read_pos)
        read = pos - self._read_pos
        self._read_pos = pos
        ipos = bisect_right(self._ignored, range_end, self._ignored_pos)
        ignored = ipos - self._ignored_pos
        self._ignored_pos = ipos
        if pos > 65536 and pos * 2 > len(self._read):  # drop accounted offsets now and then
            del self._read[:pos]
            self._read_pos = 0
        if ipos > 65536 and ipos * 2 > len(self._ignored):
            del self._ignored[:ipos]
            self._ignored_pos = 0
        if read - ignored != archived:
            raise ArchiveConsistencyError(
                f"{self.topic}-{self.partition} [{range_start}, {range_end}]: read {read} records "
                f"({ignored} ignored) but the commit group holds {archived}")

    def _note_filtered(self, range_end: int, spans: list[tuple[int, int]]) -> None:
        """The filtered row of a commit group ending at ``range_end``: its dropped offsets inside ``spans``
        (the group's files' ``[first, last]``; dropped offsets outside them are holes of the gaps view)."""
        pos = bisect_right(self._dropped, range_end, self._dropped_pos)
        inside: list[int] = []
        if spans and pos > self._dropped_pos:
            merged: list[list[int]] = []
            for a, b in sorted(spans):  # files of several encoded partitions interleave: their union
                if merged and a <= merged[-1][1] + 1:
                    merged[-1][1] = max(merged[-1][1], b)
                else:
                    merged.append([a, b])
            starts = [m[0] for m in merged]
            for o in self._dropped[self._dropped_pos:pos]:
                i = bisect_right(starts, o) - 1
                if i >= 0 and o <= merged[i][1]:
                    inside.append(o)
        self._dropped_pos = pos
        if pos > 65536 and pos * 2 > len(self._dropped):
            del self._dropped[:pos]
            self._dropped_pos = 0
        if inside:
            self.rows.append(ArchivedRow(filtered_row(self.topic, self.partition, inside,
                                                      kafka_cluster_id=self.ctx.cluster_id,
                                                      topic_id=self.ctx.topic_ids.get(self.topic))))

    # -- rows
    def _advance_row(self, range_start: int, range_end: int) -> ArchivedRow:
        return ArchivedRow(advance_row(self.topic, self.partition, range_start, range_end,
                                       kafka_cluster_id=self.ctx.cluster_id,
                                       topic_id=self.ctx.topic_ids.get(self.topic)))

    def _object_row(self, fs, range_start: int, range_end: int, value: WrittenObject | PendingWrite | None,
                    sides: list[tuple[str, WrittenObject | PendingWrite]], key: str) -> ArchivedRow:
        """The object row of file ``fs`` (value object ``key``; ``value`` None: tombstones only, no value object)."""
        written = ([value] if value is not None else []) + [res for _view, res in sides]
        row = object_row(
            self.topic, self.partition, range_start, range_end, first_offset=fs.start_offset,
            last_offset=fs.last_offset, record_count=fs.record_count, encoded_partition=fs.encoded_partition,
            object_key=key, object_uri=self.store.uri(key),
            side_files=tuple(SideFile(view, res.key, _etag(res), getattr(res, "version_id", None), res.size)
                             for view, res in sides),
            format=self.formats[RecordView.VALUE].name, compression=self.parts.value_compression,
            size_bytes=value.size if value is not None else 0,
            etag=_etag(value) if value is not None else None, version_id=getattr(value, "version_id", None),
            min_timestamp_ms=fs.min_timestamp, max_timestamp_ms=fs.max_timestamp, schema=fs.schema,
            kafka_cluster_id=self.ctx.cluster_id, topic_id=self.ctx.topic_ids.get(self.topic),
            note=TOMBSTONES_NOTE if value is None else None)
        return ArchivedRow(row, tuple(w for w in written if isinstance(w, PendingWrite)))


@dataclass(frozen=True)
class _PartitionOnly:
    """What the Default partitioner reads of a record (topic and Kafka partition)."""

    topic: str
    partition: int


def _etag(res: WrittenObject | PendingWrite) -> str | None:
    """A written object's ETag; None while pending (the driver records it once resolved)."""
    return res.etag if isinstance(res, WrittenObject) else None
