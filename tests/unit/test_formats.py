"""Behaviour suite run against every format writer/reader pair, plus format-specific checks that
an independent standard tool reads what we wrote."""
from __future__ import annotations

import bz2
import gzip
import dataclasses
import io
import json
import math
import os
import struct

import fastavro
import pytest

from lakesink.errors import EmptyFileError, EncodeError
from lakesink.objects.formats import FORMAT_NAMES, RecordView, create
from lakesink.objects.formats.base import DEFAULT_BUFFER_SIZE
from lakesink.objects.records import SinkRecord
from lakesink.schemas.avro import value_schema

USER = {
    "type": "record", "name": "User", "namespace": "ex",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "score", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
USER_VS = value_schema(USER, subject="users-value", id=7, version=1)


def user(i: int, pad: str = "") -> dict:
    return {"id": i, "name": f"user{i}{pad}", "score": i / 4, "tags": ["a", "b"][: i % 3],
            "note": None if i % 2 else f"note é {i}"}


def wire(vs, value) -> bytes:
    buf = io.BytesIO()
    buf.write(b"\x00" + struct.pack(">I", vs.id))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(vs.avro), value)
    return buf.getvalue()


def rec(i, value, vs=None, raw=None, key=None, headers=(("h", b"v"),), topic="t", partition=0):
    return SinkRecord(topic, partition, i, 1700000000000 + i, key if key is not None else b"k%d" % i, value,
                      headers, vs, raw)


# ---- one "case" per format: options + how to build records and what read() returns -------------

def avro_records(n, offset=0, pad=""):
    return [rec(offset + i, user(i, pad), USER_VS) for i in range(n)]


def avro_wire_records(n, offset=0, pad=""):
    return [rec(offset + i, user(i, pad), USER_VS, wire(USER_VS, user(i, pad))) for i in range(n)]


def json_records(n, offset=0, pad=""):
    return [rec(offset + i, {"id": i, "name": f"n{i}{pad}", "ok": i % 2 == 0, "xs": [1, 2.5, None]}) for i in range(n)]


def bytes_records(n, offset=0, pad=""):
    return [rec(offset + i, f"line {i} {pad}".encode()) for i in range(n)]


def text_records(n, offset=0, pad=""):
    return [rec(offset + i, f"text {i} ü {pad}") for i in range(n)]


CASES = {
    "avro-null": ("avro", {}, avro_records),
    "avro-deflate-wire": ("avro", {"codec": "deflate"}, avro_wire_records),
    "avro-snappy": ("avro", {"codec": "snappy"}, avro_wire_records),
    "json": ("json", {}, json_records),
    "json-gzip": ("json", {"compression": "gzip"}, json_records),
    "bytearray": ("bytearray", {}, bytes_records),
    "bytearray-gzip": ("bytearray", {"compression": "gzip", "separator": b"\x00|"}, bytes_records),
    "parquet": ("parquet", {"row_group_size": 1000}, avro_records),
    "parquet-wire": ("parquet", {"codec": "zstd", "row_group_size": 1000}, avro_wire_records),
    "blockgzip": ("blockgzip", {"block_size": 4096}, text_records),
    "blockgzip-bz2": ("blockgzip", {"compression": "bzip2", "block_size": 4096}, text_records),
}


def expected(records):
    return [r.value for r in records]


def write_all(fmt, records, out=None, view=RecordView.VALUE):
    out = out if out is not None else io.BytesIO()
    w = fmt.open_writer(out, view)
    for r in records:
        w.write(r)
    w.close()
    return out, w


def read_back(fmt, data: bytes, view=RecordView.VALUE):
    return list(fmt.read(io.BytesIO(data), view))


@pytest.fixture(params=sorted(CASES))
def case(request):
    name, opts, make = CASES[request.param]
    return create(name, **opts), make


def test_every_registered_format_has_a_case():
    assert {c[0] for c in CASES.values()} == set(FORMAT_NAMES)


def test_round_trip(case):
    fmt, make = case
    records = make(700)
    out, w = write_all(fmt, records)
    assert w.record_count == 700
    assert w.bytes_written == len(out.getvalue()) > 0
    assert read_back(fmt, out.getvalue()) == expected(records)


class RecordingOut:
    """A write-only, non-seekable ``out`` that records every write (like a multipart stream)."""

    def __init__(self):
        self.sizes: list[int] = []
        self.buf = io.BytesIO()
        self.flushes = 0

    def write(self, b):
        self.sizes.append(len(b))
        self.buf.write(b)
        return len(b)

    def flush(self):
        self.flushes += 1

    @property
    def total(self):
        return sum(self.sizes)


def test_streaming_pushes_bytes_before_close(case):
    fmt, make = case
    n = 50_000
    pad = os.urandom(24).hex()  # poorly compressible so compressed outputs exceed a buffer
    records = [r for r in make(n, pad=pad)]
    for i, r in enumerate(records):  # vary the payload per record
        noise = os.urandom(48).hex()
        if isinstance(r.value, dict) and "name" in r.value:
            r.value["name"] = r.value["name"] + noise
        elif isinstance(r.value, bytes):
            r.value = r.value + noise.encode()
        elif isinstance(r.value, str):
            r.value = r.value + noise
        r.raw_value = wire(USER_VS, r.value) if r.raw_value is not None else None
    out = RecordingOut()
    w = fmt.open_writer(out)
    seen = []
    for i, r in enumerate(records):
        w.write(r)
        if i % 5000 == 4999:
            seen.append(w.bytes_written)
    assert out.total == w.bytes_written
    assert seen[len(seen) * 3 // 4] > 0, "nothing pushed to out before the end"
    assert seen[-1] > seen[0], "bytes_written does not grow while writing"
    w.close()
    assert out.total == w.bytes_written > seen[-1]
    assert max(out.sizes) <= 8 * DEFAULT_BUFFER_SIZE, "one write holds a whole object"
    assert out.flushes >= 1
    assert read_back(fmt, out.buf.getvalue()) == expected(records)


def test_close_with_no_record(case):
    fmt, _ = case
    out = io.BytesIO()
    w = fmt.open_writer(out)
    if fmt.name in ("avro", "parquet"):  # schema comes from the first record
        with pytest.raises(EmptyFileError):
            w.close()
    else:
        w.close()
        assert read_back(fmt, out.getvalue()) == []
        assert w.record_count == 0


def bad_value_for(fmt_name):
    return {
        "avro": ("x" * 3, None),  # schema'd file, schemaless str value
        "json": (b"\x00raw", None),
        "bytearray": ({"not": "bytes"}, None),
        "parquet": ({"id": "not-a-long", "name": "x", "score": 1.0, "tags": [], "note": None}, USER_VS),
        "blockgzip": (b"\xff\xfe not utf-8", None),
    }[fmt_name]


def test_bad_value_names_the_record_and_writer_survives(case):
    fmt, make = case
    good = make(10)
    value, vs = bad_value_for(fmt.name)
    bad = SinkRecord("orders", 3, 1234, None, b"k", value, (("h", b"v"),), vs, None)
    out = io.BytesIO()
    w = fmt.open_writer(out)
    for r in good[:5]:
        w.write(r)
    with pytest.raises(EncodeError) as ei:
        w.write(bad)
    assert (ei.value.topic, ei.value.partition, ei.value.offset) == ("orders", 3, 1234)
    assert "orders-3@1234" in str(ei.value)
    for r in good[5:]:
        w.write(r)
    w.close()
    assert w.record_count == 10
    assert read_back(fmt, out.getvalue()) == expected(good)


def test_tombstone_is_an_encode_error(case):
    fmt, make = case
    w = fmt.open_writer(io.BytesIO())
    w.write(make(1)[0])
    with pytest.raises(EncodeError, match="tombstone"):
        w.write(rec(5, None, USER_VS))


# ---- extensions (spec §1.2) -------------------------------------------------------------------

@pytest.mark.parametrize("name,opts,ext", [
    ("avro", {}, ".avro"), ("avro", {"codec": "snappy"}, ".avro"), ("avro", {"codec": "bzip2"}, ".avro"),
    ("json", {}, ".json"), ("json", {"compression": "gzip"}, ".json.gz"), ("json", {"compression": "none"}, ".json"),
    ("bytearray", {}, ".bin"), ("bytearray", {"compression": "gzip"}, ".bin.gz"),
    ("bytearray", {"extension": ".txt"}, ".txt"), ("bytearray", {"extension": ".txt", "compression": "gzip"}, ".txt.gz"),
    ("parquet", {}, ".snappy.parquet"), ("parquet", {"codec": "none"}, ".parquet"),
    ("parquet", {"codec": "gzip"}, ".gz.parquet"), ("parquet", {"codec": "zstd"}, ".zstd.parquet"),
    ("parquet", {"codec": "lz4_raw"}, ".lz4raw.parquet"), ("parquet", {"codec": "brotli"}, ".br.parquet"),
    ("blockgzip", {}, ".gz"), ("blockgzip", {"compression": "bzip2"}, ".bz2"),
    ("io.confluent.connect.s3.format.json.JsonFormat", {}, ".json"),
])
def test_extensions(name, opts, ext):
    assert create(name, **opts).extension == ext


@pytest.mark.parametrize("name,opts", [
    ("avro", {"codec": "lz77"}), ("json", {"compression": "zstd"}), ("json", {"compression_level": 11}),
    ("parquet", {"codec": "lz4"}), ("parquet", {"codec": "lzo"}), ("blockgzip", {"compression": "none"}),
    ("json", {"no_such_option": 1}), ("nope", {}), ("json", {"decimal_format": "HEX"}),
])
def test_bad_options_are_value_errors(name, opts):
    with pytest.raises(ValueError):
        create(name, **opts)


# ---- Avro: independent readers, fast path ------------------------------------------------------

@pytest.mark.parametrize("codec", ["null", "deflate", "bzip2"])
def test_avro_read_by_apache_avro_and_fastavro(codec):
    from avro.datafile import DataFileReader
    from avro.io import DatumReader

    fmt = create("avro", codec=codec, sync_interval=500)
    records = avro_wire_records(300)[:150] + avro_records(300)[150:]  # mixed fast path / encoded
    out, _ = write_all(fmt, records)
    data = out.getvalue()
    want = [r.value for r in records]
    r = fastavro.reader(io.BytesIO(data))
    assert r.metadata["avro.codec"] == codec
    assert json.loads(r.metadata["avro.schema"]) == USER
    assert list(r) == want
    with DataFileReader(io.BytesIO(data), DatumReader()) as dfr:
        assert list(dfr) == want


@pytest.mark.parametrize("codec", ["snappy", "zstandard", "xz"])
def test_avro_other_codecs_read_by_fastavro(codec):
    fmt = create("avro", codec=codec)
    records = avro_wire_records(200)
    out, _ = write_all(fmt, records)
    r = fastavro.reader(io.BytesIO(out.getvalue()))
    assert r.metadata["avro.codec"] == codec
    assert list(r) == [x.value for x in records]


def test_avro_fast_path_copies_payload_bytes():
    """The block holds exactly the wire payloads: prove it by giving a raw_value whose payload
    differs from the decoded value (the writer must have used the bytes, not the dict)."""
    fmt = create("avro")
    r = rec(0, user(1), USER_VS, wire(USER_VS, user(2)))
    out, _ = write_all(fmt, [r])
    assert read_back(fmt, out.getvalue())[0]["id"] == 2
    # without fast path: the value is encoded
    out, _ = write_all(create("avro", fast_path=False), [r])
    assert read_back(fmt, out.getvalue())[0]["id"] == 1


def test_avro_bare_fast_path_copies_raw_value():
    """raw_avro with the writer schema's fingerprint: the whole raw_value is the block payload
    (shown by a raw value that differs from the decoded one); without raw_avro, or with fast_path
    off, or with raw_avro of another schema (a projected record), the value is encoded."""
    fixed = value_schema(USER)
    raw = bare_avro(user(2))
    r = SinkRecord("t", 0, 0, 1, b"k", user(1), (("h", b"v"),), fixed, raw, None, {}, fixed)
    for fmt, expect in ((create("avro"), 2), (create("avro", fast_path=False), 1)):
        out, _ = write_all(fmt, [r])
        assert read_back(fmt, out.getvalue())[0]["id"] == expect
        out = io.BytesIO()
        w = fmt.open_writer(out)
        w.write_many([r, r, r])  # the write_many path too
        w.close()
        assert [x["id"] for x in read_back(fmt, out.getvalue())] == [expect] * 3
    for other in (None, value_schema(dict(USER, name="Other"))):
        r2 = SinkRecord("t", 0, 0, 1, b"k", user(1), (("h", b"v"),), fixed, raw, None, {}, other)
        out, _ = write_all(create("avro"), [r2, r2])
        assert [x["id"] for x in read_back(create("avro"), out.getvalue())] == [1, 1]
        out = io.BytesIO()
        w = create("avro").open_writer(out)
        w.write_many([r2, r2, r2])
        w.close()
        assert [x["id"] for x in read_back(create("avro"), out.getvalue())] == [1, 1, 1]
    # byte-identical to the encoded file, sync marker aside
    recs = [SinkRecord("t", 0, i, 1, b"k", user(i), (("h", b"v"),), fixed, bare_avro(user(i)), None, {}, fixed)
            for i in range(300)]
    a, _ = write_all(create("avro", sync_interval=500), recs)
    b, _ = write_all(create("avro", sync_interval=500, fast_path=False), recs)
    sa = fastavro.reader(io.BytesIO(a.getvalue()))._header["sync"]
    sb = fastavro.reader(io.BytesIO(b.getvalue()))._header["sync"]
    assert a.getvalue().replace(sa, b"S" * 16) == b.getvalue().replace(sb, b"S" * 16)


def bare_avro(value) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(USER), value)
    return buf.getvalue()


def test_avro_fast_path_needs_the_same_schema_id():
    """A value projected to another schema keeps its old raw bytes: id mismatch -> re-encode."""
    other_id = value_schema(USER, subject="users-value", id=8, version=2)
    r = rec(0, user(1), other_id, wire(USER_VS, user(2)))  # raw bytes say id 7
    out, _ = write_all(create("avro"), [r])
    assert read_back(create("avro"), out.getvalue())[0]["id"] == 1


def test_avro_rejects_a_second_schema_in_one_file():
    v2 = dict(USER, fields=USER["fields"] + [{"name": "x", "type": "int", "default": 0}])
    w = create("avro").open_writer(io.BytesIO())
    w.write(avro_records(1)[0])
    with pytest.raises(EncodeError, match="differs"):
        w.write(rec(1, dict(user(1), x=1), value_schema(v2, id=9)))


def test_avro_logical_types_round_trip_raw():
    s = {"type": "record", "name": "L", "fields": [
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "amt", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
    ]}
    vs = value_schema(s)
    v = {"ts": 1700000000123, "d": 19000, "amt": (12345).to_bytes(2, "big", signed=True),
         "u": "6f1c3b5e-2a7d-4c1e-9f00-1234567890ab"}
    fmt = create("avro")
    out, _ = write_all(fmt, [rec(0, v, vs)])
    assert read_back(fmt, out.getvalue()) == [v]
    import datetime
    import decimal
    got = next(iter(fastavro.reader(io.BytesIO(out.getvalue()))))  # a logical-type reader sees real types
    assert got["amt"] == decimal.Decimal("123.45")
    assert got["ts"] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=datetime.timezone.utc)


def test_avro_schemaless_values():
    fmt = create("avro")
    out, _ = write_all(fmt, [rec(i, f"s{i}") for i in range(3)])
    assert fastavro.reader(io.BytesIO(out.getvalue())).writer_schema == "string"
    assert read_back(fmt, out.getvalue()) == ["s0", "s1", "s2"]
    out, _ = write_all(fmt, [rec(i, b"\x00\x01") for i in range(2)])
    assert read_back(fmt, out.getvalue()) == [b"\x00\x01"] * 2
    w = fmt.open_writer(io.BytesIO())
    with pytest.raises(EncodeError, match="needs a schema'd value"):
        w.write(rec(0, {"a": 1}))


def test_avro_keys_and_headers_views():
    fmt = create("avro")
    records = [rec(i, user(i), USER_VS, key=f"key{i}", headers=(("a", b"1"), ("b", None))) for i in range(5)]
    out, _ = write_all(fmt, records, view=RecordView.KEYS)
    assert fastavro.reader(io.BytesIO(out.getvalue())).writer_schema == "string"
    assert read_back(fmt, out.getvalue(), RecordView.KEYS) == [f"key{i}" for i in range(5)]
    out, _ = write_all(fmt, records, view=RecordView.HEADERS)
    raw = list(fastavro.reader(io.BytesIO(out.getvalue())))
    assert raw[0] == [{"key": "a", "value": "1"}, {"key": "b", "value": None}]  # the bare array
    assert read_back(fmt, out.getvalue(), RecordView.HEADERS)[0] == [("a", "1"), ("b", None)]
    w = fmt.open_writer(io.BytesIO(), RecordView.HEADERS)
    with pytest.raises(EncodeError, match="no headers"):
        w.write(rec(0, user(0), USER_VS, headers=()))
    w = fmt.open_writer(io.BytesIO(), RecordView.KEYS)
    with pytest.raises(EncodeError, match="key is null"):
        w.write(SinkRecord("t", 0, 0, None, None, user(0), (), USER_VS))


def test_avro_blocks_respect_sync_interval():
    fmt = create("avro", sync_interval=2000)
    out, _ = write_all(fmt, avro_wire_records(1000))
    blocks = list(fastavro.block_reader(io.BytesIO(out.getvalue())))
    assert len(blocks) > 5
    assert sum(b.num_records for b in blocks) == 1000


# ---- JSON ----------------------------------------------------------------------------------------

def test_json_exact_bytes():
    fmt = create("json")
    records = [rec(0, {"a": 1, "b": "é", "c": [True, None], "d": 1.5}), rec(1, "str"), rec(2, 42), rec(3, [1])]
    out, _ = write_all(fmt, records)
    assert out.getvalue() == '{"a":1,"b":"é","c":[true,null],"d":1.5}\n"str"\n42\n[1]\n'.encode()


def test_json_gzip_is_one_standard_member():
    fmt = create("json", compression="gzip", compression_level=9)
    records = json_records(2000)
    out, _ = write_all(fmt, records)
    data = out.getvalue()
    assert data[:2] == b"\x1f\x8b"
    lines = gzip.decompress(data).decode().split("\n")
    assert lines[-1] == "" and [json.loads(x) for x in lines[:-1]] == [r.value for r in records]
    # one member: decompressing the first member consumes the whole object
    import zlib
    d = zlib.decompressobj(31)
    d.decompress(data)
    assert d.eof and d.unused_data == b""


@pytest.mark.parametrize("level", [-1, 0, 1, 5, 8, 9])
def test_json_gzip_levels(level):
    fmt = create("json", compression="gzip", compression_level=level)
    out, _ = write_all(fmt, json_records(50))
    assert len(gzip.decompress(out.getvalue()).splitlines()) == 50


@pytest.mark.parametrize("value", [float("nan"), {"x": math.inf}, {"x": object()}, b"bytes"])
def test_json_unencodable_values(value):
    w = create("json").open_writer(io.BytesIO())
    with pytest.raises(EncodeError) as ei:
        w.write(rec(9, value))
    assert ei.value.offset == 9


def test_json_avro_values_like_jsonconverter():
    s = {"type": "record", "name": "P", "fields": [
        {"name": "blob", "type": "bytes"},
        {"name": "amt", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "opt", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 1}]},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ]}
    vs = value_schema(s)
    v = {"blob": b"\x01\x02", "amt": (-1234).to_bytes(2, "big", signed=True), "opt": (5).to_bytes(1, "big"),
         "ts": 1700000000000}
    out, _ = write_all(create("json"), [rec(0, v, vs)])
    assert json.loads(out.getvalue()) == {"blob": "AQI=", "amt": "+y4=", "opt": "BQ==", "ts": 1700000000000}
    out, _ = write_all(create("json", decimal_format="NUMERIC"), [rec(0, v, vs), rec(1, dict(v, opt=None), vs)])
    assert out.getvalue().decode().splitlines() == [
        '{"blob":"AQI=","amt":-12.34,"opt":0.5,"ts":1700000000000}',
        '{"blob":"AQI=","amt":-12.34,"opt":null,"ts":1700000000000}',
    ]


def test_json_keys_and_headers_views():
    fmt = create("json")
    records = [rec(0, {"a": 1}, key="k0", headers=(("h", b"x"), ("n", None))), rec(1, {"a": 2}, key=b"\x00\x01")]
    out, _ = write_all(fmt, records[:1], view=RecordView.HEADERS)
    assert out.getvalue() == b'{"headers":[{"key":"h","value":"x"},{"key":"n","value":null}]}\n'
    assert read_back(fmt, out.getvalue(), RecordView.HEADERS) == [[("h", "x"), ("n", None)]]
    out, _ = write_all(fmt, records, view=RecordView.KEYS)
    assert out.getvalue() == b'"k0"\n"AAE="\n'  # bytes keys as base64 strings, like Jackson byte[]


# ---- ByteArray -----------------------------------------------------------------------------------

def test_bytearray_exact_bytes_and_gzip():
    records = [rec(0, b"a"), rec(1, b""), rec(2, bytearray(b"c\n"))]
    out, _ = write_all(create("bytearray"), records)
    assert out.getvalue() == b"a\n\nc\n\n"
    out, _ = write_all(create("bytearray", compression="gzip", separator="||"), records)
    assert gzip.decompress(out.getvalue()) == b"a||||c\n||"


def test_bytearray_keys_view_and_no_headers_view():
    fmt = create("bytearray")
    out, _ = write_all(fmt, [rec(0, b"v", key=b"key0")], view=RecordView.KEYS)
    assert out.getvalue() == b"key0\n"
    with pytest.raises(ValueError):
        fmt.open_writer(io.BytesIO(), RecordView.HEADERS)


# ---- Parquet -------------------------------------------------------------------------------------

RICH = {
    "type": "record", "name": "Rich", "namespace": "ex", "fields": [
        {"name": "id", "type": "long"},
        {"name": "i", "type": "int"},
        {"name": "f", "type": "float"},
        {"name": "ok", "type": "boolean"},
        {"name": "b", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "amt", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3}},
        {"name": "opt", "type": ["null", "string"]},
        {"name": "xs", "type": {"type": "array", "items": "long"}},
        {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "inner", "type": {"type": "record", "name": "In", "fields": [{"name": "z", "type": "string"}]}},
        {"name": "inner2", "type": ["null", "In"]},
    ]}


def rich(i):
    return {"id": i, "i": -i, "f": 0.5, "ok": bool(i % 2), "b": b"\x00" * (i % 3), "fx": b"abcd",
            "color": "GREEN", "ts": 1700000000000 + i, "day": 19000 + i,
            "amt": (i * 1001 - 5000).to_bytes(4, "big", signed=True), "opt": None if i % 2 else "o",
            "xs": list(range(i % 4)), "m": {"k": 1.5, "n": None}, "inner": {"z": "z"},
            "inner2": None if i % 3 else {"z": str(i)}}


@pytest.mark.parametrize("codec,meta", [("snappy", "SNAPPY"), ("none", "UNCOMPRESSED"), ("gzip", "GZIP"),
                                        ("zstd", "ZSTD"), ("brotli", "BROTLI"), ("lz4_raw", "LZ4")])
def test_parquet_read_by_pyarrow_with_types_and_codec(codec, meta):
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    vs = value_schema(RICH, id=3)
    records = [rec(i, rich(i), vs) for i in range(100)]
    fmt = create("parquet", codec=codec, row_group_size=40)
    out, _ = write_all(fmt, records)
    data = out.getvalue()
    pf = pq.ParquetFile(io.BytesIO(data))
    assert pf.metadata.num_row_groups == 3
    assert pf.metadata.row_group(0).column(0).compression == meta
    assert json.loads(pf.schema_arrow.metadata[b"parquet.avro.schema"]) == RICH
    t = pq.read_table(io.BytesIO(data))
    assert t.schema.field("ts").type == pa.timestamp("ms", tz="UTC")
    assert t.schema.field("amt").type == pa.decimal128(10, 3)
    assert t.schema.field("id").nullable is False and t.schema.field("opt").nullable is True
    row = t.slice(7, 1).to_pylist()[0]
    assert row["amt"] == decimal.Decimal(7 * 1001 - 5000).scaleb(-3)
    assert row["m"] == [("k", 1.5), ("n", None)] and row["color"] == "GREEN" and row["inner2"] is None
    got = read_back(fmt, data)  # our reader: raw ints for temporal types, Decimal for decimals
    assert got[7]["ts"] == 1700000000007 and got[7]["day"] == 19007 and got[7]["xs"] == [0, 1, 2]


def test_parquet_rejects_schemaless_and_general_unions():
    w = create("parquet").open_writer(io.BytesIO())
    with pytest.raises(EncodeError, match="schema'd"):
        w.write(rec(0, {"a": 1}))
    u = {"type": "record", "name": "U", "fields": [{"name": "x", "type": ["int", "string"]}]}
    w = create("parquet").open_writer(io.BytesIO())
    with pytest.raises(EncodeError, match="union"):
        w.write(rec(0, {"x": 1}, value_schema(u)))


def test_parquet_keys_and_headers_views():
    import pyarrow.parquet as pq

    fmt = create("parquet")
    records = [rec(i, user(i), USER_VS, key=f"k{i}", headers=(("h", b"%d" % i),)) for i in range(4)]
    out, _ = write_all(fmt, records, view=RecordView.KEYS)
    assert pq.read_table(io.BytesIO(out.getvalue())).to_pylist()[1] == {"key": "k1"}
    assert read_back(fmt, out.getvalue(), RecordView.KEYS) == ["k0", "k1", "k2", "k3"]
    out, _ = write_all(fmt, records, view=RecordView.HEADERS)
    assert pq.read_table(io.BytesIO(out.getvalue())).to_pylist()[2] == {"headers": [{"key": "h", "value": "2"}]}
    assert read_back(fmt, out.getvalue(), RecordView.HEADERS)[3] == [("h", "3")]


# ---- Block-GZIP ----------------------------------------------------------------------------------

def chunks_of(w):
    return json.loads(w.side_files()[".index.json"])["chunks"]


@pytest.mark.parametrize("compression,decompress", [("gzip", gzip.decompress), ("bzip2", bz2.decompress)])
def test_blockgzip_chunks_decompress_standalone(compression, decompress):
    fmt = create("blockgzip", compression=compression, block_size=1000)
    # offsets with gaps (compaction / transaction markers)
    records = [rec(10 + 3 * i, f"record number {i:04d} " + "x" * (i % 50)) for i in range(300)]
    out, w = write_all(fmt, records)
    data = out.getvalue()
    chunks = chunks_of(w)
    assert len(chunks) > 5
    assert decompress(data).decode().splitlines() == [r.value for r in records]  # whole file is plain gzip/bz2
    pos, i = 0, 0
    for c in chunks:
        assert c["byte_offset"] == pos
        pos += c["byte_length"]
        piece = data[c["byte_offset"]:c["byte_offset"] + c["byte_length"]]
        raw = decompress(piece)
        assert len(raw) == c["byte_length_uncompressed"] <= 1000
        lines = raw.decode().splitlines()
        assert len(lines) == c["num_records"]
        assert lines == [r.value for r in records[i:i + c["num_records"]]]
        assert c["first_record_offset"] == records[i].offset  # the real Kafka offset
        assert fmt.read_chunk(data, c) == lines and fmt.read_chunk(piece, c) == lines
        i += c["num_records"]
    assert pos == len(data) and i == len(records)


def test_blockgzip_index_format_and_lookup():
    from lakesink.objects.formats.blockgzip import ChunkIndexEntry, find_chunk, parse_index

    fmt = create("blockgzip", block_size=100)
    out, w = write_all(fmt, [rec(i, "y" * 30) for i in range(10)])
    body = w.side_files()[".index.json"]
    assert body.startswith(b'{"chunks":[{"first_record_offset":0,"num_records":3,"byte_offset":0,')
    assert not body.endswith(b"\n")
    idx = parse_index(body)
    assert [c.first_record_offset for c in idx] == [0, 3, 6, 9]
    assert find_chunk(idx, 7).first_record_offset == 6 and find_chunk(idx, -1) is None
    assert isinstance(idx[0], ChunkIndexEntry)


def test_blockgzip_parses_the_deviantart_readme_example():
    from lakesink.objects.formats.blockgzip import find_chunk, parse_index

    example = """{
      "chunks": [
          {"byte_length_uncompressed": 2890, "num_records": 100, "byte_length": 275,
           "byte_offset": 0, "first_record_offset": 0},
          {"byte_length_uncompressed": 3121, "num_records": 123, "byte_length": 325,
           "byte_offset": 275, "first_record_offset": 100}
      ]
    }"""
    idx = parse_index(example)
    assert [(c.first_record_offset, c.num_records, c.byte_offset, c.byte_length) for c in idx] == [
        (0, 100, 0, 275), (100, 123, 275, 325)]
    assert find_chunk(idx, 150).byte_offset == 275


def test_blockgzip_lines_newlines_and_oversized_records():
    fmt = create("blockgzip", block_size=10)
    records = [rec(0, "x" * 50), rec(1, "ends\n"), rec(2, {"j": [1]}), rec(3, b"bytes"), rec(4, "y" * 50)]
    out, w = write_all(fmt, records)
    assert gzip.decompress(out.getvalue()) == b"x" * 50 + b'\nends\n{"j":[1]}\nbytes\n' + b"y" * 50 + b"\n"
    chunks = chunks_of(w)
    # no empty first member (DA writes one for an oversized first record): every chunk has records
    assert all(c["num_records"] > 0 for c in chunks)
    assert [c["first_record_offset"] for c in chunks] == [0, 1, 2, 3, 4]


def test_blockgzip_only_value_view():
    with pytest.raises(ValueError):
        create("blockgzip").open_writer(io.BytesIO(), RecordView.KEYS)


# ---- write_many: the batch path is write() for each record ----------------------------------------

def mixed_records(fmt_name, n, seed=0):
    """Records exercising each format's batch path and its per-record detours."""
    import random

    rnd = random.Random(seed)
    out = []
    for i in range(n):
        if fmt_name == "avro":  # runs of wire (fast path) and decoded (encode) records
            v = user(i, "x" * rnd.randrange(40))
            out.append(rec(i, v, USER_VS, wire(USER_VS, v) if (i // 7) % 2 else None))
        elif fmt_name == "parquet":
            v = user(i, "p" * rnd.randrange(40))
            out.append(rec(i, v, USER_VS, wire(USER_VS, v) if i % 3 else None))
        elif fmt_name == "json":
            v = rnd.choice([{"id": i, "s": "é" * rnd.randrange(30)}, f"s{i}", i, [i, None], {"n": i / 3}])
            out.append(rec(i, v))
        elif fmt_name == "bytearray":
            v = os.urandom(rnd.randrange(60))
            out.append(rec(i, bytearray(v) if i % 11 == 0 else v))
        else:  # blockgzip: str (some ending in a newline, some empty, some long), dicts, bytes
            k = rnd.randrange(12)
            v = {0: "ü" * rnd.randrange(90) + f"{i}\n", 1: "", 2: {"i": i}, 3: f"b{i}".encode(),
                 4: f"x{i}\n\ny"}.get(k, "ü" * rnd.randrange(90) + f"{i}")
            out.append(rec(1000 + 2 * i, v))
    return out


SPLIT_CASES = {
    **CASES,
    "avro-small-blocks": ("avro", {"sync_interval": 300}, None),
    "avro-deflate-small-blocks": ("avro", {"codec": "deflate", "sync_interval": 700}, None),
    "json-small-buffer": ("json", {"buffer_size": 300}, None),
    "json-gzip-small-buffer": ("json", {"compression": "gzip", "buffer_size": 1000}, None),
    "bytearray-small-buffer": ("bytearray", {"buffer_size": 100}, None),
    "bytearray-gzip-small-buffer": ("bytearray", {"compression": "gzip", "separator": "--", "buffer_size": 333},
                                    None),
    "bytearray-no-separator": ("bytearray", {"separator": b"", "buffer_size": 64}, None),
    "parquet-small-groups": ("parquet", {"row_group_size": 37}, None),
    "blockgzip-small": ("blockgzip", {"block_size": 700, "buffer_size": 250}, None),
    "blockgzip-tiny-blocks": ("blockgzip", {"block_size": 40, "buffer_size": 1}, None),
    "blockgzip-bz2-small": ("blockgzip", {"compression": "bzip2", "block_size": 2000, "buffer_size": 900}, None),
}


def write_in_splits(fmt, records, seed, view=RecordView.VALUE):
    """write_many over random splits (empty ones included), with some plain write() calls between."""
    import random

    rnd = random.Random(seed)
    out = RecordingOut()
    w = fmt.open_writer(out, view)
    i = 0
    while i < len(records):
        if rnd.random() < 0.1:
            w.write(records[i])
            i += 1
            continue
        j = min(len(records), i + rnd.choice([0, 1, 2, 5, 17, 64, 300, 1000]))
        w.write_many(records[i:j])
        i = j
    w.close()
    return out, w


def write_each(fmt, records, view=RecordView.VALUE):
    out = RecordingOut()
    w = fmt.open_writer(out, view)
    for r in records:
        w.write(r)
    w.close()
    return out, w


def avro_sync(data: bytes) -> bytes:
    return fastavro.block_reader(io.BytesIO(data))._header["sync"]


def assert_same_output(fmt, a: RecordingOut, wa, b: RecordingOut, wb, view=RecordView.VALUE):
    """``b`` (write_many) is what ``a`` (write per record) is: same records, same blocks / row groups /
    chunks, and for deterministic formats the same bytes pushed to ``out`` in the same writes."""
    assert wa.record_count == wb.record_count
    assert wa.bytes_written == a.total and wb.bytes_written == b.total
    da, db = a.buf.getvalue(), b.buf.getvalue()
    assert read_back(fmt, da, view) == read_back(fmt, db, view)
    if fmt.name == "avro":  # identical but for the random sync marker: same blocks
        assert da.replace(avro_sync(da), avro_sync(db)) == db
        assert [x.num_records for x in fastavro.block_reader(io.BytesIO(da))] == \
               [x.num_records for x in fastavro.block_reader(io.BytesIO(db))]
    elif fmt.name == "parquet":  # same row groups
        import pyarrow.parquet as pq

        ma, mb = pq.ParquetFile(io.BytesIO(da)).metadata, pq.ParquetFile(io.BytesIO(db)).metadata
        assert [ma.row_group(g).num_rows for g in range(ma.num_row_groups)] == \
               [mb.row_group(g).num_rows for g in range(mb.num_row_groups)]
    else:  # deterministic formats: byte-identical, pushed in the same pieces, index included
        assert da == db
        assert a.sizes == b.sizes
        assert wa.side_files() == wb.side_files()


@pytest.mark.parametrize("case_name", sorted(SPLIT_CASES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_write_many_in_any_split_equals_write(case_name, seed):
    name, opts, make = SPLIT_CASES[case_name]
    fmt = create(name, **opts)
    records = make(1500) if make is not None else mixed_records(name, 1500, seed)
    one, w1 = write_each(fmt, records)
    many, w2 = write_in_splits(fmt, records, seed)
    assert w2.record_count == len(records)
    assert_same_output(fmt, one, w1, many, w2)
    if fmt.name == "blockgzip" and opts.get("block_size", 1 << 30) < 5000:
        assert len(json.loads(w2.side_files()[".index.json"])["chunks"]) > 3


def test_write_many_whole_object_in_one_call(case):
    fmt, make = case
    records = make(700)
    one, w1 = write_each(fmt, records)
    out = RecordingOut()
    w2 = fmt.open_writer(out)
    w2.write_many(records)
    w2.write_many([])
    w2.close()
    assert_same_output(fmt, one, w1, out, w2)


@pytest.mark.parametrize("view", [RecordView.KEYS, RecordView.HEADERS])
@pytest.mark.parametrize("name", ["avro", "json", "bytearray", "parquet"])
def test_write_many_keys_and_headers_views(name, view):
    fmt = create(name)
    if not fmt.supports_view(view):
        return
    records = [rec(i, user(i), USER_VS, key=(b"k%d" if name == "bytearray" else "k%d") % i,
                   headers=(("h", b"%d" % i), ("n", None))) for i in range(300)]
    one, w1 = write_each(fmt, records, view=view)
    many, w2 = write_in_splits(fmt, records, 5, view=view)
    assert_same_output(fmt, one, w1, many, w2, view)


def test_write_many_bad_record_in_the_middle_names_it_and_writer_survives(case):
    fmt, make = case
    good = make(10)
    value, vs = bad_value_for(fmt.name)
    bad = SinkRecord("orders", 3, 1234, None, b"k", value, (("h", b"v"),), vs, None)
    out = RecordingOut()
    w = fmt.open_writer(out)
    with pytest.raises(EncodeError) as ei:
        w.write_many(good[:5] + [bad] + good[5:])
    assert (ei.value.topic, ei.value.partition, ei.value.offset) == ("orders", 3, 1234)
    assert w.record_count == 5  # the records before the bad one are written, none after it
    w.write_many(good[5:])
    w.close()
    assert w.record_count == 10
    ref, wref = write_each(fmt, good)
    assert_same_output(fmt, ref, wref, out, w)


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_avro_write_many_encode_failure_mid_batch(codec):
    """A schema'd value fastavro cannot encode (the encode path): named, the partial record dropped."""
    fmt = create("avro", codec=codec, sync_interval=200)
    good = avro_records(40)
    bad = rec(777, dict(user(1), id="not-a-long"), USER_VS)
    out = io.BytesIO()
    w = fmt.open_writer(out)
    with pytest.raises(EncodeError) as ei:
        w.write_many(good[:23] + [bad] + good[23:])
    assert ei.value.offset == 777 and w.record_count == 23
    w.write_many(good[23:])
    w.close()
    assert read_back(fmt, out.getvalue()) == expected(good)


def test_parquet_arrow_conversion_failure_names_the_record():
    """A value Avro validation accepts but Arrow cannot convert (decimal wider than its precision)
    is found when its row group is converted: named, dropped, the other rows kept; write_many and
    write() fail on the same call with the same result."""
    s = {"type": "record", "name": "D", "fields": [
        {"name": "i", "type": "long"},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}}]}
    vs = value_schema(s, id=11)
    records = [rec(i, {"i": i, "d": (123456 if i == 6 else i).to_bytes(4, "big", signed=True)}, vs)
               for i in range(10)]
    fmt = create("parquet", row_group_size=4)

    invalid = rec(99, {"i": "not-a-long", "d": b"\x01"}, vs)  # fails validation, rejected at once
    out1 = RecordingOut()
    w1 = fmt.open_writer(out1)
    failed = []
    for r in records[:5] + [invalid] + records[5:]:
        try:
            w1.write(r)
        except EncodeError as e:
            failed.append((r.offset, e.offset))
    w1.close()
    assert failed == [(99, 99), (7, 6)]  # write(record 7) completes the row group holding record 6

    out2 = RecordingOut()
    w2 = fmt.open_writer(out2)
    with pytest.raises(EncodeError) as ei:
        w2.write_many(records[:5] + [invalid] + records[5:])
    assert ei.value.offset == 99 and w2.record_count == 5
    with pytest.raises(EncodeError, match="Parquet column types") as ei:
        w2.write_many(records[5:])
    assert ei.value.offset == 6 and w2.record_count == 7  # 0..7 accepted, 6 dropped
    w2.write_many(records[8:])
    w2.close()
    assert [r["i"] for r in read_back(fmt, out2.buf.getvalue())] == [0, 1, 2, 3, 4, 5, 7, 8, 9]
    assert_same_output(fmt, out1, w1, out2, w2)


def test_write_many_default_loops_over_write():
    from lakesink.objects.formats.base import FormatWriter

    class Recording(FormatWriter):
        def __init__(self):
            super().__init__(io.BytesIO(), RecordView.VALUE)
            self.seen = []

        def write(self, record):
            self.seen.append(record.offset)

        def _finish(self):
            pass

    w = Recording()
    w.write_many(bytes_records(5))
    assert w.seen == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("name,opts,value", [
    ("bytearray", {"buffer_size": 50}, b"123456789"),  # 9 + separator: the buffer fills exactly
    ("bytearray", {"buffer_size": 50, "compression": "gzip"}, b"123456789"),
    ("json", {"buffer_size": 45}, "1234567"),  # '"1234567"' is 9 characters
    ("json", {"buffer_size": 45, "compression": "gzip"}, "1234567"),
    ("blockgzip", {"block_size": 50, "buffer_size": 30}, "123456789"),  # 10 characters a line
    ("blockgzip", {"block_size": 50, "buffer_size": 30}, "12345678\n"),
])
def test_write_many_exact_thresholds(name, opts, value):
    """Buffers and chunks that fill exactly at a record boundary: pushed / ended at the same record."""
    fmt = create(name, **opts)
    records = [rec(i, value) for i in range(103)]
    one = RecordingOut()
    w1 = fmt.open_writer(one)
    state = []  # after each record: text waiting in the writer's buffer, bytes handed to the sink
    for r in records:
        w1.write(r)
        state.append((w1._pending, w1._sink.position))
    w1.close()
    for split in (1, 4, 5, 6, 50, 103):
        out = RecordingOut()
        w2 = fmt.open_writer(out)
        for i in range(0, len(records), split):
            w2.write_many(records[i:i + split])
            j = min(i + split, len(records))
            assert (w2._pending, w2._sink.position) == state[j - 1], f"after record {j - 1}"
        w2.close()
        assert_same_output(fmt, one, w1, out, w2)


def test_parquet_trusts_bare_avro_of_its_schema_only():
    """raw_avro with the file's fingerprint skips validation (the value was decoded from those
    bytes); raw_avro of another schema (a projected record) or none is validated as before."""
    fixed = value_schema(USER)
    good = [SinkRecord("t", 0, i, 1, b"k", user(i), (), fixed, bare_avro(user(i)), None, {}, fixed) for i in range(5)]
    plain = [dataclasses.replace(r, raw_avro=None) for r in good]
    a, _ = write_all(create("parquet"), good)
    b, _ = write_all(create("parquet"), plain)
    assert a.getvalue() == b.getvalue()
    bad_value = dict(user(9), id="not a long")
    for ra in (None, value_schema(dict(USER, name="Other"))):
        bad = SinkRecord("t", 0, 9, 1, b"k", bad_value, (), fixed, bare_avro(user(9)), None, {}, ra)
        for many in (False, True):
            w = create("parquet").open_writer(io.BytesIO())
            w.write(good[0])
            with pytest.raises(EncodeError, match="does not match"):
                w.write_many([bad]) if many else w.write(bad)


@pytest.mark.parametrize("view", [RecordView.KEYS, RecordView.HEADERS])
def test_avro_write_many_view_bad_record_mid_batch(view):
    """A null key / no headers in a KEYS/HEADERS write_many run: named, earlier records kept."""
    fmt = create("avro", sync_interval=200)
    good = [rec(i, user(i), USER_VS, key="k%d" % i, headers=(("h", b"%d" % i),)) for i in range(30)]
    bad = SinkRecord("t", 0, 555, 1, None, user(0), (), USER_VS, None)
    ref, wref = write_each(fmt, good, view=view)
    out = RecordingOut()
    w = fmt.open_writer(out, view)
    with pytest.raises(EncodeError) as ei:
        w.write_many(good[:12] + [bad] + good[12:])
    assert ei.value.offset == 555 and w.record_count == 12
    w.write_many(good[12:])
    w.close()
    assert_same_output(fmt, ref, wref, out, w, view)
