"""The column-at-once Avro datum check (lakesink.schemas.avro_check) against fastavro's own reader.

It must never accept a value fastavro would not read as exactly one datum: every case here is also decoded
by fastavro, and a value the check accepts must decode with nothing after it."""
from __future__ import annotations

import io
import random

import fastavro
import pyarrow as pa
import pytest
from support.avro_bytes import mutate

from lakesink.schemas.avro_check import MAX_BLOCK_ITEMS, check_datums

SCHEMA = fastavro.parse_schema({
    "type": "record", "name": "R", "namespace": "t",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "n", "type": "int"},
        {"name": "name", "type": "string"},
        {"name": "blob", "type": "bytes"},
        {"name": "amount", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "ok", "type": "boolean"},
        {"name": "note", "type": ["null", "string"]},
        {"name": "either", "type": ["null", "long", "string"]},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 3}},
        {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
            {"name": "x", "type": "long"}, {"name": "y", "type": ["null", "double"]}]}},
        {"name": "items", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
    ]})


def _record(rng: random.Random) -> dict:
    return {
        "id": rng.choice([0, -1, 1, 63, -64, 64, 2**31, -(2**63), 2**63 - 1, rng.randrange(-10**12, 10**12)]),
        "n": rng.choice([0, -1, 2**31 - 1, -(2**31), rng.randrange(-1000, 1000)]),
        "name": rng.choice(["", "a", "héllo wörld", "日本語", "x" * rng.randrange(0, 300), "emoji 🎉"]),
        "blob": bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))),
        "amount": rng.uniform(-1e9, 1e9),
        "ratio": 0.5,
        "ok": rng.random() < 0.5,
        "note": rng.choice([None, "", "some note"]),
        "either": rng.choice([None, 12345, "str"]),
        "color": rng.choice(["RED", "GREEN", "BLUE"]),
        "tag": b"abc",
        "inner": {"x": rng.randrange(-10**6, 10**6), "y": rng.choice([None, 1.25])},
        "items": [rng.choice(["sku", "ü", ""]) for _ in range(rng.randrange(0, 6))],
        "attrs": {f"k{i}": rng.choice([None, i]) for i in range(rng.randrange(0, 4))},
    }


def _datum(rec: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, SCHEMA, rec)
    return buf.getvalue()


def _fastavro_accepts(raw: bytes, skip: int = 0) -> bool:
    buf = io.BytesIO(raw)
    buf.seek(skip)
    try:
        fastavro.schemaless_reader(buf, SCHEMA, None)
    except Exception:  # noqa: BLE001
        return False
    return buf.tell() == len(raw)


@pytest.fixture(scope="module")
def datums() -> list[bytes]:
    rng = random.Random(7)
    return [_datum(_record(rng)) for _ in range(2000)]


def test_valid_datums_pass_in_binary_and_large_binary_and_sliced_arrays(datums):
    assert check_datums(pa.array(datums, pa.binary()), SCHEMA) is True
    assert check_datums(pa.array(datums, pa.large_binary()), SCHEMA) is True
    assert check_datums(pa.array(datums, pa.binary()).slice(17, 300), SCHEMA) is True
    assert check_datums(pa.array([], pa.binary()), SCHEMA) is True


def test_a_wire_prefix_is_skipped(datums):
    framed = [b"\x00\x00\x00\x00\x07" + d for d in datums[:100]]
    assert check_datums(pa.array(framed, pa.binary()), SCHEMA, skip=5) is True
    assert check_datums(pa.array(framed, pa.binary()), SCHEMA) is False


@pytest.mark.parametrize("bad, why", [
    (lambda d: d + b"\x00", "a byte after the datum"),
    (lambda d: d[:-1], "truncated"),
    (lambda d: d[:1], "cut inside the first field"),
    (lambda d: b"", "empty"),
])
def test_one_bad_value_among_good_ones_fails_the_column(datums, bad, why):
    values = list(datums[:50])
    values[31] = bad(values[31])
    assert not _fastavro_accepts(values[31]), why
    assert check_datums(pa.array(values, pa.binary()), SCHEMA) is False, why


def test_field_level_corruptions_fastavro_refuses_are_refused():
    rng = random.Random(3)
    rec = _record(rng)
    rec.update(name="ab", note=None, either=None)
    base = _datum({**rec, "id": 1, "n": 1})
    # layout: id (1 byte), n (1 byte), name (len 1 byte + 2), ...
    bad_utf8 = base[:3] + b"\xff\xfe" + base[5:]
    assert not _fastavro_accepts(bad_utf8)
    assert check_datums(pa.array([bad_utf8]), SCHEMA) is False
    negative_length = base[:2] + b"\x03" + base[3:]  # zigzag 3 = -2
    assert not _fastavro_accepts(negative_length)
    assert check_datums(pa.array([negative_length]), SCHEMA) is False
    endless_varint = b"\xff" * 11 + base[1:]
    assert check_datums(pa.array([endless_varint]), SCHEMA) is False
    huge_length = base[:2] + b"\xfe" + b"\xff" * 8 + b"\x01" + base[3:]  # 2**63 - 1: position + length wraps
    assert not _fastavro_accepts(huge_length)
    assert check_datums(pa.array([huge_length]), SCHEMA) is False


def test_union_and_enum_indexes_out_of_range_are_refused():
    schema = fastavro.parse_schema({"type": "record", "name": "U", "fields": [
        {"name": "u", "type": ["null", "string"]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}]})
    good = [b"\x00\x02", b"\x02\x04hi\x00"]
    assert check_datums(pa.array(good), schema) is True
    assert check_datums(pa.array([b"\x04\x00"]), schema) is False  # union index 2 of 2 branches
    assert check_datums(pa.array([b"\x00\x04"]), schema) is False  # enum index 2 of 2 symbols
    assert check_datums(pa.array([b"\x01\x00"]), schema) is False  # union index -1


def test_random_mutations_are_never_accepted_when_fastavro_refuses_them(datums):
    rng = random.Random(11)
    accepted_and_valid = 0
    for i in range(3000):
        raw = mutate(datums[i % len(datums)], rng)
        verdict = check_datums(pa.array([raw]), SCHEMA)
        if verdict:
            assert _fastavro_accepts(raw), raw.hex()
            accepted_and_valid += 1
    assert accepted_and_valid > 100  # the mutations also hit bytes (doubles, string bodies) any reader accepts


def test_types_the_walk_does_not_take_answer_none():
    for s in ({"type": "record", "name": "T", "fields": [
                  {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}}]},
              {"type": "record", "name": "L", "fields": [  # recursive: a linked list
                  {"name": "v", "type": "long"}, {"name": "next", "type": ["null", "L"]}]}):
        parsed = fastavro.parse_schema(s)
        assert check_datums(pa.array([b"\x00"]), parsed) is None
    assert check_datums(pa.array([b"\x00"]), SCHEMA) is False  # walked (and refused), not declined


def test_a_named_type_used_twice_is_walked_as_that_type():
    parsed = fastavro.parse_schema({"type": "record", "name": "N", "namespace": "x", "fields": [
        {"name": "a", "type": {"type": "fixed", "name": "F", "size": 2}}, {"name": "b", "type": "F"}]})
    assert check_datums(pa.array([b"abcd"]), parsed) is True
    assert check_datums(pa.array([b"abc"]), parsed) is False


ARRAY = fastavro.parse_schema({"type": "record", "name": "A", "fields": [
    {"name": "xs", "type": {"type": "array", "items": "long"}}, {"name": "z", "type": "int"}]})


def test_array_blocks_sized_and_unsized_and_a_long_block_is_decoded_instead():
    unsized = b"\x04\x02\x04\x00\x06"  # 2 items (1, 2), end, z = 3
    sized = b"\x03\x04\x02\x04\x00\x06"  # count -2 then a block size of 2 bytes, 2 items, end, z = 3
    for raw in (unsized, sized):
        assert _fastavro_accepts_schema(raw, ARRAY)
    assert check_datums(pa.array([unsized, sized, b"\x00\x06"]), ARRAY) is True
    assert check_datums(pa.array([b"\x04\x02\x04\x06"]), ARRAY) is False  # no end-of-array block
    n = MAX_BLOCK_ITEMS + 1
    long_block = _encode(ARRAY, {"xs": list(range(n)), "z": 1})
    assert check_datums(pa.array([long_block]), ARRAY) is None


def _encode(schema, rec) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, rec)
    return buf.getvalue()


def _fastavro_accepts_schema(raw: bytes, schema) -> bool:
    buf = io.BytesIO(raw)
    try:
        fastavro.schemaless_reader(buf, schema, None)
    except Exception:  # noqa: BLE001
        return False
    return buf.tell() == len(raw)
