"""The column-at-once Avro -> Arrow decode (lakesink.schemas.avro_arrow) against the record path.

The Parquet files it leads to must be byte-identical to those of the record path (fastavro's dicts
converted by ParquetFormatWriter.write_many), and it must never decode a value the record path would not
read as exactly one datum: a value it accepts decodes with fastavro to the very values it produced."""
from __future__ import annotations

import io
import json
import math
import random
import struct

import fastavro
import pyarrow as pa
import pytest
from support.avro_bytes import mutate

from lakesink.decoders import create_decoder
from lakesink.objects.formats.parquet import ParquetFormat
from lakesink.objects.records import SinkRecord
from lakesink.schemas.avro import avro_to_arrow_schema, raw_parsed_schema
from lakesink.schemas.avro_arrow import decode_column
from lakesink.schemas.avro_check import MAX_BLOCK_ITEMS

LONGS = [0, -1, 1, 63, -64, 64, -65, 2**31, -(2**31) - 1, 2**62, -(2**63), 2**63 - 1]
INTS = [0, -1, 1, 63, -64, 8191, -8193, 2**31 - 1, -(2**31)]
STRINGS = ["", "a", "héllo wörld", "日本語", "emoji 🎉", "x" * 200, "\x00nul"]
DOUBLES = [0.0, -0.0, 1.5, -2.25e300, 5e-324, math.nan, math.inf, -math.inf]

FLAT = {"type": "record", "name": "Flat", "namespace": "t", "fields": [
    {"name": "id", "type": "long"}, {"name": "n", "type": "int"}, {"name": "name", "type": "string"},
    {"name": "blob", "type": "bytes"}, {"name": "amount", "type": "double"}, {"name": "ratio", "type": "float"},
    {"name": "ok", "type": "boolean"}]}
NULLABLE = {"type": "record", "name": "Nullable", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "count", "type": ["int", "null"]}, {"name": "price", "type": ["null", "double"]},
    {"name": "raw", "type": ["null", "bytes"]}, {"name": "flag", "type": ["null", "boolean"]},
    {"name": "f", "type": ["null", "float"]}, {"name": "big", "type": ["long", "null"]}]}
NESTED = {"type": "record", "name": "Outer", "fields": [
    {"name": "id", "type": "long"},
    {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
        {"name": "x", "type": "long"}, {"name": "label", "type": "string"},
        {"name": "deep", "type": ["null", {"type": "record", "name": "Deep", "fields": [
            {"name": "s", "type": ["null", "string"]}, {"name": "d", "type": "double"}]}]}]}},
    {"name": "maybe", "type": ["null", "Inner"]}]}
ARRAYS = {"type": "record", "name": "Arrays", "fields": [
    {"name": "longs", "type": {"type": "array", "items": "long"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "opt", "type": {"type": "array", "items": ["null", "double"]}},
    {"name": "maybe", "type": ["null", {"type": "array", "items": "int"}]},
    {"name": "grid", "type": {"type": "array", "items": {"type": "array", "items": "boolean"}}},
    {"name": "tail", "type": "string"}]}
ARRAY_OF_RECORDS = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"},
        {"name": "notes", "type": {"type": "array", "items": "string"}},
        {"name": "discount", "type": ["null", "double"]}]}}},
    {"name": "backorders", "type": ["null", {"type": "array", "items": "Line"}]}]}


def _pick(rng: random.Random, values: list):
    return rng.choice(values)


def _line(rng: random.Random) -> dict:
    return {"sku": _pick(rng, STRINGS), "qty": _pick(rng, INTS),
            "notes": [_pick(rng, STRINGS) for _ in range(rng.randrange(0, 3))],
            "discount": _pick(rng, [None, 0.5, math.nan])}


def _inner(rng: random.Random) -> dict:
    return {"x": _pick(rng, LONGS), "label": _pick(rng, STRINGS),
            "deep": _pick(rng, [None, {"s": _pick(rng, [None, "é", ""]), "d": _pick(rng, DOUBLES)}])}


RECORDS = {
    "flat": (FLAT, lambda rng: {
        "id": _pick(rng, LONGS), "n": _pick(rng, INTS), "name": _pick(rng, STRINGS),
        "blob": bytes(rng.randrange(256) for _ in range(rng.randrange(0, 20))), "amount": _pick(rng, DOUBLES),
        "ratio": _pick(rng, [0.0, -0.5, 3.4e38, math.nan, -math.inf, 1e-45]), "ok": rng.random() < 0.5}),
    "nullable": (NULLABLE, lambda rng: {
        "id": _pick(rng, LONGS), "note": _pick(rng, [None, "", "ü", "note"]), "count": _pick(rng, [None, 7, -1]),
        "price": _pick(rng, [None, 9.99, math.nan]), "raw": _pick(rng, [None, b"", b"\xff\x00"]),
        "flag": _pick(rng, [None, True, False]), "f": _pick(rng, [None, 0.125]), "big": _pick(rng, [None] + LONGS)}),
    "nested": (NESTED, lambda rng: {"id": _pick(rng, LONGS), "inner": _inner(rng),
                                    "maybe": _pick(rng, [None, _inner(rng)])}),
    "arrays": (ARRAYS, lambda rng: {
        "longs": [_pick(rng, LONGS) for _ in range(rng.randrange(0, 6))],
        "tags": [_pick(rng, STRINGS) for _ in range(rng.randrange(0, 4))],
        "opt": [_pick(rng, [None, 1.0, math.inf]) for _ in range(rng.randrange(0, 3))],
        "maybe": _pick(rng, [None, [], [1, -2, 2**31 - 1]]),
        "grid": [[rng.random() < 0.5 for _ in range(rng.randrange(0, 3))] for _ in range(rng.randrange(0, 3))],
        "tail": _pick(rng, STRINGS)}),
    "array_of_records": (ARRAY_OF_RECORDS, lambda rng: {
        "id": _pick(rng, LONGS), "lines": [_line(rng) for _ in range(rng.randrange(0, 4))],
        "backorders": _pick(rng, [None, [], [_line(rng)]])}),
}


def _encode(schema, rec) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), rec)
    return buf.getvalue()


def _parquet_both(schema, raws: list[bytes], chunk: int, row_group_size: int = 64) -> tuple[bytes, bytes]:
    """(record path's file, columnar file) of ``raws``: write_many over the decoder's records, as the sink
    builds them, and write_payloads of decode_column's tables, ``chunk`` values at a time."""
    dec = create_decoder("avro", schema=json.dumps(schema), wire_format=False)
    vs = dec.fixed_schema
    records = [SinkRecord("t", 0, i, 0, None, dec.decode(v, "t", 0, i)[0], (), vs, v, None, {}, vs)
               for i, v in enumerate(raws)]
    fmt = ParquetFormat(row_group_size=row_group_size)
    a, b = io.BytesIO(), io.BytesIO()
    w = fmt.open_writer(a)
    w.write_many(records)
    w.close()
    w = fmt.open_writer(b)
    for s in range(0, len(raws), chunk):
        table = decode_column(pa.array(raws[s:s + chunk], pa.binary()), raw_parsed_schema(schema))
        assert isinstance(table, pa.Table)
        assert table.schema.equals(avro_to_arrow_schema(schema))  # the file's types: no cast needed
        table.validate(full=True)
        w.write_payloads(table, vs)
    w.close()
    assert w.record_count == len(raws)
    return a.getvalue(), b.getvalue()


@pytest.mark.parametrize("chunk", [1, 37, 500])
@pytest.mark.parametrize("name", sorted(RECORDS))
def test_columnar_parquet_is_byte_identical_to_the_record_path(name, chunk):
    schema, make = RECORDS[name]
    rng = random.Random(name)
    raws = [_encode(schema, make(rng)) for _ in range(300)]
    record_path, columnar = _parquet_both(schema, raws, chunk)
    assert record_path == columnar


def test_empty_arrays_and_all_null_columns_are_byte_identical():
    raws = [_encode(ARRAYS, {"longs": [], "tags": [], "opt": [], "maybe": None, "grid": [], "tail": ""})] * 20
    assert len(set(_parquet_both(ARRAYS, raws, 7))) == 1
    raws = [_encode(NULLABLE, {"id": i, "note": None, "count": None, "price": None, "raw": None, "flag": None,
                               "f": None, "big": None}) for i in range(20)]
    assert len(set(_parquet_both(NULLABLE, raws, 20))) == 1


def test_float_nan_payloads_are_written_as_the_record_path_writes_them():
    """A signalling NaN float is quieted by fastavro's float -> Python float -> Arrow float32 round trip;
    the column decode gives the same bytes. Double NaN payloads pass unchanged on both paths."""
    schema = {"type": "record", "name": "F", "fields": [{"name": "f", "type": "float"},
                                                        {"name": "d", "type": "double"}]}
    bits32 = [0x7FA00001, 0xFFC00000, 0x7F800001, 0x00000001, 0x80000000]
    bits64 = [0x7FF4000000000001, 0xFFF8000000000000, 0x7FF0000000000001, 1, 0x8000000000000000]
    raws = [struct.pack("<IQ", f, d) for f in bits32 for d in bits64]
    assert len(set(_parquet_both(schema, raws, 6))) == 1


# -------------------------------------------------------------------------------- as strict as fastavro


def _rows_fastavro(schema, raws) -> list | None:
    parsed = raw_parsed_schema(schema)
    out = []
    for raw in raws:
        buf = io.BytesIO(raw)
        try:
            out.append(fastavro.schemaless_reader(buf, parsed, None))
        except Exception:  # noqa: BLE001
            return None
        if buf.tell() != len(raw):
            return None
    return out


def _nan_safe(v):
    """Values with NaN replaced by a marker, so equal rows compare equal."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dict):
        return {k: _nan_safe(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_nan_safe(x) for x in v]
    return v


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_random_mutations_decode_only_to_what_fastavro_reads(name):
    schema, make = RECORDS[name]
    rng = random.Random(f"mutate-{name}")
    parsed = raw_parsed_schema(schema)
    base = [_encode(schema, make(rng)) for _ in range(200)]
    decoded = 0
    for i in range(1500):
        raw = mutate(base[i % len(base)], rng)
        table = decode_column(pa.array([raw], pa.binary()), parsed)
        if isinstance(table, pa.Table):
            want = _rows_fastavro(schema, [raw])
            assert want is not None, raw.hex()
            assert _nan_safe(table.to_pylist()) == _nan_safe(want), raw.hex()
            decoded += 1
        else:  # refused, or declined for a mutated array count over MAX_BLOCK_ITEMS
            assert table is False or table is None
    assert decoded > 100  # mutations of string bodies, doubles and small ints are still datums


def test_a_column_decodes_to_fastavro_values_in_binary_large_binary_and_sliced_arrays():
    rng = random.Random(5)
    schema, make = RECORDS["array_of_records"]
    raws = [_encode(schema, make(rng)) for _ in range(120)]
    want = _nan_safe(_rows_fastavro(schema, raws))
    parsed = raw_parsed_schema(schema)
    assert _nan_safe(decode_column(pa.array(raws, pa.binary()), parsed).to_pylist()) == want
    assert _nan_safe(decode_column(pa.array(raws, pa.large_binary()), parsed).to_pylist()) == want
    assert _nan_safe(decode_column(pa.array(raws, pa.binary()).slice(17, 50), parsed).to_pylist()) == want[17:67]
    empty = decode_column(pa.array([], pa.binary()), parsed)
    assert empty.num_rows == 0 and empty.schema.equals(avro_to_arrow_schema(schema))


SMALL = {"type": "record", "name": "S", "fields": [
    {"name": "n", "type": "int"}, {"name": "s", "type": "string"}, {"name": "xs", "type": {"type": "array",
                                                                                        "items": "long"}}]}


def _small(n: int, s: bytes, xs: bytes = b"\x00") -> bytes:
    """A datum of SMALL with ``n``'s varint and ``s``'s bytes written by hand."""
    z = (n << 1) ^ (n >> 63)
    varint = bytearray()
    while True:
        varint.append((z & 0x7F) | (0x80 if z > 0x7F else 0))
        z >>= 7
        if not z:
            break
    return bytes(varint) + bytes([len(s) << 1]) + s + xs


@pytest.mark.parametrize("bad, why", [
    (lambda d: d + b"\x00", "a byte after the datum"),
    (lambda d: d[:-1], "truncated"),
    (lambda d: d[:1], "cut inside a field"),
    (lambda d: b"", "empty"),
    (lambda d: _small(1, b"\xff\xfe"), "invalid UTF-8"),
    (lambda d: _small(1, b"\xed\xa0\x80"), "an encoded surrogate"),
    (lambda d: _small(1, b"\xc0\xaf"), "an overlong encoding"),
])
def test_a_value_that_is_not_exactly_one_datum_is_not_decoded(bad, why):
    values = [_small(i, b"ok", b"\x02\x04\x00") for i in range(10)]
    values[6] = bad(values[6])
    assert _rows_fastavro(SMALL, [values[6]]) is None, why
    assert decode_column(pa.array(values, pa.binary()), raw_parsed_schema(SMALL)) is False, why


def test_an_int_over_32_bits_is_not_decoded():
    """fastavro reads a 5-byte int varint past 32 bits; Arrow then refuses it in the record path (which names
    the record), so the column is not decoded."""
    parsed = raw_parsed_schema(SMALL)
    for n in (2**31, -(2**31) - 1, 2**34):
        raw = _small(n, b"ok")
        assert _rows_fastavro(SMALL, [raw]) == [{"n": n, "s": "ok", "xs": []}]
        assert decode_column(pa.array([_small(1, b"a"), raw]), parsed) is False
    edges = decode_column(pa.array([_small(2**31 - 1, b""), _small(-(2**31), b"")]), parsed)
    assert edges.column("n").to_pylist() == [2**31 - 1, -(2**31)]


def test_a_null_value_is_not_decoded_and_a_non_binary_column_is_declined():
    parsed = raw_parsed_schema(SMALL)
    assert decode_column(pa.array([_small(1, b"a"), None], pa.binary()), parsed) is False
    assert decode_column(pa.array(["x"], pa.string()), parsed) is None


@pytest.mark.parametrize("field_type", [
    {"type": "enum", "name": "E", "symbols": ["A", "B"]},
    {"type": "map", "values": "long"},
    {"type": "fixed", "name": "F", "size": 4},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
    ["int", "string"],
    ["null", "int", "string"],
    "null",
])
def test_schemas_outside_the_decoder_are_declined(field_type):
    schema = {"type": "record", "name": "X", "fields": [{"name": "id", "type": "long"},
                                                         {"name": "f", "type": field_type}]}
    assert decode_column(pa.array([b"\x00\x00"]), fastavro.parse_schema(schema)) is None


def test_recursive_empty_and_non_record_schemas_are_declined():
    linked = fastavro.parse_schema({"type": "record", "name": "L", "fields": [
        {"name": "v", "type": "long"}, {"name": "next", "type": ["null", "L"]}]})
    assert decode_column(pa.array([b"\x02\x00"]), linked) is None
    assert decode_column(pa.array([b""]), fastavro.parse_schema({"type": "record", "name": "E", "fields": []})) is None
    assert decode_column(pa.array([b"\x02"]), fastavro.parse_schema("long")) is None


def test_an_array_block_longer_than_the_walk_takes_is_declined():
    parsed = raw_parsed_schema(SMALL)
    long_block = _small(1, b"a", _encode({"type": "array", "items": "long"}, list(range(MAX_BLOCK_ITEMS + 1))))
    assert _rows_fastavro(SMALL, [long_block]) is not None
    assert decode_column(pa.array([long_block]), parsed) is None
    sized = _small(1, b"a", b"\x03\x04\x02\x04\x00")  # count -2, a block size of 2 bytes, items 1, 2, end
    assert decode_column(pa.array([sized]), parsed).to_pylist() == [{"n": 1, "s": "a", "xs": [1, 2]}]
