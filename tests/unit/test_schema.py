"""Schema identity and the Avro -> Arrow mapping."""
from __future__ import annotations

import decimal
import json

import pyarrow as pa
import pytest

from lakesink.schemas.avro import (arrow_value_converter, avro_to_arrow_schema, fingerprint, parse_schema, primitive_schema_for, strip_logical_types, value_schema)
from lakesink.errors import SchemaError

S = {"type": "record", "name": "A", "namespace": "n", "doc": "d", "fields": [
    {"name": "x", "type": "long", "default": 0},
    {"name": "y", "type": {"type": "long", "logicalType": "timestamp-millis"}},
]}


def test_parse_schema_inputs(tmp_path):
    p = tmp_path / "a.avsc"
    p.write_text(json.dumps(S))
    assert parse_schema(S) == S
    assert parse_schema(json.dumps(S)) == S
    assert parse_schema(str(p)) == S and parse_schema(p) == S
    assert parse_schema("string") == "string" and parse_schema('"bytes"') == "bytes"
    for bad in ("{", "no-such-file.avsc", {"type": "record", "name": "R", "fields": [{"name": "x"}]}, {"type": "wat"}):
        with pytest.raises(SchemaError):
            parse_schema(bad)


def test_fingerprint_is_of_the_canonical_form():
    reordered = {"fields": S["fields"], "type": "record", "namespace": "n", "name": "A"}  # key order, no doc
    assert fingerprint(S) == fingerprint(reordered)
    assert len(fingerprint(S)) == 64
    other = dict(S, fields=[S["fields"][0]])
    assert fingerprint(other) != fingerprint(S)
    assert fingerprint("string") != fingerprint("bytes")


def test_value_schema_is_cached_and_keeps_the_schema_as_given():
    a = value_schema(S, subject="s", id=1, version=2)
    assert a is value_schema(json.loads(json.dumps(S)), subject="s", id=1, version=2)
    assert a != value_schema(S, subject="s", id=1, version=3)
    assert list(a.avro) == list(S) and a.name == "n.A"
    assert a.fingerprint == fingerprint(S)


def test_strip_logical_types():
    assert strip_logical_types(S)["fields"][1]["type"] == {"type": "long"}
    assert S["fields"][1]["type"]["logicalType"] == "timestamp-millis"  # input untouched
    u = ["null", {"type": "bytes", "logicalType": "decimal", "precision": 3}]
    assert strip_logical_types(u) == ["null", {"type": "bytes", "precision": 3}]


def test_primitive_schema_for():
    assert [primitive_schema_for(v) for v in (b"", "", True, 1, 1.0, {})] == [
        "bytes", "string", "boolean", "long", "double", None]


def test_avro_to_arrow_mapping():
    s = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"},
        {"name": "b", "type": ["null", "string"]},
        {"name": "c", "type": {"type": "array", "items": ["null", "long"]}},
        {"name": "d", "type": {"type": "map", "values": "double"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 3}},
        {"name": "g", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}},
        {"name": "h", "type": {"type": "int", "logicalType": "date"}},
        {"name": "i", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "j", "type": "F"},
    ]}
    t = avro_to_arrow_schema(s, {"k": "v"})
    assert t.field("a").type == pa.int32() and not t.field("a").nullable
    assert t.field("b").type == pa.string() and t.field("b").nullable
    assert t.field("c").type.value_field.nullable
    assert t.field("d").type.key_type == pa.string() and t.field("d").type.item_type == pa.float64()
    assert t.field("e").type == pa.string() and t.field("f").type == pa.binary(3) == t.field("j").type
    assert t.field("g").type == pa.decimal256(40, 2) and t.field("h").type == pa.date32()
    assert t.field("i").type == pa.timestamp("us", tz="UTC") and t.metadata == {b"k": b"v"}
    with pytest.raises(SchemaError, match="record"):
        avro_to_arrow_schema("string")
    rec = {"type": "record", "name": "N", "fields": [{"name": "next", "type": ["null", "N"]}]}
    with pytest.raises(SchemaError, match="recursive"):
        avro_to_arrow_schema(rec)


def test_arrow_value_converter_only_where_needed():
    assert arrow_value_converter(S) is None
    s = {"type": "record", "name": "R", "fields": [
        {"name": "m", "type": {"type": "map", "values": ["null", {"type": "bytes", "logicalType": "decimal",
                                                                  "precision": 5, "scale": 1}]}},
        {"name": "k", "type": "string"}]}
    conv = arrow_value_converter(s)
    v = {"m": {"a": b"\xff", "b": None}, "k": "x"}
    assert conv(v) == {"m": {"a": decimal.Decimal("-0.1"), "b": None}, "k": "x"}
    assert v["m"]["a"] == b"\xff"  # input untouched
