"""Rotator.process_many ≡ repeated Rotator.process (same events once AppendMany is expanded)."""
import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from lakesink.objects.partitioners import DefaultPartitioner, FieldPartitioner, RecordExtractor, TimeBasedPartitioner
from lakesink.objects.records import SinkRecord
from lakesink.objects.rotation import Append, AppendMany, RotationPolicy, Rotator
from lakesink.schemas.avro import value_schema

H = 3_600_000
_V1 = {"type": "record", "name": "R", "namespace": "t", "fields": [
    {"name": "f", "type": ["null", "long", "string"]}, {"name": "g", "type": "string"}]}
_V2 = {**_V1, "fields": _V1["fields"] + [{"name": "h", "type": "long", "default": 7}]}
_OTHER = {"type": "record", "name": "O", "fields": [{"name": "f", "type": ["null", "long", "string"]}]}
# index -> schema factory; a fresh equal object (same fingerprint/version, other identity) included
SCHEMAS = [
    lambda: None,
    lambda: value_schema(_V1, subject="t-value", id=1, version=1),
    lambda: dataclasses.replace(value_schema(_V1, subject="t-value", id=1, version=1)),  # equal, not identical
    lambda: value_schema(_V2, subject="t-value", id=2, version=2),
    lambda: value_schema(_V1, subject="t-value", id=3, version=None),  # no version: only NONE accepts
    lambda: value_schema(_OTHER, subject="t-value", id=4, version=3),
]

field_value = st.one_of(st.none(), st.integers(-2, 2), st.sampled_from(["a", "b/c"]))


@st.composite
def records(draw):
    n = draw(st.integers(0, 40))
    off = draw(st.integers(0, 5))
    out = []
    for _ in range(n):
        off += draw(st.integers(1, 3))
        kind = draw(st.sampled_from(["v"] * 6 + ["tomb", "nofield"]))
        sidx = draw(st.sampled_from([1, 1, 1, 2, 0, 3, 4, 5]))
        ts = draw(st.one_of(st.none(), st.integers(0, 5 * H)))
        if kind == "tomb":
            value, vs = None, None
        else:
            value = {"g": "x"} if kind == "nofield" else {"f": draw(field_value), "g": "x"}
            vs = SCHEMAS[sidx]()
        out.append(SinkRecord("t", 0, off, ts, None, value, value_schema=vs))
    return out


@st.composite
def scenarios(draw):
    recs = draw(records())
    policy = RotationPolicy(
        flush_size=draw(st.integers(1, 6)),
        behavior_on_null_values=draw(st.sampled_from(["fail", "ignore", "write"])),
        schema_compatibility=draw(st.sampled_from(["NONE", "NONE", "BACKWARD", "FORWARD"])),
        rotate_interval_ms=draw(st.sampled_from([-1, -1, -1, H])),
    )
    part = draw(st.sampled_from(["default", "field", "time"]))
    cuts = sorted(draw(st.lists(st.integers(0, len(recs)), max_size=4)))
    start = recs[0].offset - draw(st.integers(0, 2)) if recs else 0
    return recs, policy, part, cuts, max(start, 0)


def _partitioner(kind, policy):
    from lakesink.objects.partitioners import TombstonePartitioner

    p = {"default": DefaultPartitioner(), "field": FieldPartitioner(["f"]),
         "time": TimeBasedPartitioner("'h'=HH", H, "UTC", extractor=RecordExtractor())}[kind]
    return TombstonePartitioner(p) if policy.behavior_on_null_values == "write" else p


def _outcome(exc):
    return None if exc is None else (type(exc), str(exc))


def _reference(recs, policy, part, start):
    rot = Rotator(policy, _partitioner(part, policy), start, clock=lambda: 0)
    events, exc = [], None
    try:
        for r in recs:
            events += rot.process(r)
        events += rot.finish(flush_tail=True)
    except Exception as e:  # noqa: BLE001
        exc = e
    return events, _outcome(exc), rot.next_offset, rot.open_record_count


def _many(recs, policy, part, cuts, start):
    rot = Rotator(policy, _partitioner(part, policy), start, clock=lambda: 0)
    out, exc = [], None
    bounds = [0, *cuts, len(recs)]
    try:
        for a, b in zip(bounds, bounds[1:]):
            rot.process_many(recs[a:b], out)
        out += rot.finish(flush_tail=True)
    except Exception as e:  # noqa: BLE001
        exc = e
    events = []
    for ev in out:
        assert not isinstance(ev, Append)  # appends always come coalesced
        events += ev.expand() if isinstance(ev, AppendMany) else [ev]
    for x, y in zip(out, out[1:]):  # maximal coalescing: no two adjacent AppendMany of the same file
        if isinstance(x, AppendMany) and isinstance(y, AppendMany):
            assert (x.encoded_partition, x.file_start_offset) != (y.encoded_partition, y.file_start_offset)
    return events, _outcome(exc), rot.next_offset, rot.open_record_count


@settings(max_examples=600, deadline=None)
@given(scenarios())
def test_process_many_equals_process(scn) -> None:
    recs, policy, part, cuts, start = scn
    assert _many(recs, policy, part, cuts, start) == _reference(recs, policy, part, start)


def test_process_many_fast_path_coalesces() -> None:
    vs = SCHEMAS[1]()
    recs = [SinkRecord("t", 0, i, 1000 + i, None, {"f": i % 2, "g": "x"}, value_schema=vs) for i in range(10)]
    rot = Rotator(RotationPolicy(flush_size=4), FieldPartitioner(["f"]), 0)
    assert rot._fast
    out = rot.process_many(recs)
    kinds = [(type(e).__name__, getattr(e, "encoded_partition", None)) for e in out]
    assert kinds == [("AppendMany", "f=0"), ("AppendMany", "f=1"), ("AppendMany", "f=0"), ("AppendMany", "f=1"),
                     ("Commit", None), ("AppendMany", "f=0"), ("AppendMany", "f=1"), ("AppendMany", "f=0"),
                     ("AppendMany", "f=1"), ("Commit", None), ("AppendMany", "f=0"), ("AppendMany", "f=1")]
    ref = Rotator(RotationPolicy(flush_size=4), FieldPartitioner(["f"]), 0)
    expect = [e for r in recs for e in ref.process(r)]
    got = [x for e in out for x in (e.expand() if isinstance(e, AppendMany) else [e])]
    assert got == expect


def test_process_many_error_keeps_earlier_events() -> None:
    recs = [SinkRecord("t", 0, i, None, None, {"n": i}) for i in range(5)]
    recs.append(SinkRecord("t", 0, 5, None, None, None))
    rot = Rotator(RotationPolicy(flush_size=2), DefaultPartitioner(), 0)
    out = []
    try:
        rot.process_many(recs, out)
    except Exception as e:  # noqa: BLE001
        assert "offset 5" in str(e) or "5" in str(e)
    else:
        raise AssertionError("tombstone with fail must raise")
    assert sum(len(e.records) for e in out if isinstance(e, AppendMany)) == 5
