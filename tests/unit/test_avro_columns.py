"""The Avro side-file column readers (lakesink.objects.formats.avro.read_bytes_array / read_headers_arrays):
the same datums fastavro reads, for every codec, multi-byte lengths and counts, negative-count array blocks;
None for a schema they do not read; a truncated block is an error, never a short column."""
from __future__ import annotations

import io

import fastavro
import pytest
from support.avro_bytes import zz

from lakesink.objects.formats.avro import HEADERS_SCHEMA, read_bytes_array, read_headers_arrays


def read_bytes_column(stream):
    """read_bytes_array as a list (None for another schema)."""
    arr = read_bytes_array(stream)
    return None if arr is None else arr.to_pylist()


def read_headers_columns(stream):
    """read_headers_arrays as lists (None for another schema)."""
    cols = read_headers_arrays(stream)
    return None if cols is None else (cols[0].tolist(), cols[1].to_pylist(), cols[2].to_pylist())


def avro_file(schema, datums, codec="null") -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), datums, codec=codec, sync_interval=2000)
    return buf.getvalue()


KEYS = [b"", b"k", b"\x00\xff" * 40, b"x" * 70_000] + [b"key-%d" % i for i in range(500)]


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "bzip2", "xz"])
def test_bytes_and_string_columns_match_fastavro(codec):
    assert read_bytes_column(io.BytesIO(avro_file("bytes", KEYS, codec))) == KEYS
    texts = ["", "clé ✓", "y" * 100] + [f"s{i}" for i in range(300)]
    assert read_bytes_column(io.BytesIO(avro_file("string", texts, codec))) == [t.encode() for t in texts]


def flat(headers):
    offsets, keys, values = [0], [], []
    for hs in headers:
        for k, v in hs:
            keys.append(k.encode())
            values.append(v)
        offsets.append(len(keys))
    return offsets, keys, values


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy"])
def test_headers_columns_match_fastavro(codec):
    headers = [[], [("h", "1"), ("h", "dup"), ("empty", ""), ("null", None)], [("ké" * 40, "v" * 200)],
               [(f"n{j}", f"{j}") for j in range(100)]] + [[("i", str(i))] for i in range(400)]
    data = avro_file(HEADERS_SCHEMA, [[{"key": k, "value": v} for k, v in hs] for hs in headers], codec)
    expected = flat([[(k, None if v is None else v.encode()) for k, v in hs] for hs in headers])
    assert read_headers_columns(io.BytesIO(data)) == expected


@pytest.mark.parametrize("per_record", [1, 60])
def test_small_and_large_headers_take_their_reader_and_match_fastavro(per_record, monkeypatch):
    """Blocks of small headers are scanned with numpy, blocks of large ones walked (fewer operations per byte):
    each reader is the one used, and both give fastavro's headers."""
    from lakesink.objects.formats import avro_scan

    used = []
    for name in ("headers_block", "headers_positions"):
        real = getattr(avro_scan, name)
        monkeypatch.setattr(avro_scan, name, lambda body, n, real=real, name=name: used.append(name) or real(body, n))
    headers = [[("trace", "t" * per_record), ("n", str(i))] for i in range(500)]
    data = avro_file(HEADERS_SCHEMA, [[{"key": k, "value": v} for k, v in hs] for hs in headers], "null")
    expected = flat([[(k, v.encode()) for k, v in hs] for hs in headers])
    assert read_headers_columns(io.BytesIO(data)) == expected
    assert set(used) == {"headers_positions" if per_record > 24 else "headers_block"}


def with_block(schema, count: int, body: bytes) -> bytes:
    """An Avro file of ``schema`` with one hand-made block of ``count`` datums (``body``, uncompressed)."""
    head = avro_file(schema, [])
    return head + zz(count) + zz(len(body)) + body + head[-16:]


def test_negative_count_array_blocks():
    # Avro lets a writer split an array into blocks, a negative count followed by the block's size in bytes
    item = zz(1) + b"a" + zz(1) + zz(1) + b"1"  # {"key": "a", "value": "1"}
    datum = zz(-2) + zz(2 * len(item)) + item + item + zz(1) + item + zz(0)
    data = with_block(HEADERS_SCHEMA, 1, datum)
    assert next(fastavro.reader(io.BytesIO(data))) == [{"key": "a", "value": "1"}] * 3
    assert read_headers_columns(io.BytesIO(data)) == ([0, 3], [b"a"] * 3, [b"1"] * 3)


def test_other_schemas_are_not_read():
    assert read_bytes_column(io.BytesIO(avro_file("long", [1, 2]))) is None
    assert read_bytes_column(io.BytesIO(avro_file(["null", "bytes"], [None, b"x"]))) is None
    other = {"type": "array", "items": {"type": "record", "name": "H", "fields": [
        {"name": "key", "type": "string"}, {"name": "value", "type": "string"}]}}  # Confluent's: value required
    assert read_headers_columns(io.BytesIO(avro_file(other, [[{"key": "a", "value": "b"}]]))) is None


def test_a_truncated_block_is_an_error():
    # the block says 2 datums but holds one and a length running past its end: an error, not a short column
    with pytest.raises((ValueError, IndexError)):
        read_bytes_column(io.BytesIO(with_block("bytes", 2, zz(3) + b"abc" + zz(10) + b"ab")))
    with pytest.raises((ValueError, IndexError)):
        read_headers_columns(io.BytesIO(with_block(HEADERS_SCHEMA, 1, zz(1) + zz(5) + b"ab")))
