"""The per-Kafka-partition rotation state machine (spec §3), pure and event based.

Feed records of ONE Kafka partition in offset order to :meth:`Rotator.process`; it returns events:

* :class:`Append` — write this (possibly projected) record to the open file of ``encoded_partition``;
* :class:`Commit` — close ALL open files of the partition; they cover Kafka offsets
  ``[range_start, range_end]`` and the next committed offset is ``range_end + 1``;
* :class:`Advance` — offsets that produced no file while nothing is open (all tombstones ignored…):
  safe to record as progress.

Ranges chain with no gap: the first ``range_start`` is the ``start_offset`` given to the rotator and
each next one is the previous ``range_end + 1`` (offsets may jump; contiguity is never assumed).
As in Confluent, ``range_end`` of a Commit is the last *written* offset; ignored records after it
belong to the next range.

Per record (Confluent ``TopicPartitionWriter``): extract the timestamp (time-based only; the first
one since the last commit is the base) → encode the partition → rotate if the value switches
between schema-less and schema'd within an encoded partition that has a current schema → rotate
on time (``rotate.interval.ms``, time-based partitioners only: ``ts - base >= interval`` or, with
``rotate.file.on.partition.change``, a different encoded partition than the last written record)
→ rotate on an incompatible schema (:mod:`lakesink.schemas.compatibility`) → project, append → rotate when
the records of all open files reach ``flush.size``. A rotation triggered before a write commits and
then re-evaluates the same record against the fresh state.

:meth:`Rotator.finish` ends a batch: Confluent's after-batch ``rotateOnTime`` check, the scheduled
rotation, and, with ``flush_tail=True``, a commit of whatever is open. Otherwise open files stay
open and uncommitted. Two ways to continue: keep feeding new records to the same rotator (a
long-lived writer, like Connect's put() loop), or start a new :class:`Rotator` at the last committed
offset + 1 and re-feed the uncommitted records (lakesink's manifest-driven batches); with a
deterministic configuration both produce the same events.

``rotate.schedule.interval.ms`` (non-deterministic, like Wallclock): the deadline is
``start of local day + k·interval`` after ``schedule_anchor_ms`` (pass the partition's last commit
time; default: construction time). It is checked at :meth:`finish` (all open files are committed
once it has passed) and, per record, only for files carried over from an earlier batch of the same
rotator — checking it per record for files opened in the current batch would only ever cut a
one-record file, since ``now`` is fixed per batch.

``now`` (the Wallclock timestamp and the scheduled-rotation clock) is read once per batch, at the
first :meth:`process` after construction or :meth:`finish`, as Connect captures it once per put().
Size: over the ~500-line guide on purpose: one state machine (spec §3) and its events, read top to bottom
against the spec; its transitions reference each other and are kept together.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from lakesink.schemas.compatibility import Decision, SchemaCompatibility
from lakesink.errors import InvalidArgumentError, PartitionError
from lakesink.objects.partitioners import Partitioner
from lakesink.objects.records import SinkRecord, ValueSchema
from lakesink.objects.timeformat import next_time_adjusted_by_day, zone

__all__ = [
    "RotationPolicy",
    "FileSummary",
    "Append",
    "AppendMany",
    "AppendSpan",
    "Commit",
    "Advance",
    "Event",
    "Rotator",
    "wallclock_ms",
]


def wallclock_ms() -> int:
    """Current time in epoch ms."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class RotationPolicy:
    """The rotation knobs (built by :func:`lakesink.wiring.rotation_policy`)."""

    flush_size: int
    rotate_interval_ms: int = -1
    rotate_schedule_interval_ms: int = -1
    timezone: str | None = None
    rotate_on_partition_change: bool = True
    behavior_on_null_values: str = "fail"
    schema_compatibility: str = "NONE"
    #: keys carry schemas (``record.extra["key_schema"]``: keys decoded from Confluent wire format and stored in a
    #: side file with one writer schema): a key whose schema differs from its file's first key's starts new files
    rotate_on_key_schema: bool = False

    def __post_init__(self) -> None:
        if self.flush_size < 1:
            raise InvalidArgumentError("flush.size must be >= 1")
        if self.rotate_schedule_interval_ms > 0 and not self.timezone:
            raise InvalidArgumentError("rotate.schedule.interval.ms needs a timezone")
        if self.behavior_on_null_values not in ("fail", "ignore", "write"):
            raise InvalidArgumentError(f"bad behavior.on.null.values {self.behavior_on_null_values!r}")


@dataclass(frozen=True)
class FileSummary:
    """One closed file of a commit group."""

    encoded_partition: str
    start_offset: int
    last_offset: int
    record_count: int
    schema: ValueSchema | None
    min_timestamp: int | None = None
    max_timestamp: int | None = None


@dataclass(frozen=True)
class Append:
    encoded_partition: str
    record: SinkRecord
    file_start_offset: int  # start offset of the file this record goes to (names the object)


@dataclass(frozen=True)
class AppendMany:
    """Consecutive :class:`Append` events to the same file, coalesced by :meth:`Rotator.process_many`."""

    encoded_partition: str
    records: list  # list[SinkRecord]
    file_start_offset: int

    def expand(self) -> list[Append]:
        return [Append(self.encoded_partition, r, self.file_start_offset) for r in self.records]


@dataclass(frozen=True)
class AppendSpan:
    """Records ``[start, stop)`` of the run given to :meth:`Rotator.process_run` go to this file."""

    encoded_partition: str
    start: int
    stop: int
    file_start_offset: int


@dataclass(frozen=True)
class Commit:
    range_start: int
    range_end: int
    files: tuple[FileSummary, ...]


@dataclass(frozen=True)
class Advance:
    range_start: int
    range_end: int


Event = Union[Append, AppendMany, AppendSpan, Commit, Advance]
_MISSING = object()


def _coalesce(out: list, ev) -> None:
    """Append ``ev`` to ``out``, merging an Append into a trailing AppendMany of the same file."""
    if isinstance(ev, Append):
        last = out[-1] if out else None
        if (isinstance(last, AppendMany) and last.encoded_partition == ev.encoded_partition
                and last.file_start_offset == ev.file_start_offset):
            last.records.append(ev.record)
        else:
            out.append(AppendMany(ev.encoded_partition, [ev.record], ev.file_start_offset))
    else:
        out.append(ev)


@dataclass
class _OpenFile:
    encoded_partition: str
    start_offset: int
    schema: ValueSchema | None
    last_offset: int = -1
    count: int = 0
    min_ts: int | None = None
    max_ts: int | None = None
    key_schema: Any = None  # the first key's schema (RotationPolicy.rotate_on_key_schema)

    def add(self, offset: int, ts: int | None) -> None:
        self.last_offset = offset
        self.count += 1
        if ts is not None:
            self.min_ts = ts if self.min_ts is None else min(self.min_ts, ts)
            self.max_ts = ts if self.max_ts is None else max(self.max_ts, ts)

    def summary(self) -> FileSummary:
        return FileSummary(self.encoded_partition, self.start_offset, self.last_offset, self.count,
                           self.schema, self.min_ts, self.max_ts)


@dataclass
class _State:
    files: dict[str, _OpenFile] = field(default_factory=dict)
    schemas: dict[str, ValueSchema | None] = field(default_factory=dict)
    count: int = 0
    base_ts: int | None = None
    cur_ts: int | None = None
    cur_enc: str | None = None


class Rotator:
    """Rotation for one Kafka partition, from ``start_offset`` (the next uncommitted offset)."""

    def __init__(
        self,
        policy: RotationPolicy,
        partitioner: Partitioner,
        start_offset: int,
        clock: Callable[[], int] = wallclock_ms,
        schedule_anchor_ms: int | None = None,
    ):
        if start_offset < 0:
            raise InvalidArgumentError("start_offset must be >= 0")
        self.policy = policy
        self.partitioner = partitioner
        self.clock = clock
        self._compat = SchemaCompatibility(policy.schema_compatibility)
        self._periodic = policy.rotate_interval_ms > 0 and partitioner.time_based
        self._scheduled = policy.rotate_schedule_interval_ms > 0
        self._zone = zone(policy.timezone) if self._scheduled else None
        self._range_start = start_offset
        self._last_seen = start_offset - 1
        self._last_written: int | None = None
        self._s = _State()
        self._now: int | None = None
        self._carried = False  # files were open when the current batch began
        self._deadline: int | None = None
        self._fast = (not self._periodic and not self._scheduled and not partitioner.time_based
                      and policy.behavior_on_null_values != "write" and not policy.rotate_on_key_schema)
        if self._scheduled:
            anchor = clock() if schedule_anchor_ms is None else schedule_anchor_ms
            self._deadline = self._next_deadline(anchor)

    # ----------------------------------------------------------------- public

    @property
    def next_offset(self) -> int:
        """First offset not covered by an emitted Commit/Advance."""
        return self._range_start

    @property
    def open_record_count(self) -> int:
        return self._s.count

    @property
    def due_ms(self) -> int | None:
        """When the open files become closable by ``rotate.interval.ms``: the base timestamp (the first record's
        since the last commit) + the interval, in the extractor's time; None when nothing is open or rotation is
        not periodic. A scheduling hint only (:mod:`lakesink.driver.poll_schedule`): a record at or after it
        closes them."""
        s = self._s
        if not self._periodic or s.count <= 0 or s.base_ts is None:
            return None
        return s.base_ts + self.policy.rotate_interval_ms

    def process(self, record: SinkRecord, *, continues: bool = False, more: bool = False) -> list[Event]:
        """Events caused by ``record`` (the next record of this partition), in order.

        ``continues``/``more``: ``record`` is not the first / not the last of several records a transform
        made of one Kafka record (they share its offset, :mod:`lakesink.transforms`). Such a group stays in
        one commit group: no commit falls between its records (flush.size is checked after the last one,
        so a file may exceed it by the group's size - 1; time rotation is not checked inside a group), and a
        rotation the group would need inside it (a schema change) fails the record."""
        if record.offset <= self._last_seen and not (continues and record.offset == self._last_seen):
            raise InvalidArgumentError(f"offset {record.offset} is not after {self._last_seen} (records must be in offset order)")
        now = self._batch_now()
        self._last_seen = record.offset
        if record.value is None:
            mode = self.policy.behavior_on_null_values
            if mode == "ignore":
                return []
            if mode == "fail":
                raise PartitionError(record.topic, record.partition, record.offset,
                                     "null value (tombstone) with behavior.on.null.values=fail "
                                     "(set it to 'ignore' or 'write')")
        return self._process_one(record, now, continues=continues, more=more)

    def process_groups(self, records, out: list | None = None) -> list:
        """:meth:`process_many` for records of which consecutive ones may share an offset (the outputs of a
        transform): each run of one offset is processed as a group (see :meth:`process`)."""
        if out is None:
            out = []
        n = len(records)
        for i, r in enumerate(records):
            continues = i > 0 and records[i - 1].offset == r.offset
            more = i + 1 < n and records[i + 1].offset == r.offset
            for ev in self.process(r, continues=continues, more=more):
                _coalesce(out, ev)
        return out

    def skip_through(self, offset: int) -> None:
        """Offsets up to ``offset`` were read; those not processed were dropped (by a transform). Like ignored
        records they belong to the open range, and :meth:`finish` advances over them when nothing is open."""
        if offset > self._last_seen:
            self._last_seen = offset

    def _process_one(self, record: SinkRecord, now: int, enc: str | None = None, *, continues: bool = False,
                     more: bool = False) -> list[Event]:
        """The rotation steps for a non-ignored record (``enc``: its encoded partition, if known
        already — only for a non-time-based partitioner)."""
        events: list[Event] = []
        s = self._s
        p = self.partitioner
        while True:
            ts = p.extract_timestamp(record, now) if p.time_based else None
            if p.time_based:
                s.cur_ts = ts
                if s.base_ts is None:
                    s.base_ts = ts
            if enc is None:
                enc = p.encode_partition(record, ts)
            incoming = record.value_schema
            if enc not in s.schemas:
                s.schemas[enc] = incoming
            current = s.schemas[enc]
            if s.count > 0 and (current is None) != (incoming is None):
                if continues:
                    raise self._split_group(record, "schema-less and schema'd values")
                events.append(self._commit())  # §3 step 2: schema-less <-> schema'd switch
                enc = None
                continue
            if not continues and self._rotate_on_time(enc, ts, now, per_record=True):
                self._after_time_rotation()
                events.append(self._commit())
                enc = None
                continue
            if self.policy.rotate_on_key_schema and s.count > 0:
                f = s.files.get(enc)
                if f is not None and not same_schema(f.key_schema, key_schema_of(record)):
                    if continues:
                        raise self._split_group(record, "key schemas that need a new file")
                    events.append(self._commit())  # the keys side file has one writer schema
                    enc = None
                    continue
            decision = self._compat.decide(record, current)
            if decision is Decision.ROTATE:
                s.schemas[enc] = incoming
                if s.count > 0:
                    if continues:
                        raise self._split_group(record, "value schemas that need a new file")
                    events.append(self._commit())
                    enc = None
                    continue
                current = incoming
            out = self._compat.project(record, current) if decision is Decision.PROJECT else record
            events.append(self._write(enc, out, record.timestamp))
            if s.count >= self.policy.flush_size and not more:
                events.append(self._commit())
            return events

    @staticmethod
    def _split_group(record: SinkRecord, why: str) -> PartitionError:
        return PartitionError(record.topic, record.partition, record.offset,
                              f"the records a transform made of this record have {why}: they would need a file "
                              f"rotation between them, which would split one Kafka record across commit groups")

    def process_many(self, records, out: list | None = None) -> list:
        """The events of :meth:`process` for each of ``records`` in turn, with consecutive Appends
        to the same file coalesced into :class:`AppendMany` (``AppendMany.expand`` gives them back).

        Events go to ``out`` (a new list by default) as they arise: when a record raises, ``out``
        holds the events of the records before it, exactly what per-record ``process`` calls would
        have returned, and the exception is the one ``process`` raises for that record.

        Fast path: when rotation is a pure function of counts (no rotate.interval.ms /
        rotate.schedule.interval.ms, a partitioner that is not time-based,
        behavior.on.null.values != write) a record whose value schema IS (identity) the current
        schema of its encoded partition is appended inline; any other record takes the
        per-record steps.
        """
        if out is None:
            out = []
        if not self._fast:
            process = self.process
            for r in records:
                for ev in process(r):
                    _coalesce(out, ev)
            return out
        if not records:
            return out
        s = self._s
        files, schemas = s.files, s.schemas
        flush = self.policy.flush_size
        ignore = self.policy.behavior_on_null_values == "ignore"
        encode = self.partitioner.encode_partition
        missing = _MISSING
        now = None
        cur = out[-1] if out and isinstance(out[-1], AppendMany) else None  # the AppendMany ending out
        cur_recs: list = cur.records if cur is not None else []
        for r in records:
            off = r.offset
            if off <= self._last_seen:
                raise InvalidArgumentError(f"offset {off} is not after {self._last_seen} (records must be in offset order)")
            if now is None:
                now = self._batch_now()
            self._last_seen = off
            if r.value is None:
                if ignore:
                    continue
                raise PartitionError(r.topic, r.partition, off,
                                     "null value (tombstone) with behavior.on.null.values=fail "
                                     "(set it to 'ignore' or 'write')")
            enc = encode(r, None)
            incoming = r.value_schema
            current = schemas.get(enc, missing)
            if current is missing:
                schemas[enc] = current = incoming
            if incoming is not current:
                for ev in self._process_one(r, now, enc):
                    _coalesce(out, ev)
                cur = out[-1] if out and isinstance(out[-1], AppendMany) else None
                if cur is not None:
                    cur_recs = cur.records
                continue
            # SAME schema, no time rotation: Rotator._write inlined
            f = files.get(enc)
            if f is None:
                f = files[enc] = _OpenFile(enc, off, incoming)
            f.last_offset = off
            f.count += 1
            ts = r.timestamp
            if ts is not None:
                if f.min_ts is None or ts < f.min_ts:
                    f.min_ts = ts
                if f.max_ts is None or ts > f.max_ts:
                    f.max_ts = ts
            s.count += 1
            s.cur_enc = enc
            self._last_written = off
            if cur is not None and cur.encoded_partition == enc and cur.file_start_offset == f.start_offset:
                cur_recs.append(r)
            else:
                cur_recs = [r]
                cur = AppendMany(enc, cur_recs, f.start_offset)
                out.append(cur)
            if s.count >= flush:
                out.append(self._commit())
                cur = None
        return out

    @property
    def count_only(self) -> bool:
        """Rotation is a pure function of record counts (what :meth:`process_run` needs)."""
        return self._fast

    def process_run(self, offsets, timestamps, enc: str, schema: ValueSchema | None,
                    out: list | None = None) -> list | None:
        """Bulk :meth:`process_many` for a run of records that are all written (no null value), all
        encode to ``enc`` and all carry ``schema`` (the same object), when :attr:`count_only`.

        ``offsets``/``timestamps`` are those records' (strictly ascending) offsets and (non-null)
        timestamps. Emits
        :class:`AppendSpan` (indexes into the run) and :class:`Commit` events, exactly the Appends
        and Commits of :meth:`process_many`. Returns None, changing nothing, when the run cannot
        be handled in bulk (not count-only, or ``enc`` holds another schema): process its
        records one by one then.
        """
        if not self._fast:
            return None
        s = self._s
        current = s.schemas.get(enc, _MISSING)
        if current is not _MISSING and current is not schema:
            return None
        n = len(offsets)
        out = self._start_run(offsets, out)
        if n:
            s.schemas[enc] = schema
        flush = self.policy.flush_size
        i = 0
        while i < n:
            f = s.files.get(enc)
            if f is None:
                f = s.files[enc] = _OpenFile(enc, offsets[i], schema)
            stop = min(n, i + flush - s.count)
            ts = timestamps[i:stop]
            lo, hi = min(ts), max(ts)
            f.min_ts = lo if f.min_ts is None or lo < f.min_ts else f.min_ts
            f.max_ts = hi if f.max_ts is None or hi > f.max_ts else f.max_ts
            f.last_offset = offsets[stop - 1]
            f.count += stop - i
            s.count += stop - i
            s.cur_enc = enc
            self._last_written = offsets[stop - 1]
            out.append(AppendSpan(enc, i, stop, f.start_offset))
            if s.count >= flush:
                out.append(self._commit())
            i = stop
        if n:
            self._last_seen = offsets[-1]
        return out

    def _start_run(self, offsets, out: list | None) -> list:
        """A bulk run's opening checks: its first offset after the last seen; the event list to append to."""
        if len(offsets) and offsets[0] <= self._last_seen:
            raise InvalidArgumentError(f"offset {offsets[0]} is not after {self._last_seen} "
                                       f"(records must be in offset order)")
        self._batch_now()
        return [] if out is None else out

    @property
    def time_runs(self) -> bool:
        """Rotation is a function of counts and the records' own timestamps (what :meth:`process_time_run`
        needs): a time-based partitioner whose encoded partitions :meth:`process_time_run` is given, no scheduled
        rotation, no tombstone files, no key schemas."""
        return (self.partitioner.time_based and not self._scheduled and not self.policy.rotate_on_key_schema
                and self.policy.behavior_on_null_values != "write")

    def process_time_run(self, offsets, timestamps, codes, paths: list[str], schema: ValueSchema | None,
                         out: list | None = None) -> list | None:
        """:meth:`process_run` under a time-based partitioner whose timestamp is the record's own (the Record
        extractor), when :attr:`time_runs`: records that are all written, all carry ``schema`` (the same
        object), given as their (strictly ascending) offsets, (non-null) timestamps and encoded partitions
        (``paths[codes[i]]``: :meth:`TimeBasedPartitioner.record_time_buckets
        <lakesink.objects.partitioners.TimeBasedPartitioner.record_time_buckets>`).

        The steps of :meth:`process`, on stretches of records of one encoded partition at a time: the first
        timestamp since the last commit is the base; before a record, ``ts - base >= rotate.interval.ms`` or
        (``rotate.file.on.partition.change``) another encoded partition than the last written record's commits all
        open files; after it, ``flush.size`` does. So the records after one that opens a stretch go to its file
        up to the first whose timestamp reaches base + interval (searched with numpy) or the one that fills
        ``flush.size``. Emits :class:`AppendSpan` (one per stretch of records going to one file) and
        :class:`Commit` events, exactly the Appends and Commits of :meth:`process_many`. Returns None, changing
        nothing, when the run cannot be handled in bulk (not :attr:`time_runs`, or an open file holds another
        schema)."""
        import numpy as np

        if not self.time_runs:
            return None
        s = self._s
        if any(v is not schema for v in s.schemas.values()):
            return None
        n = len(offsets)
        out = self._start_run(offsets, out)
        ts_arr = np.asarray(timestamps, dtype=np.int64)
        ts = timestamps if isinstance(timestamps, list) else ts_arr.tolist()
        codes = np.asarray(codes)
        bounds = [0, *(np.flatnonzero(codes[1:] != codes[:-1]) + 1).tolist(), n] if n else [0]
        files, schemas = s.files, s.schemas
        flush = self.policy.flush_size
        periodic, interval = self._periodic, self.policy.rotate_interval_ms
        on_change = self.policy.rotate_on_partition_change
        span_at, span_file = 0, None  # the open span: from index span_at, to the file span_file

        def close_span(end: int) -> None:
            out.append(AppendSpan(span_file.encoded_partition, span_at, end, span_file.start_offset))

        for a, b in zip(bounds, bounds[1:]):
            enc = paths[int(codes[a])]
            i = a
            while i < b:
                t = ts[i]
                if s.base_ts is None:
                    s.base_ts = t
                if periodic and s.count > 0 and (t - s.base_ts >= interval or (on_change and enc != s.cur_enc)):
                    if span_file is not None:
                        close_span(i)
                        span_file = None
                    out.append(self._commit())
                    s.base_ts = t
                stop = min(b, i + max(1, flush - s.count))  # record i and those after it that go to its file
                if periodic and stop - i > 1:
                    stop = _first_reaching(ts, ts_arr, i + 1, stop, s.base_ts + interval)
                f = files.get(enc)
                if f is None:
                    f = files[enc] = _OpenFile(enc, offsets[i], schema)
                    schemas[enc] = schema
                if f is not span_file:
                    if span_file is not None:
                        close_span(i)
                    span_at, span_file = i, f
                if stop - i <= 16:
                    lo, hi = min(ts[i:stop]), max(ts[i:stop])
                else:
                    lo, hi = int(ts_arr[i:stop].min()), int(ts_arr[i:stop].max())
                if f.min_ts is None or lo < f.min_ts:
                    f.min_ts = lo
                if f.max_ts is None or hi > f.max_ts:
                    f.max_ts = hi
                f.last_offset = offsets[stop - 1]
                f.count += stop - i
                s.count += stop - i
                s.cur_ts = ts[stop - 1]
                s.cur_enc = enc
                self._last_written = f.last_offset
                if s.count >= flush:
                    close_span(stop)
                    span_file = None
                    out.append(self._commit())
                i = stop
        if span_file is not None:
            close_span(n)
        if n:
            self._last_seen = offsets[-1]
        return out

    def finish(self, flush_tail: bool = False) -> list[Event]:
        """End of a batch: time/scheduled rotation, optional tail flush, Advance for file-less offsets."""
        now = self._batch_now()
        s = self._s
        events: list[Event] = []
        if s.count > 0 and s.cur_enc is not None and self._rotate_on_time(s.cur_enc, s.cur_ts, now, per_record=False):
            self._after_time_rotation()
            events.append(self._commit())
        elif s.count == 0 and self._scheduled and self._deadline is not None and now >= self._deadline:
            self._deadline = self._next_deadline(self.clock())
        if flush_tail and s.count > 0:
            events.append(self._commit())
        if s.count == 0 and self._last_seen >= self._range_start:
            events.append(Advance(self._range_start, self._last_seen))
            self._range_start = self._last_seen + 1
        self._now = None
        self._carried = s.count > 0
        return events

    # ----------------------------------------------------------------- internals

    def _batch_now(self) -> int:
        if self._now is None:
            self._now = self.clock()
        return self._now

    def _next_deadline(self, now: int) -> int:
        assert self._zone is not None
        return next_time_adjusted_by_day(now, self.policy.rotate_schedule_interval_ms, self._zone)

    def _rotate_on_time(self, enc: str, ts: int | None, now: int, per_record: bool) -> bool:
        s = self._s
        if s.count <= 0:
            return False
        if self._periodic and ts is not None and s.base_ts is not None:
            if ts - s.base_ts >= self.policy.rotate_interval_ms:
                return True
            if self.policy.rotate_on_partition_change and enc != s.cur_enc:
                return True
        if self._scheduled and (self._carried or not per_record):
            return self._deadline is not None and now >= self._deadline
        return False

    def _after_time_rotation(self) -> None:
        if self._scheduled:
            self._deadline = self._next_deadline(self.clock())

    def _write(self, enc: str, record: SinkRecord, ts: int | None) -> Append:
        s = self._s
        f = s.files.get(enc)
        if f is None:
            f = s.files[enc] = _OpenFile(enc, record.offset, record.value_schema)
            if self.policy.rotate_on_key_schema:
                f.key_schema = key_schema_of(record)
        f.add(record.offset, ts)
        s.count += 1
        s.cur_enc = enc
        self._last_written = record.offset
        return Append(enc, record, f.start_offset)

    def _commit(self) -> Commit:
        s = self._s
        assert self._last_written is not None and s.count > 0
        ev = Commit(self._range_start, self._last_written, tuple(f.summary() for f in s.files.values()))
        self._range_start = self._last_written + 1
        s.files.clear()
        s.schemas.clear()
        s.count = 0
        s.base_ts = None
        self._carried = False
        return ev


def key_schema_of(record: SinkRecord) -> Any:
    """The schema of ``record``'s key (``extra["key_schema"]``, set for keys decoded from Confluent wire
    format), or None."""
    extra = record.extra
    return extra.get("key_schema") if extra else None


def same_schema(a: Any, b: Any) -> bool:
    """Whether two key schemas are the same for a file: the same object, or the same registry id and fingerprint
    (None for both: schemaless)."""
    if a is b:
        return True
    if a is None or b is None:
        return False
    return getattr(a, "id", None) == getattr(b, "id", None) and \
        getattr(a, "fingerprint", None) == getattr(b, "fingerprint", None)


def _first_reaching(ts: list, arr: Any, lo: int, hi: int, threshold: int) -> int:
    """The first index in ``[lo, hi)`` whose timestamp (``ts`` = ``arr``, a list and its numpy array) is at least
    ``threshold``, else ``hi``: a few records in Python, then numpy on windows growing eightfold (a commit early in a
    long stretch costs no scan of all of it)."""
    import numpy as np

    step = 16
    while lo < hi:
        end = min(hi, lo + step)
        if step == 16:
            for k in range(lo, end):
                if ts[k] >= threshold:
                    return k
        else:
            hit = np.flatnonzero(arr[lo:end] >= threshold)
            if hit.size:
                return lo + int(hit[0])
        lo, step = end, step * 8
    return hi
