"""`lakesink schema check` logic without services: the plain-words incompatibilities, the modes (transitive or
not), schema_history over manifest rows, the header/footer readers and the candidate parsing (bad input → exit 2).
(A basename of its own: tests/integration/test_schema_check.py runs the commands; pytest refuses two of one name.)"""
from __future__ import annotations

import io
import json

import fastavro
import pytest

from lakesink.driver.schema_check import candidate_schema, read_object_schema
from lakesink.errors import CorruptObjectError, InvalidArgumentError, SchemaCheckInputError
from lakesink.manifest import object_row
from lakesink.manifest.queries import schema_history
from lakesink.objects import formats
from lakesink.objects.formats.avro import header_schema
from lakesink.objects.records import SinkRecord
from lakesink.schemas.avro import value_schema
from lakesink.schemas.compatibility import PriorSchema, check_candidate, check_modes, explain


def rec(*fields, name="Order", ns="shop") -> dict:
    return {"type": "record", "name": name, "namespace": ns, "fields": list(fields)}


def f(name, type_, **kw) -> dict:
    return {"name": name, "type": type_, **kw}


V1 = rec(f("id", "long"), f("amount", "long"))
WITH_DEFAULT = rec(f("id", "long"), f("amount", "long"), f("note", "string", default=""))
WITHOUT_DEFAULT = rec(f("id", "long"), f("amount", "long"), f("note", "string"))


def messages(candidate, priors, mode) -> list[str]:
    return [i.message for i in check_candidate(candidate, priors, mode)]


def prior(schema, label="version 1") -> PriorSchema:
    return PriorSchema(label, schema)


# ------------------------------------------------------------------------------------------- wording per rule

def test_added_field_with_default_is_backward_and_forward_compatible() -> None:
    for mode in ("BACKWARD", "FORWARD", "FULL"):
        assert messages(WITH_DEFAULT, [prior(V1)], mode) == []


def test_added_field_without_default_breaks_backward_only() -> None:
    assert messages(WITHOUT_DEFAULT, [prior(V1, "version 3")], "BACKWARD") == [
        "field 'note' added without a default (BACKWARD: a reader with the new schema cannot read data written "
        "with version 3)"]
    assert messages(WITHOUT_DEFAULT, [prior(V1)], "FORWARD") == []  # old readers ignore the extra field
    [i] = check_candidate(WITHOUT_DEFAULT, [prior(V1)], "FULL")
    assert (i.rule, i.path, i.kind, i.old_type, i.new_type) == ("BACKWARD", "note", "field_missing_default",
                                                                "absent", "string")


def test_removed_field_without_default_breaks_forward_only() -> None:
    new = rec(f("id", "long"))
    assert messages(new, [prior(V1, "version 2")], "BACKWARD") == []  # new readers ignore the old field
    assert messages(new, [prior(V1, "version 2")], "FORWARD") == [
        "field 'amount' removed, and version 2 gives it no default (FORWARD: a reader with version 2 cannot read "
        "data written with the new schema)"]
    # the old schema's default makes the removal forward compatible
    assert messages(new, [prior(rec(f("id", "long"), f("amount", "long", default=0)))], "FORWARD") == []


def test_type_change_names_old_and_new_type_and_rule() -> None:
    new = rec(f("id", "long"), f("amount", "string"))
    assert messages(new, [prior(V1, "version 3")], "FULL") == [
        "field 'amount': type changed long → string (BACKWARD: a reader with the new schema cannot read data "
        "written with version 3)",
        "field 'amount': type changed long → string (FORWARD: a reader with version 3 cannot read data written "
        "with the new schema)"]


def test_promotion_int_to_long_is_backward_not_forward() -> None:
    old = rec(f("id", "int"))
    new = rec(f("id", "long"))
    assert messages(new, [prior(old)], "BACKWARD") == []
    [i] = check_candidate(new, [prior(old)], "FORWARD")
    assert (i.path, i.old_type, i.new_type) == ("id", "int", "long")
    assert i.message.startswith("field 'id': type changed int → long (FORWARD: a reader with version 1 cannot")


def test_enum_symbol_removal_and_addition() -> None:
    old = rec(f("status", {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}))
    new = rec(f("status", {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}))
    assert messages(new, [prior(old)], "BACKWARD") == [
        "field 'status': enum symbols removed: SHIPPED (BACKWARD: a reader with the new schema cannot read data "
        "written with version 1)"]
    assert messages(new, [prior(old)], "FORWARD") == []
    assert messages(old, [prior(new)], "FORWARD") == [
        "field 'status': enum symbols added: SHIPPED (FORWARD: a reader with version 1 cannot read data written "
        "with the new schema)"]
    # an enum default makes unknown symbols readable
    forgiving = rec(f("status", {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"], "default": "NEW"}))
    assert messages(forgiving, [prior(old)], "BACKWARD") == []


def test_nested_record_field_path() -> None:
    inner_old = {"type": "record", "name": "Money", "fields": [f("amount", "long"), f("currency", "string")]}
    inner_new = {"type": "record", "name": "Money", "fields": [f("amount", "string"), f("currency", "string")]}
    old = rec(f("order", {"type": "record", "name": "Ord", "fields": [f("total", inner_old)]}))
    new = rec(f("order", {"type": "record", "name": "Ord", "fields": [f("total", inner_new)]}))
    [i] = check_candidate(new, [prior(old, "version 3")], "BACKWARD")
    assert i.path == "order.total.amount"
    assert i.message == ("field 'order.total.amount': type changed long → string (BACKWARD: a reader with the new "
                         "schema cannot read data written with version 3)")


def test_paths_through_optional_records_arrays_and_maps() -> None:
    line_old = {"type": "record", "name": "Line", "fields": [f("qty", "int")]}
    line_new = {"type": "record", "name": "Line", "fields": [f("qty", "string")]}
    old = rec(f("lines", {"type": "array", "items": line_old}), f("opt", ["null", dict(line_old, name="Opt")]),
              f("tags", {"type": "map", "values": "int"}))
    new = rec(f("lines", {"type": "array", "items": line_new}), f("opt", ["null", dict(line_new, name="Opt")]),
              f("tags", {"type": "map", "values": "boolean"}))
    assert [(i.path, i.old_type, i.new_type) for i in check_candidate(new, [prior(old)], "BACKWARD")] == [
        ("lines[].qty", "int", "string"), ("opt.qty", "int", "string"), ("tags{}", "int", "boolean")]


def test_union_narrowed_and_named_type_renamed() -> None:
    old = rec(f("note", ["null", "string"], default=None))
    new = rec(f("note", "string"))
    [i] = check_candidate(new, [prior(old)], "BACKWARD")
    assert i.message.startswith("field 'note': type changed union[null, string] → string (BACKWARD:")
    [i] = check_candidate(rec(f("id", "long"), name="Purchase"), [prior(rec(f("id", "long")))], "BACKWARD")
    assert i.message.startswith("the schema: name changed shop.Order → shop.Purchase (BACKWARD:")


# ------------------------------------------------------------------------------------------- modes

def test_modes_rules_and_transitivity() -> None:
    assert check_modes("NONE") == ((), False)
    assert check_modes("backward") == (("BACKWARD",), False)
    assert check_modes("FULL_TRANSITIVE") == (("BACKWARD", "FORWARD"), True)
    with pytest.raises(InvalidArgumentError, match="unknown compatibility mode 'SIDEWAYS'"):
        check_modes("SIDEWAYS")


def test_non_transitive_compares_with_the_latest_only() -> None:
    v1 = rec(f("id", "long"))                                            # no 'amount'
    v2 = rec(f("id", "long"), f("amount", "long", default=0))
    cand = rec(f("id", "long"), f("amount", "long"))                    # 'amount' without a default
    priors = [prior(v1, "version 1"), prior(v2, "version 2")]
    assert messages(cand, priors, "BACKWARD") == []                      # v2 data always has 'amount'
    assert messages(cand, priors, "BACKWARD_TRANSITIVE") == [
        "field 'amount' added without a default (BACKWARD: a reader with the new schema cannot read data written "
        "with version 1)"]
    assert messages(cand, priors, "NONE") == [] and messages(cand, [], "FULL_TRANSITIVE") == []


def test_forward_transitive_reads_the_candidate_with_every_old_schema() -> None:
    v1 = rec(f("id", "long"), f("amount", "long"))
    v2 = rec(f("id", "long"), f("amount", "long", default=0))
    cand = rec(f("id", "long"))
    assert messages(cand, [prior(v1), prior(v2, "version 2")], "FORWARD") == []
    [i] = check_candidate(cand, [prior(v1), prior(v2, "version 2")], "FORWARD_TRANSITIVE")
    assert i.against == "version 1" and i.rule == "FORWARD" and i.kind == "field_missing_default"


def test_explain_is_empty_for_compatible_pairs_and_accepts_json_text() -> None:
    assert explain(json.dumps(WITH_DEFAULT), json.dumps(V1)) == []


# ------------------------------------------------------------------------------------------- history

def _row(topic, partition, first, last, vs, fmt="avro", ts=1_700_000_000_000):
    return object_row(topic, partition, first, last, first_offset=first, last_offset=last, record_count=last - first + 1,
                      encoded_partition=f"partition={partition}", object_key=f"k/{topic}/{partition}/{first}",
                      object_uri="s3://b/k", side_files=(), format=fmt, compression=None, size_bytes=10, etag="e",
                      version_id=None, min_timestamp_ms=ts + first, max_timestamp_ms=ts + last, schema=vs)


def test_schema_history_groups_per_topic_and_schema() -> None:
    s1 = value_schema(V1, "orders-value", 11, 1)
    s2 = value_schema(WITH_DEFAULT, "orders-value", 12, 2)
    rows = [_row("orders", 0, 0, 9, s1), _row("orders", 1, 0, 4, s1), _row("orders", 0, 10, 19, s2),
            _row("orders", 0, 20, 29, s2), _row("clicks", 0, 0, 2, None, fmt="json")]
    hist = schema_history(rows)
    assert [(e.topic, e.version, e.id, e.first_offset, e.last_offset, e.objects, e.records, e.partitions)
            for e in hist] == [("clicks", None, None, 0, 2, 1, 3, [0]), ("orders", 1, 11, 0, 9, 2, 15, [0, 1]),
                               ("orders", 2, 12, 10, 29, 2, 20, [0])]
    assert hist[1].fingerprint == s1.fingerprint and hist[1].subject == "orders-value"
    assert hist[2].min_timestamp.timestamp() == pytest.approx(1_700_000_000.010)
    assert [e.version for e in schema_history(rows, topic="orders")] == [1, 2]

    import pyarrow as pa

    from lakesink.manifest.deltars import arrow_schema

    table = pa.Table.from_pylist([r.to_json() | {"min_timestamp": r.min_timestamp, "max_timestamp": r.max_timestamp,
                                                 "committed_at": None, "side_files": []} for r in rows])
    assert [(e.topic, e.version, e.objects) for e in schema_history(table)] == \
           [(e.topic, e.version, e.objects) for e in hist]
    assert "schema_fingerprint" in arrow_schema().names


# ------------------------------------------------------------------------------------------- objects and input

class BytesStore:
    """The part of the store interface the readers use, over in-memory objects; counts ranged reads."""

    def __init__(self, objects: dict[str, bytes]):
        self.objects, self.reads = objects, []

    def uri(self, key: str) -> str:
        return f"mem://{key}"

    def read(self, key, etag=None, version_id=None, byte_range=None) -> bytes:
        self.reads.append(byte_range)
        data = self.objects[key]
        return data if byte_range is None else data[byte_range[0]: byte_range[1] + 1]


def _object(fmt: str, schema: dict, n: int = 500) -> bytes:
    vs = value_schema(schema, "s", 1, 1)
    buf = io.BytesIO()
    w = formats.create(fmt).open_writer(buf)
    w.write_many([SinkRecord("t", 0, i, 0, None, {"id": i, "amount": i}, value_schema=vs) for i in range(n)])
    w.close()
    return buf.getvalue()


def test_avro_header_read_by_growing_ranges() -> None:
    big = rec(f("id", "long"), f("amount", "long"), *[f(f"x{i}", "string", default="y" * 50) for i in range(100)])
    data = _object("avro", big)
    assert header_schema(data[:100]) is None and header_schema(data) == big
    store = BytesStore({"a.avro": data})
    assert read_object_schema(store, {"object_key": "a.avro", "format": "avro"}) == big
    # the header is ~9 KB: ranges from 4 KiB, doubled until it fits, never the whole object
    assert store.reads == [(0, 4095), (0, 8191), (0, 16383)] and len(data) > 16384
    with pytest.raises(CorruptObjectError, match="mem://j.avro: not an Avro object container"):
        read_object_schema(BytesStore({"j.avro": b'{"id": 1}\n' * 10}), {"object_key": "j.avro", "format": "avro"})


def test_parquet_footer_read_by_ranges() -> None:
    data = _object("parquet", V1, n=20000)
    store = BytesStore({"p.parquet": data})
    assert read_object_schema(store, {"object_key": "p.parquet", "format": "parquet", "size_bytes": len(data)}) == V1
    assert all(r is not None and r[1] - r[0] < 70000 for r in store.reads)
    assert read_object_schema(store, {"object_key": "x.json", "format": "json"}) is None


def test_candidate_bad_inputs_are_one_line_naming_the_file(tmp_path) -> None:
    with pytest.raises(SchemaCheckInputError, match=r"^schema file .*missing\.avsc: no such file$"):
        candidate_schema(str(tmp_path / "missing.avsc"))
    broken = tmp_path / "broken.avsc"
    broken.write_text('{"type": "record",')
    with pytest.raises(SchemaCheckInputError, match=r"^schema file .*broken\.avsc: not valid JSON: "):
        candidate_schema(str(broken))
    unknown = tmp_path / "unknown.avsc"
    unknown.write_text(json.dumps(rec(f("a", "nosuch"))))
    with pytest.raises(SchemaCheckInputError, match=r"unknown\.avsc: invalid Avro schema: unknown type 'shop.nosuch'$"):
        candidate_schema(unknown)
    no_fields = tmp_path / "nofields.avsc"
    no_fields.write_text('{"type": "record", "name": "R"}')
    with pytest.raises(SchemaCheckInputError, match=r"nofields\.avsc: invalid Avro schema"):
        candidate_schema(str(no_fields))
    assert SchemaCheckInputError.exit_code == 2
    good = tmp_path / "good.avsc"
    good.write_text(json.dumps(V1))
    assert candidate_schema(str(good)) == (V1, f"schema file {good}")
    assert candidate_schema(V1)[0] == V1 and candidate_schema(json.dumps(V1))[0] == V1
    fastavro.parse_schema(V1)
