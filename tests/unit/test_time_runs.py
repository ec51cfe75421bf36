"""The columnar path under time-based partitioners (Record timestamps): the runs cut from a batch's timestamp column
(Rotator.process_time_run, TimeBasedPartitioner.record_time_buckets) are exactly those the per-record Rotator cuts,
and archive_partitions writes the record path's objects and manifest rows with them."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesink.errors import PartitionError
from lakesink.executor.columnar import ColumnarPlan
from lakesink.objects.partitioners import (DailyPartitioner, HourlyPartitioner, RecordExtractor,
                                           RecordFieldExtractor, TimeBasedPartitioner, WallclockExtractor)
from lakesink.objects.records import SinkRecord
from lakesink.objects.rotation import AppendMany, AppendSpan, Rotator, RotationPolicy
from lakesink.wiring import task_parts
from test_columnar import config, run

H = 3_600_000
D = 24 * H


def utc(*args) -> int:
    return int(datetime(*args, tzinfo=timezone.utc).timestamp() * 1000)


#: instants near which buckets and offsets change: New York's spring-forward and fall-back nights of 2024, Berlin's
#: fall-back, Sao Paulo's midnight transitions (2018: the local day starts at 01:00; 2019: 00:00 happens twice),
#: Lord Howe's half-hour DST, a year boundary, the epoch (negative instants truncate toward zero)
NEAR = [utc(2024, 3, 10, 7), utc(2024, 11, 3, 6), utc(2024, 10, 27, 1), utc(2018, 11, 4, 3), utc(2019, 2, 17, 2),
        utc(2024, 4, 6, 15), utc(2024, 12, 31, 23, 59), 0]


def partitioner(kind: str, tz: str) -> TimeBasedPartitioner:
    ext = RecordExtractor()
    if kind == "daily":
        return DailyPartitioner(tz, "en", ext)
    if kind == "hourly":
        return HourlyPartitioner(tz, "en", ext)
    if kind == "quarter":  # TimeBasedPartitioner with its own path.format / partition.duration.ms
        return TimeBasedPartitioner("'y'=YYYY/'m'=MMM/'d'=dd/'t'=HHmm_Z", 15 * 60_000, tz, "en", ext)
    return TimeBasedPartitioner("YYYY-MM-dd'T'HH:mm:ss.SSS", 1500, tz, "en", ext)  # odd: 1.5 s buckets


KINDS = ["daily", "hourly", "quarter", "odd"]
ZONES = ["UTC", "America/New_York", "Europe/Berlin", "America/Sao_Paulo", "Australia/Lord_Howe", "+05:30", "-0800"]


@st.composite
def timestamps(draw):
    """Timestamps around one instant of NEAR, wandering forward with jumps back (CreateTime need not grow)."""
    at = draw(st.sampled_from(NEAR)) + draw(st.integers(-3 * H, 3 * H))
    out = []
    for _ in range(draw(st.integers(0, 60))):
        at += draw(st.sampled_from([0, 1, 7, 999, 60_000, 20 * 60_000, H, -1, -30_000, -H]))
        out.append(at)
    return out


@st.composite
def dense_timestamps(draw):
    """Long stretches (hundreds of records, steps of a few ms with rare jumps back and forth): files that take
    hundreds of records at once, whose end the cutter finds with numpy."""
    at = draw(st.sampled_from(NEAR)) + draw(st.integers(-H, H))
    n = draw(st.integers(100, 700))
    jumps = dict(draw(st.lists(st.tuples(st.integers(0, n), st.sampled_from([-H, -60_000, 60_000, 20 * 60_000])),
                               max_size=4)))
    step = draw(st.sampled_from([1, 7, 300, 4000]))
    out = []
    for i in range(n):
        at += jumps.get(i, step)
        out.append(at)
    return out


def encoded(p, ts) -> list[str] | None:
    """Each record's encoded partition from :meth:`TimeBasedPartitioner.record_time_buckets` (None: declined)."""
    got = p.record_time_buckets(ts)
    return None if got is None else [got[1][c] for c in got[0].tolist()]


@settings(max_examples=200, deadline=None)
@given(ts=timestamps(), kind=st.sampled_from(KINDS), tz=st.sampled_from(ZONES))
def test_record_time_buckets_equal_encode_partition(ts, kind, tz):
    p = partitioner(kind, tz)
    want = [p.encode_partition(SinkRecord("t", 0, i, t, None, b"v"), p.extract_timestamp(
        SinkRecord("t", 0, i, t, None, b"v"), 0)) for i, t in enumerate(ts)]
    assert encoded(partitioner(kind, tz), ts) == want


def test_record_time_buckets_across_dst_nights():
    """New York's two 2024 transition nights and Sao Paulo's midnight ones: every 10 s of the four hours around the
    transition, and every 7 ms of the 6 s around it."""
    for tz, around in (("America/New_York", utc(2024, 3, 10, 7)), ("America/New_York", utc(2024, 11, 3, 6)),
                       ("America/Sao_Paulo", utc(2018, 11, 4, 3)), ("America/Sao_Paulo", utc(2019, 2, 17, 2))):
        ts = [*range(around - 2 * H, around + 2 * H, 9973), *range(around - 3000, around + 3000, 7)]
        for kind in ("hourly", "daily", "quarter"):
            p = partitioner(kind, tz)
            want = [p.encode_partition(None, t) for t in ts]
            assert encoded(partitioner(kind, tz), ts) == want
            assert len(set(want)) > 1 or kind == "daily"


def test_record_time_buckets_decline_what_they_cannot_vouch_for():
    wall = DailyPartitioner("UTC", "en", WallclockExtractor())
    field = DailyPartitioner("UTC", "en", RecordFieldExtractor("ts"))
    assert not wall.encodes_record_times and encoded(wall, [0]) is None
    assert not field.encodes_record_times and encoded(field, [0]) is None

    class Custom(DailyPartitioner):
        def encode_partition(self, record, timestamp_ms=None):
            return "x"

    assert encoded(Custom("UTC", "en", RecordExtractor()), [0]) is None
    p = partitioner("daily", "UTC")
    assert p.encodes_record_times and encoded(p, []) == []
    assert encoded(p, [0, 2**62]) is None  # the record path names a timestamp it cannot format


# ------------------------------------------------------------------------------------------ the cutter


def per_record(events) -> list:
    """AppendMany and AppendSpan events as (file, first index, stop index), Commits as they are."""
    out = []
    for ev in events:
        if isinstance(ev, AppendMany):
            out.append(("span", ev.encoded_partition, ev.file_start_offset, ev.records[0].offset,
                        ev.records[-1].offset))
        else:
            out.append(ev)
    return out


def spans(events, offsets) -> list:
    out = []
    for ev in events:
        if isinstance(ev, AppendSpan):
            out.append(("span", ev.encoded_partition, ev.file_start_offset, offsets[ev.start], offsets[ev.stop - 1]))
        else:
            out.append(ev)
    return out


def merged(events) -> list:
    """Consecutive spans of one file as one (batches cut the record path's AppendMany runs alike)."""
    out: list = []
    for ev in events:
        if (isinstance(ev, tuple) and out and isinstance(out[-1], tuple) and out[-1][1:3] == ev[1:3]):
            out[-1] = out[-1][:4] + (ev[4],)
        else:
            out.append(ev)
    return out


@st.composite
def scenarios(draw):
    ts = draw(st.one_of(timestamps(), dense_timestamps()))
    offsets, off = [], draw(st.integers(0, 5))
    for _ in ts:
        off += draw(st.integers(1, 3))
        offsets.append(off)
    policy = RotationPolicy(flush_size=draw(st.sampled_from([1, 2, 3, 5, 8, 150, 1000])),
                            rotate_interval_ms=draw(st.sampled_from([-1, 1, 100, 60_000, 20 * 60_000, H, 2 * H])),
                            rotate_on_partition_change=draw(st.booleans()),
                            behavior_on_null_values=draw(st.sampled_from(["fail", "ignore"])))
    cuts = sorted(set(draw(st.lists(st.integers(0, len(ts)), max_size=4))))
    tail = draw(st.booleans())
    return ts, offsets, policy, cuts, tail


@settings(max_examples=250, deadline=None)
@given(sc=scenarios(), kind=st.sampled_from(KINDS), tz=st.sampled_from(ZONES))
def test_time_runs_cut_the_files_of_the_per_record_rotator(sc, kind, tz):
    """Random timestamp sequences (out of order, across day/hour/DST boundaries), cut into batches (each ended by
    finish, as a long-lived rotator sees them): the same Appends, Commits and Advances on both paths."""
    ts, offsets, policy, cuts, tail = sc
    start = offsets[0] - 1 if offsets else 0
    a = Rotator(policy, partitioner(kind, tz), start, clock=lambda: 10**13)
    b = Rotator(policy, partitioner(kind, tz), start, clock=lambda: 10**13)
    assert b.time_runs
    want, got = [], []
    bounds = [0, *cuts, len(ts)]
    for lo, hi in zip(bounds, bounds[1:]):
        recs = [SinkRecord("t", 0, o, t, None, b"v") for o, t in zip(offsets[lo:hi], ts[lo:hi])]
        want += per_record(a.process_many(recs))
        codes, paths = b.partitioner.record_time_buckets(ts[lo:hi])
        got += spans(b.process_time_run(offsets[lo:hi], ts[lo:hi], codes, paths, None), offsets[lo:hi])
        want += a.finish(flush_tail=tail and hi == len(ts))
        got += b.finish(flush_tail=tail and hi == len(ts))
        assert (a.due_ms, a.next_offset, a.open_record_count) == (b.due_ms, b.next_offset, b.open_record_count)
    assert merged(got) == merged(want)


def test_time_runs_rotate_on_interval_partition_change_and_flush():
    """A hand-checked case: hourly, interval 30 min, partition change on; a record going back an hour reopens its
    hour in a new file; flush.size 4 closes the fifth file."""
    p = partitioner("hourly", "UTC")
    rot = Rotator(RotationPolicy(flush_size=4, rotate_interval_ms=30 * 60_000), p, 0, clock=lambda: 0)
    t0 = utc(2024, 5, 1, 10, 50)
    ts = [t0, t0 + 5 * 60_000, t0 + 12 * 60_000, t0 - H, t0 - H + 1, t0 + 40 * 60_000, t0 + 41 * 60_000,
          t0 + 42 * 60_000, t0 + 43 * 60_000]
    ev = rot.process_time_run(list(range(9)), ts, *p.record_time_buckets(ts), None)
    shape = [(e.start, e.stop, e.encoded_partition[-7:]) if isinstance(e, AppendSpan) else (e.range_start, e.range_end)
             for e in ev]
    # 10:50, 10:55 | 11:02 (another hour) | 09:50, 09:50 (back) | 11:30 (interval from 09:50) ... 11:33 (flush)
    assert shape == [(0, 2, "hour=10"), (0, 1), (2, 3, "hour=11"), (2, 2), (3, 5, "hour=09"), (3, 4),
                     (5, 9, "hour=11"), (5, 8)]


def test_time_runs_decline_what_needs_records():
    p = partitioner("daily", "UTC")
    sched = Rotator(RotationPolicy(flush_size=3, rotate_schedule_interval_ms=H, timezone="UTC"), p, 0)
    assert not sched.time_runs and sched.process_time_run([0], [1], [0], ["x"], None) is None
    tomb = Rotator(RotationPolicy(flush_size=3, behavior_on_null_values="write"), p, 0)
    assert tomb.process_time_run([0], [1], [0], ["x"], None) is None
    rot = Rotator(RotationPolicy(flush_size=3), p, 0)
    assert rot.process_time_run([0], [1], [0], ["x"], None) is not None
    assert rot.process_time_run([1], [1], [0], ["x"], object()) is None  # the open file holds another schema
    with pytest.raises(ValueError, match="offset order"):
        rot.process_time_run([0], [1], [0], ["x"], None)


# ------------------------------------------------------------------------------------------ archive_partitions


TIME_CONFIGS = {
    "daily": {"partitioner.class": "daily"},
    "hourly": {"partitioner.class": "hourly"},
    "timebased": {"partitioner.class": "TimeBasedPartitioner", "path.format": "'dt'=YYYY-MM-dd/'hm'=HHmm",
                  "partition.duration.ms": str(20 * 60_000)},
}


def time_config(tmp_path, fmt, kind, tz="UTC", **extra):
    return config(tmp_path, fmt, **{**TIME_CONFIGS[kind], "timestamp.extractor": "Record", "locale": "en",
                                    "timezone": tz, **extra})


def time_batches(values, chunk, ts):
    out = []
    for s in range(0, len(values), chunk):
        m = len(values[s:s + chunk])
        out.append(pa.RecordBatch.from_pydict({
            "value": pa.array(values[s:s + m], pa.binary()), "partition": pa.array([3] * m, pa.int32()),
            "offset": pa.array(range(10 + s, 10 + s + m), pa.int64()), "ts": pa.array(ts[s:s + m], pa.int64())}))
    return out


@pytest.mark.parametrize("kind", sorted(TIME_CONFIGS))
def test_plan_for_time_based_partitioners_on_record_time(tmp_path, kind):
    assert ColumnarPlan.for_parts(task_parts(time_config(tmp_path, "json", kind))).kind == "json"
    for extractor in ("Wallclock", "RecordField"):
        cfg = time_config(tmp_path, "json", kind, **{"timestamp.extractor": extractor})
        assert ColumnarPlan.for_parts(task_parts(cfg)) is None
    cfg = time_config(tmp_path, "json", kind, **{"rotate.schedule.interval.ms": "60000"})
    assert ColumnarPlan.for_parts(task_parts(cfg)) is None


# a day and hour boundary in New York's fall-back night (01:00-02:00 happens twice), CreateTime going back
NIGHT = utc(2024, 11, 2, 23, 0)
STEPS = [0, 4 * 60_000, 9 * 60_000, -7 * 60_000, 25 * 60_000, 1, 0, -50 * 60_000, 40 * 60_000, 33 * 60_000]


@pytest.mark.parametrize("chunk", [3, 1000])
@pytest.mark.parametrize("fmt,kind,tz,extra", [
    ("json", "daily", "UTC", {"rotate.interval.ms": str(H)}),
    ("json", "daily", "America/New_York", {}),
    ("bytearray", "hourly", "America/New_York", {"rotate.interval.ms": str(30 * 60_000)}),
    ("bytearray", "hourly", "Europe/Berlin", {"rotate.interval.ms": str(30 * 60_000),
                                              "rotate.file.on.partition.change": "false"}),
    ("avro", "timebased", "America/New_York", {"rotate.interval.ms": str(45 * 60_000)}),
    ("avro", "timebased", "UTC", {"rotate.file.on.partition.change": "false", "flush.size": "1000"}),
    ("json", "hourly", "UTC", {"store.kafka.keys": "false", "behavior.on.null.values": "ignore",
                               "rotate.interval.ms": str(H)}),
])
def test_time_columnar_writes_the_objects_and_rows_of_the_record_path(tmp_path, fmt, kind, tz, extra, chunk):
    from test_columnar import avro_datum

    n = 120
    ts, at = [], NIGHT
    for i in range(n):
        at += STEPS[(i * 7) % len(STEPS)]
        ts.append(at)
    if fmt == "avro":
        values = [avro_datum(i) for i in range(n)]
    else:
        values = [json.dumps({"i": i, "s": "é" * (i % 5)}).encode() for i in range(n)]
    batch = time_batches(values, chunk, ts)
    if fmt == "avro":
        from lakesink.executor.columnar import CANONICAL

        batch = [b.append_column(CANONICAL, pa.array([True] * b.num_rows)) for b in batch]
    took: list[int] = []
    flush_tail = chunk > 3  # without it, what the last batch leaves open stays open (finish's time check only)
    record = run(time_config(tmp_path / "r", fmt, kind, tz, **extra), batch, columnar=False, flush_tail=flush_tail)
    columnar = run(time_config(tmp_path / "c", fmt, kind, tz, **extra), batch, columnar=True, flush_tail=flush_tail,
                   took=took)
    assert columnar == record
    encs = {r["encoded_partition"] for r in record[0] if isinstance(r, dict) and r.get("kind") == "object"}
    assert not flush_tail or (len(encs) > 1 and len(record[1]) > 2)
    assert took == [n]  # every record took the columnar path


def test_a_batch_the_fast_path_cannot_vouch_for_shares_files_with_columnar_batches(tmp_path):
    """A non-canonical (valid) datum sends its batch through the record path, between columnar batches whose files it
    shares; a null timestamp is named by the record path, as without the columnar path."""
    from lakesink.executor.columnar import CANONICAL
    from test_columnar import avro_datum

    n = 90
    ts = [NIGHT + i * 97_000 - (i % 5) * 300_000 for i in range(n)]
    values = [avro_datum(i) for i in range(n)]
    ok = [i != 33 for i in range(n)]
    extra = {"rotate.interval.ms": str(20 * 60_000)}

    def batch_list(tss):
        return [b.append_column(CANONICAL, pa.array(ok[s:s + b.num_rows]))
                for b, s in zip(time_batches(values, 10, tss), range(0, n, 10))]

    took: list[int] = []
    want = run(time_config(tmp_path / "r", "avro", "hourly", "America/New_York", **extra), batch_list(ts), False)
    got = run(time_config(tmp_path / "c", "avro", "hourly", "America/New_York", **extra), batch_list(ts), True,
              took=took)
    assert got == want and took == [n - 10]
    assert len({r["encoded_partition"] for r in got[0] if isinstance(r, dict) and r.get("kind") == "object"}) > 1

    ts[47] = None
    for columnar in (False, True):
        with pytest.raises(PartitionError, match="no timestamp") as ei:
            run(time_config(tmp_path / f"n{columnar}", "avro", "hourly", "UTC", **extra), batch_list(ts), columnar)
        assert ei.value.offset == 57
