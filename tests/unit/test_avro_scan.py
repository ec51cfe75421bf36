"""The numpy scan of the side files' Avro blocks (lakesink.objects.formats.avro_scan): the datums fastavro
reads, for every length and count encoding; None for a block that is not exactly its datums (then the
per-datum reader takes it), never a different answer."""
from __future__ import annotations

import io
import random

import fastavro
import pytest
from support.avro_bytes import zz

from lakesink.objects.formats.avro import HEADERS_SCHEMA
from lakesink.objects.formats.avro_scan import MAX_ITEMS, bytes_block, headers_block, headers_positions

#: the two readers of a headers block: the numpy scan and the walk (avro_columns picks one by bytes per record)
HEADER_READERS = pytest.mark.parametrize("read_headers", [headers_block, headers_positions])


def blocks(schema, datums) -> list[tuple[bytes, int]]:
    """The (uncompressed body, datum count) of each block fastavro writes for ``datums``."""
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), datums, sync_interval=4000)
    buf.seek(0)
    return [(b.bytes_.getvalue(), b.num_records) for b in fastavro.block_reader(buf)]


#: the headers schema with bytes for strings (the same encoding): the scan leaves UTF-8 checks to its caller
HEADERS_AS_BYTES = {"type": "array", "items": {"type": "record", "name": "H", "fields": [
    {"name": "key", "type": "bytes"}, {"name": "value", "type": ["null", "bytes"]}]}}


def fastavro_datums(schema, body: bytes, count: int) -> list | None:
    """``count`` datums read from ``body`` by fastavro, or None unless they fill it exactly."""
    parsed = fastavro.parse_schema(HEADERS_AS_BYTES if schema == HEADERS_SCHEMA else schema)
    stream = io.BytesIO(body)
    try:
        out = [fastavro.schemaless_reader(stream, parsed, None) for _ in range(count)]
    except Exception:  # noqa: BLE001 - fastavro ends a bad buffer in many ways
        return None
    return out if stream.tell() == len(body) else None


def as_headers(cols) -> list[list[tuple[str, str | None]]]:
    offsets, keys, values = cols
    keys, values = keys.to_pylist(), values.to_pylist()
    return [[(keys[j].decode(), None if values[j] is None else values[j].decode())
             for j in range(offsets[i], offsets[i + 1])] for i in range(len(offsets) - 1)]


def from_fastavro(datums) -> list[list[tuple[str, str | None]]]:
    return [[(h["key"].decode(), None if h["value"] is None else h["value"].decode()) for h in d] for d in datums]


KEYS = [b"", b"k", b"\x00\xff" * 40, b"y" * 9000] + [b"key-%d" % i for i in range(3000)]


def test_bytes_blocks_are_the_datums_fastavro_reads():
    got = []
    for body, n in blocks("bytes", KEYS):
        arr = bytes_block(body, n)
        assert arr is not None  # the scan took it: no fallback
        got += arr.to_pylist()
    assert got == KEYS


@HEADER_READERS
def test_headers_blocks_are_the_datums_fastavro_reads(read_headers):
    rnd = random.Random(7)
    headers = [[], [("h", "1"), ("h", "dup"), ("empty", ""), ("null", None)], [("ké" * 40, "v" * 9000)],
               [(f"n{j}", f"{j}") for j in range(MAX_ITEMS)]]
    headers += [[(f"k{rnd.randrange(99)}", rnd.choice([None, "", "x" * rnd.randrange(200)]))
                 for _ in range(rnd.randrange(4))] for _ in range(3000)]
    datums = [[{"key": k, "value": v} for k, v in hs] for hs in headers]
    got = []
    for body, n in blocks(HEADERS_SCHEMA, datums):
        cols = read_headers(body, n)
        assert cols is not None
        got += as_headers(cols)
    assert got == headers


@HEADER_READERS
def test_non_canonical_varints_are_read_as_fastavro_reads_them(read_headers):
    # a length of 1 padded to three bytes, and a count of 1 padded to ten
    body = b"\x82\x80\x00" + b"a"
    assert fastavro_datums("bytes", body, 1) == [b"a"]
    assert bytes_block(body, 1).to_pylist() == [b"a"]
    item = zz(1) + b"k" + zz(0)
    body = b"\x82" + b"\x80" * 8 + b"\x00" + item + zz(0)
    assert from_fastavro(fastavro_datums(HEADERS_SCHEMA, body, 1)) == [[("k", None)]]
    assert as_headers(read_headers(body, 1)) == [[("k", None)]]


def test_shapes_the_scan_does_not_take_are_declined():
    item = zz(1) + b"a" + zz(1) + zz(1) + b"1"
    split = zz(-2) + zz(2 * len(item)) + item + item + zz(0)  # a block with its byte size
    two_blocks = zz(1) + item + zz(1) + item + zz(0)
    too_many = zz(MAX_ITEMS + 1) + item * (MAX_ITEMS + 1) + zz(0)
    for body in (split, two_blocks, too_many):
        want = fastavro_datums(HEADERS_SCHEMA, body, 1)
        assert want is not None  # valid Avro ...
        assert headers_block(body, 1) is None  # ... read datum by datum instead
        assert as_headers(headers_positions(body, 1)) == from_fastavro(want)  # the walk takes them


@pytest.mark.parametrize("body, count", [
    (zz(3) + b"abc" + zz(10) + b"ab", 2),  # a length past the end
    (zz(3) + b"abc", 2),  # fewer datums than the count
    (zz(3) + b"abc" + b"\x00\x00", 1),  # bytes after the last datum
    (zz(-1), 1),  # a negative length
    (b"\xff" * 11 + b"\x00", 1),  # a varint over 64 bits
    (b"", 1),
])
def test_bad_bytes_blocks_are_declined(body, count):
    assert bytes_block(body, count) is None


@HEADER_READERS
def test_bad_headers_blocks_are_declined(read_headers):
    for body in (zz(1) + zz(1) + b"a" + b"\x04" + zz(0),  # union branch 2
                 zz(1) + zz(1) + b"a" + zz(0),  # no end of the array
                 zz(1) + zz(5) + b"ab",  # key past the end
                 zz(2) + zz(1) + b"a" + zz(0) + zz(0)):  # one item of two
        assert fastavro_datums(HEADERS_SCHEMA, body, 1) is None
        assert read_headers(body, 1) is None


@pytest.mark.parametrize("seed", range(4))
def test_mutated_blocks_are_declined_or_read_exactly_as_fastavro_reads_them(seed):
    rnd = random.Random(seed)
    keys = [bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 1, 5, 70]))) for _ in range(12)]
    headers = [[{"key": f"k{j}", "value": rnd.choice([None, "", "v" * rnd.randrange(90)])}
                for j in range(rnd.randrange(3))] for _ in range(12)]
    (kbody, kn), = blocks("bytes", keys)
    (hbody, hn), = blocks(HEADERS_SCHEMA, headers)
    taken = 0
    for _ in range(600):
        for schema, body, n, scan in (("bytes", kbody, kn, bytes_block), (HEADERS_SCHEMA, hbody, hn, headers_block),
                                      (HEADERS_SCHEMA, hbody, hn, headers_positions)):
            b = bytearray(body)
            for _ in range(rnd.randrange(1, 3)):
                b[rnd.randrange(len(b))] = rnd.choice([0, 1, 2, 3, 0x7F, 0x80, 0xFF, rnd.randrange(256)])
            if rnd.random() < 0.2:
                b = b[:rnd.randrange(len(b))]
            count = n + rnd.choice([0, 0, 0, -1, 1])
            got = scan(bytes(b), count)
            want = fastavro_datums(schema, bytes(b), count)
            if got is None:
                continue
            taken += 1
            assert want is not None, bytes(b)
            if schema == "bytes":
                assert got.to_pylist() == want
            else:
                offsets, hkeys, hvalues = got
                assert [list(zip(hkeys.to_pylist()[a:b], hvalues.to_pylist()[a:b]))
                        for a, b in zip(offsets[:-1], offsets[1:])] == \
                    [[(h["key"], h["value"]) for h in d] for d in want]
    assert taken > 50  # the mutations that keep a block valid are read by the scan, not only declined

