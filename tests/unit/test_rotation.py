"""The rotation state machine (lakesink.objects.rotation): spec §3 rules and replay determinism."""
import json
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesink.errors import PartitionError
from lakesink.objects.partitioners import (
    DefaultPartitioner,
    FieldPartitioner,
    RecordExtractor,
    TimeBasedPartitioner,
    TombstonePartitioner,
    WallclockExtractor,
)
from lakesink.objects.records import SinkRecord, ValueSchema
from lakesink.objects.rotation import Advance, Append, Commit, RotationPolicy, Rotator

H = 3_600_000


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def rec(offset, value=None, ts=None, schema=None) -> SinkRecord:
    return SinkRecord("t", 0, offset, ts, None, {"n": offset} if value is None else value, value_schema=schema)


def tomb(offset, ts=None) -> SinkRecord:
    return SinkRecord("t", 0, offset, ts, b"k", None)


def run(policy, partitioner, records, start=0, clock=lambda: 0, flush_tail=False, **kw):
    rot = Rotator(policy, partitioner, start, clock=clock, **kw)
    events = []
    for r in records:
        events += rot.process(r)
    events += rot.finish(flush_tail=flush_tail)
    return events


def commits(events):
    return [e for e in events if isinstance(e, Commit)]


def test_flush_size_and_chaining() -> None:
    ev = run(RotationPolicy(flush_size=3), DefaultPartitioner(), [rec(i) for i in range(8)])
    cs = commits(ev)
    assert [(c.range_start, c.range_end) for c in cs] == [(0, 2), (3, 5)]
    assert cs[0].files[0].encoded_partition == "partition=0" and cs[0].files[0].record_count == 3
    # offsets 6, 7 stay open: no Commit, no Advance
    assert not any(isinstance(e, Advance) for e in ev)
    assert [e.file_start_offset for e in ev if isinstance(e, Append)] == [0, 0, 0, 3, 3, 3, 6, 6]


def test_flush_tail_commits_open_files() -> None:
    ev = run(RotationPolicy(flush_size=3), DefaultPartitioner(), [rec(i) for i in range(4)], flush_tail=True)
    assert [(c.range_start, c.range_end) for c in commits(ev)] == [(0, 2), (3, 3)]


def test_offset_gaps_never_assumed_contiguous() -> None:
    ev = run(RotationPolicy(flush_size=2), DefaultPartitioner(), [rec(o) for o in (10, 13, 20, 21, 30)], start=5)
    assert [(c.range_start, c.range_end) for c in commits(ev)] == [(5, 13), (14, 21)]
    f = commits(ev)[0].files[0]
    assert (f.start_offset, f.last_offset, f.record_count) == (10, 13, 2)


def test_flush_size_counts_records_across_all_open_files() -> None:
    vals = [{"k": k} for k in "ababa"]
    ev = run(RotationPolicy(flush_size=4), FieldPartitioner(["k"]), [rec(i, v) for i, v in enumerate(vals)])
    (c,) = commits(ev)
    assert (c.range_start, c.range_end) == (0, 3)
    assert [(f.encoded_partition, f.start_offset, f.last_offset, f.record_count) for f in c.files] == [
        ("k=a", 0, 2, 2), ("k=b", 1, 3, 2)]


def test_null_values_ignore_covered_by_ranges() -> None:
    pol = RotationPolicy(flush_size=2, behavior_on_null_values="ignore")
    ev = run(pol, DefaultPartitioner(), [tomb(0), rec(1), tomb(2), rec(3), tomb(4), tomb(5)])
    assert [(c.range_start, c.range_end) for c in commits(ev)] == [(0, 3)]
    assert ev[-1] == Advance(4, 5)
    only_tombs = run(pol, DefaultPartitioner(), [tomb(7), tomb(9)], start=7)
    assert only_tombs == [Advance(7, 9)]


def test_null_values_fail() -> None:
    rot = Rotator(RotationPolicy(flush_size=2), DefaultPartitioner(), 0)
    with pytest.raises(PartitionError, match="behavior.on.null.values") as ei:
        rot.process(tomb(0))
    assert ei.value.offset == 0


def test_null_values_write_go_to_tombstone_partition() -> None:
    pol = RotationPolicy(flush_size=10, behavior_on_null_values="write")
    ev = run(pol, TombstonePartitioner(DefaultPartitioner()), [rec(0), tomb(1), rec(2)], flush_tail=True)
    (c,) = commits(ev)
    assert [(f.encoded_partition, f.record_count) for f in c.files] == [("partition=0", 2), ("tombstone", 1)]


def test_schemaless_to_schema_switch_rotates() -> None:
    s = ValueSchema({"type": "string"}, "fp", version=1)
    ev = run(RotationPolicy(flush_size=10), DefaultPartitioner(),
             [rec(0, "a"), rec(1, "b", schema=s), rec(2, "c")], flush_tail=True)
    assert [(c.range_start, c.range_end) for c in commits(ev)] == [(0, 0), (1, 1), (2, 2)]


def _hourly(extractor=None):
    return TimeBasedPartitioner("YYYY-MM-dd-HH", H, "UTC", "en", extractor or RecordExtractor())


def test_rotate_interval_on_record_time() -> None:
    t0 = ms("2026-01-01T00:00:00+00:00")
    pol = RotationPolicy(flush_size=100, rotate_interval_ms=600_000)
    recs = [rec(0, ts=t0), rec(1, ts=t0 + 599_999), rec(2, ts=t0 + 600_000), rec(3, ts=t0 + 700_000)]
    ev = run(pol, _hourly(), recs)
    assert [(c.range_start, c.range_end) for c in commits(ev)] == [(0, 1)]  # 2 rotates; 2..3 stay open


def test_rotate_on_partition_change_flag() -> None:
    t0 = ms("2026-01-01T00:50:00+00:00")
    recs = [rec(0, ts=t0), rec(1, ts=t0 + 20 * 60_000), rec(2, ts=t0 + 1000)]  # hour 00, 01, back to 00
    on = run(RotationPolicy(flush_size=100, rotate_interval_ms=10 * H), _hourly(), recs)
    assert [(c.range_start, c.range_end) for c in commits(on)] == [(0, 0), (1, 1)]
    off = run(RotationPolicy(flush_size=100, rotate_interval_ms=10 * H, rotate_on_partition_change=False),
              _hourly(), recs, flush_tail=True)
    (c,) = commits(off)
    assert [f.encoded_partition for f in c.files] == ["2026-01-01-00", "2026-01-01-01"]


def test_rotate_interval_ignored_for_non_time_based() -> None:
    pol = RotationPolicy(flush_size=100, rotate_interval_ms=1)
    ev = run(pol, DefaultPartitioner(), [rec(i, ts=i * H) for i in range(5)])
    assert commits(ev) == []


def test_rotate_interval_needs_a_newer_record() -> None:
    # Confluent issue #144: the after-batch rotateOnTime check compares the last record's time with
    # the base, so an idle partition keeps its file open until a newer record arrives.
    t0 = ms("2026-01-01T00:00:00+00:00")
    pol = RotationPolicy(flush_size=100, rotate_interval_ms=1000, rotate_on_partition_change=False)
    rot = Rotator(pol, _hourly(), 0, clock=lambda: t0 + 10 * H)
    assert [type(e) for e in rot.process(rec(0, ts=t0)) + rot.process(rec(1, ts=t0 + 999))] == [Append, Append]
    assert rot.finish() == []
    assert [type(e) for e in rot.process(rec(2, ts=t0 + 1000))] == [Commit, Append]


def test_wallclock_now_read_once_per_batch() -> None:
    calls = []

    def clock():
        calls.append(1)
        return ms("2026-01-01T05:00:00+00:00") + len(calls) * H

    rot = Rotator(RotationPolicy(flush_size=100), _hourly(WallclockExtractor()), 0, clock=clock)
    encs = {e.encoded_partition for r in range(5) for e in rot.process(rec(r)) if isinstance(e, Append)}
    assert len(calls) == 1 and encs == {"2026-01-01-06"}
    rot.finish()
    encs = {e.encoded_partition for e in rot.process(rec(9)) if isinstance(e, Append)}
    assert encs == {"2026-01-01-07"}  # a new batch reads the clock again


def test_scheduled_rotation_at_finish() -> None:
    now = [ms("2026-01-01T10:20:00+00:00")]
    pol = RotationPolicy(flush_size=100, rotate_schedule_interval_ms=H, timezone="UTC")
    rot = Rotator(pol, DefaultPartitioner(), 0, clock=lambda: now[0])   # deadline 11:00
    rot.process(rec(0))
    assert rot.finish() == []
    now[0] = ms("2026-01-01T10:59:59+00:00")
    rot.process(rec(1))
    assert rot.finish() == []
    now[0] = ms("2026-01-01T11:00:00+00:00")
    # files carried over from earlier batches rotate at the first record after the deadline
    ev = rot.process(rec(2))
    assert [(c.range_start, c.range_end) for c in commits(ev)] == [(0, 1)]
    assert rot.finish() == []  # next deadline 12:00
    # anchored at a previous commit time: a fresh rotator past the deadline commits at finish
    fresh = Rotator(pol, DefaultPartitioner(), 3, clock=lambda: ms("2026-01-01T12:30:00+00:00"),
                    schedule_anchor_ms=ms("2026-01-01T11:10:00+00:00"))
    fresh.process(rec(3))
    fresh.process(rec(4))
    assert [(c.range_start, c.range_end) for c in commits(fresh.finish())] == [(3, 4)]


def test_scheduled_rotation_per_record_for_carried_files() -> None:
    now = [ms("2026-01-01T10:20:00+00:00")]
    pol = RotationPolicy(flush_size=100, rotate_schedule_interval_ms=H, timezone="UTC")
    rot = Rotator(pol, DefaultPartitioner(), 0, clock=lambda: now[0])
    rot.process(rec(0))
    rot.finish()
    now[0] = ms("2026-01-01T11:00:01+00:00")
    ev = rot.process(rec(1))
    assert [type(e) for e in ev] == [Commit, Append] and ev[0].range_end == 0
    assert rot.finish() == []  # deadline moved to 12:00


def test_records_must_be_in_offset_order() -> None:
    rot = Rotator(RotationPolicy(flush_size=3), DefaultPartitioner(), 5)
    with pytest.raises(ValueError):
        rot.process(rec(4))
    rot.process(rec(6))
    with pytest.raises(ValueError):
        rot.process(rec(6))


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        RotationPolicy(flush_size=0)
    with pytest.raises(ValueError):
        RotationPolicy(flush_size=1, rotate_schedule_interval_ms=10)


# ----------------------------------------------------------------------------- properties

SCHEMAS = [ValueSchema({"type": "record", "name": "R", "fields": [{"name": "k", "type": "string"}] + (
    [{"name": f"x{i}", "type": "int", "default": 0} for i in range(v)])}, f"fp{v}", version=v + 1) for v in range(3)]


@st.composite
def scenarios(draw):
    n = draw(st.integers(0, 40))
    gaps = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    start = draw(st.integers(0, 5))
    offsets, o = [], start
    for g in gaps:
        o += g - 1
        offsets.append(o)
        o += 1
    null_mode = draw(st.sampled_from(["ignore", "write"]))
    mode = draw(st.sampled_from(["NONE", "BACKWARD", "FORWARD"]))
    records = []
    for off in offsets:
        if draw(st.integers(0, 9)) == 0:
            records.append(SinkRecord("t", 0, off, off * 1000, b"k", None))
            continue
        schema = draw(st.sampled_from(SCHEMAS))
        val = {"k": draw(st.sampled_from(["a", "b", "c/d"]))}
        val.update({f"x{i}": 0 for i in range(int(schema.fingerprint[2:]))})
        records.append(SinkRecord("t", 0, off, draw(st.integers(0, 5 * H)), b"k", val, value_schema=schema))
    time_based = draw(st.booleans())
    policy = RotationPolicy(flush_size=draw(st.integers(1, 6)), behavior_on_null_values=null_mode,
                            schema_compatibility=mode,
                            rotate_interval_ms=draw(st.sampled_from([-1, H // 2, 2 * H])) if time_based else -1,
                            rotate_on_partition_change=draw(st.booleans()))
    return start, records, policy, time_based


def _partitioner(policy, time_based):
    inner = (TimeBasedPartitioner("'h'=HH", H, "UTC", "en", RecordExtractor()) if time_based
             else FieldPartitioner(["k"]))
    return TombstonePartitioner(inner) if policy.behavior_on_null_values == "write" else inner


def _canon(events):
    out = []
    for e in events:
        if isinstance(e, Append):
            out.append(("A", e.encoded_partition, e.record.offset, json.dumps(e.record.value, sort_keys=True),
                        e.file_start_offset))
        else:
            out.append(e)
    return out


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_rotation_invariants_and_replay(scn) -> None:
    start, records, policy, time_based = scn
    events = run(policy, _partitioner(policy, time_based), records, start=start, flush_tail=False)
    appended = [e.record.offset for e in events if isinstance(e, Append)]
    written = [r.offset for r in records if r.value is not None or policy.behavior_on_null_values == "write"]
    # every non-ignored record appears in exactly one Append, in order
    assert appended == written
    # ranges chain from start_offset with no gap/overlap
    expect = start
    for e in events:
        if isinstance(e, (Commit, Advance)):
            assert e.range_start == expect and e.range_end >= e.range_start
            expect = e.range_end + 1
        if isinstance(e, Commit):
            assert 1 <= sum(f.record_count for f in e.files) <= policy.flush_size
            for f in e.files:
                assert e.range_start <= f.start_offset <= f.last_offset <= e.range_end
    # a Commit's files hold exactly the Appends since the previous boundary
    pending = []
    for e in events:
        if isinstance(e, Append):
            pending.append(e)
        elif isinstance(e, Commit):
            assert sum(f.record_count for f in e.files) == len(pending)
            assert {f.start_offset for f in e.files} == {a.file_start_offset for a in pending}
            pending = []
    # determinism: replaying from every Commit boundary reproduces the later events
    canon = _canon(events)
    for i, e in enumerate(events):
        if isinstance(e, (Commit, Advance)):
            rest = [r for r in records if r.offset > e.range_end]
            again = run(policy, _partitioner(policy, time_based), rest, start=e.range_end + 1)
            assert _canon(again) == canon[i + 1:]
