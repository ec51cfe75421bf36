"""Schema compatibility modes and projection (lakesink.schemas.compatibility), incl. the tiny-files case."""
import json

import pytest

from lakesink.schemas.compatibility import Decision, SchemaCompatibility, project_value, structurally_compatible
from lakesink.errors import SchemaSwitchError, SchemaVersionError
from lakesink.objects.partitioners import DefaultPartitioner
from lakesink.objects.records import SinkRecord, ValueSchema
from lakesink.objects.rotation import Append, Commit, RotationPolicy, Rotator

V1_AVRO = {"type": "record", "name": "User", "namespace": "ex", "fields": [{"name": "id", "type": "long"}]}
V2_AVRO = {"type": "record", "name": "User", "namespace": "ex", "fields": [
    {"name": "id", "type": "long"}, {"name": "email", "type": "string", "default": "none"}]}
V3_BAD = {"type": "record", "name": "User", "namespace": "ex", "fields": [
    {"name": "id", "type": "long"}, {"name": "age", "type": "int"}]}  # new required field, no default
OTHER = {"type": "record", "name": "Order", "namespace": "ex", "fields": [{"name": "id", "type": "long"}]}


def vs(avro, version, fp=None) -> ValueSchema:
    return ValueSchema(avro=avro, fingerprint=fp or json.dumps(avro, sort_keys=True), subject="s", id=version, version=version)


V1, V2, V3, ORD = vs(V1_AVRO, 1), vs(V2_AVRO, 2), vs(V3_BAD, 3), vs(OTHER, 1)


def rec(schema, value=None, offset=0) -> SinkRecord:
    if value is None:
        value = {"id": offset, "email": "e@x"} if schema is V2 else {"id": offset}
    return SinkRecord("t", 0, offset, None, None, value, value_schema=schema)


def test_same_or_both_none() -> None:
    for mode in ("NONE", "BACKWARD", "FORWARD", "FULL"):
        c = SchemaCompatibility(mode)
        assert c.decide(rec(V1), V1) is Decision.SAME
        assert c.decide(SinkRecord("t", 0, 0, None, None, "x"), None) is Decision.SAME


def test_switch_between_schema_and_schemaless_is_an_error() -> None:
    c = SchemaCompatibility("NONE")
    with pytest.raises(SchemaSwitchError, match="schema-less"):
        c.decide(rec(V1), None)
    with pytest.raises(SchemaSwitchError):
        c.decide(SinkRecord("t", 0, 4, None, None, "x"), V1)


def test_version_required_outside_none() -> None:
    nov = vs(V2_AVRO, None)
    for mode in ("BACKWARD", "FORWARD", "FULL"):
        with pytest.raises(SchemaVersionError, match=f"Schema version required for {mode} compatibility"):
            SchemaCompatibility(mode).decide(rec(nov, {"id": 1, "email": "a"}), V1)
    assert SchemaCompatibility("NONE").decide(rec(nov, {"id": 1, "email": "a"}), V1) is Decision.ROTATE


def test_none_rotates_on_any_difference() -> None:
    c = SchemaCompatibility("NONE")
    assert c.decide(rec(V2), V1) is Decision.ROTATE
    assert c.decide(rec(V1), V2) is Decision.ROTATE
    # same fingerprint but another version is another schema too
    assert c.decide(rec(vs(V1_AVRO, 7)), V1) is Decision.ROTATE


@pytest.mark.parametrize("mode", ["BACKWARD", "FULL"])
def test_backward_and_full(mode: str) -> None:
    c = SchemaCompatibility(mode)
    assert c.decide(rec(V2), V1) is Decision.ROTATE      # newer version → new file, becomes current
    assert c.decide(rec(V1), V2) is Decision.PROJECT     # older record projected to current v2
    projected = c.project(rec(V1, offset=5), V2)
    assert projected.value == {"id": 5, "email": "none"} and projected.value_schema is V2
    assert c.decide(rec(ORD), V2) is Decision.ROTATE     # other record name: incompatible


def test_backward_incompatible_older_rotates() -> None:
    # the current v3 cannot read v1 data (required 'age' without default) → rotate, never project
    assert SchemaCompatibility("BACKWARD").decide(rec(V1), V3) is Decision.ROTATE


def test_forward() -> None:
    c = SchemaCompatibility("FORWARD")
    assert c.decide(rec(V1), V2) is Decision.ROTATE      # older version → rotate
    assert c.decide(rec(V2), V1) is Decision.PROJECT     # newer record projected to the older current
    assert c.project(rec(V2, {"id": 9, "email": "z"}), V1).value == {"id": 9}


def test_structural_check_and_projection() -> None:
    assert structurally_compatible(V2, V1) and not structurally_compatible(V3, V1)
    assert project_value({"id": 1, "email": "q"}, V2, V1) == {"id": 1}
    assert project_value({"id": 1}, V1, V1) == {"id": 1}
    promoted = project_value(3, vs("int", 1), vs("long", 2))
    assert promoted == 3


def test_none_never_projects() -> None:
    r = rec(V1)
    assert SchemaCompatibility("NONE").project(r, V2) is r


def _files(policy_mode: str, versions: list) -> list[Commit]:
    rot = Rotator(RotationPolicy(flush_size=1000, schema_compatibility=policy_mode), DefaultPartitioner(), 0, clock=lambda: 0)
    events = []
    for i, v in enumerate(versions):
        events += rot.process(rec(v, offset=i))
    events += rot.finish(flush_tail=True)
    return events


def test_tiny_files_under_none_but_not_backward() -> None:
    interleaved = [V1, V2, V1, V2, V1, V2]
    commits = [e for e in _files("NONE", interleaved) if isinstance(e, Commit)]
    assert [c.files[0].record_count for c in commits] == [1, 1, 1, 1, 1, 1]  # a file per switch
    events = _files("BACKWARD", interleaved)
    commits = [e for e in events if isinstance(e, Commit)]
    # v1 (file 1), then v2 rotates once; later v1 records are projected into the v2 file
    assert [(c.files[0].record_count, c.files[0].schema.version) for c in commits] == [(1, 1), (5, 2)]
    appended = [e.record for e in events if isinstance(e, Append)]
    assert appended[2].value == {"id": 2, "email": "none"} and appended[2].value_schema is V2
