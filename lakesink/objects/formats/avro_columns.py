"""Column readers of the Avro side files lakesink writes (``.keys`` of bytes/string keys, ``.headers``): their
schemas are fixed and simple, so each block is scanned with numpy into Arrow columns
(:mod:`~lakesink.objects.formats.avro_scan`), and a block the scan declines is read datum by datum here -- both far
faster than fastavro's per-datum reader, which builds a dict per header. (Split from
:mod:`lakesink.objects.formats.avro`, which re-exports :func:`read_bytes_array` and :func:`read_headers_arrays`.)"""
from __future__ import annotations

from typing import Any, BinaryIO

import fastavro


def _is_headers_schema(schema: Any) -> bool:
    """Whether ``schema`` is lakesink's headers schema (``lakesink.objects.formats.avro.HEADERS_SCHEMA``, names aside)."""
    if not isinstance(schema, dict) or schema.get("type") != "array" or not isinstance(schema.get("items"), dict):
        return False
    items = schema["items"]
    fields = items.get("fields") if items.get("type") == "record" else None
    return isinstance(fields, list) and [(f.get("name"), f.get("type")) for f in fields] == \
        [("key", "string"), ("value", ["null", "string"])]


def read_bytes_array(stream: BinaryIO) -> Any:
    """The datums of an Avro file whose writer schema is ``"bytes"`` or ``"string"``, as one pyarrow binary array
    of their raw bytes (a string's UTF-8); None for any other schema (read it with :meth:`AvroFormat.read`).
    Each block is scanned with numpy (:mod:`~lakesink.objects.formats.avro_scan`); a block the scan declines is
    read datum by datum, which names what is wrong with it."""
    import pyarrow as pa

    from lakesink.objects.formats.avro_scan import bytes_block

    blocks = fastavro.block_reader(stream)
    if blocks.writer_schema not in ("bytes", "string", {"type": "bytes"}, {"type": "string"}):
        return None
    parts = []
    for block in blocks:
        data = block.bytes_.getvalue()
        arr = bytes_block(data, block.num_records)
        parts.append(arr if arr is not None else pa.array(_bytes_datums(data, block.num_records), pa.binary()))
    return pa.concat_arrays(parts) if parts else pa.array([], pa.binary())


def _bytes_datums(data: bytes, count: int) -> list[bytes]:
    """``count`` bytes/string datums of one block, one at a time."""
    out: list[bytes] = []
    append = out.append
    pos, end = 0, len(data)
    for _ in range(count):
        v, pos = _bytes_at(data, pos, end, "datum")
        append(v)
    return out


def read_long(data: bytes, p: int) -> tuple[int, int]:
    """The Avro long (zigzag varint) at ``data[p:]`` and the position after it (IndexError past the end)."""
    b = data[p]
    p += 1
    n = b & 0x7F
    shift = 7
    while b & 0x80:
        b = data[p]
        p += 1
        n |= (b & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1), p


def _bytes_at(data: bytes, pos: int, end: int, what: str) -> tuple[bytes, int]:
    """The Avro bytes/string at ``data[pos:]`` (a length, then that many bytes) and the position after it."""
    b = data[pos]
    if b < 0x80:  # a one-byte length (< 64): the common case, inline
        n = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        n, pos = read_long(data, pos)
    if n < 0 or pos + n > end:
        raise ValueError(f"{what} length {n} past the block's end")
    return data[pos:pos + n], pos + n


def read_headers_arrays(stream: BinaryIO) -> tuple[Any, Any, Any] | None:
    """The headers of an Avro file with lakesink's headers schema, flattened: ``offsets`` (a numpy int64 array:
    record i's headers are ``keys[offsets[i]:offsets[i + 1]]`` and the same of ``values``), ``keys`` (a pyarrow
    binary array of UTF-8, unchecked) and ``values`` (binary, null for a null value). None for any other schema
    (read it with :meth:`AvroFormat.read`). Blocks are scanned as :func:`read_bytes_array` scans them."""
    import numpy as np
    import pyarrow as pa

    from lakesink.objects.formats.avro_scan import POSITIONS_FROM_BYTES, headers_block, headers_positions

    blocks = fastavro.block_reader(stream)
    if not _is_headers_schema(blocks.writer_schema):
        return None
    offsets, keys, values = [np.zeros(1, np.int64)], [], []
    base = 0
    for block in blocks:
        data = block.bytes_.getvalue()
        n = block.num_records
        cols = headers_positions(data, n) if len(data) >= POSITIONS_FROM_BYTES * n else headers_block(data, n)
        if cols is None:
            o, k, v = _headers_datums(data, block.num_records)
            cols = np.asarray(o, np.int64), pa.array(k, pa.binary()), pa.array(v, pa.binary())
        offsets.append(cols[0][1:] + base)
        base += int(cols[0][-1])
        keys.append(cols[1])
        values.append(cols[2])
    empty = pa.array([], pa.binary())
    return (np.concatenate(offsets), pa.concat_arrays(keys) if keys else empty,
            pa.concat_arrays(values) if values else empty)


def _headers_datums(data: bytes, count: int) -> tuple[list[int], list[bytes], list[bytes | None]]:
    """``count`` headers datums of one block, one at a time: (offsets from 0, keys, values)."""
    offsets = [0]
    keys: list[bytes] = []
    values: list[bytes | None] = []
    kadd, vadd, oadd = keys.append, values.append, offsets.append
    end = len(data)
    pos = 0
    for _ in range(count):
        while True:  # array blocks: a count (negative: followed by the block's byte size), items; 0 ends it
            n, pos = read_long(data, pos)
            if n == 0:
                break
            if n < 0:
                n = -n
                _size, pos = read_long(data, pos)
            for _i in range(n):
                k, pos = _bytes_at(data, pos, end, "header key")
                kadd(k)
                branch = data[pos]
                pos += 1
                if branch == 2:  # zigzag 1: the string branch
                    v, pos = _bytes_at(data, pos, end, "header value")
                    vadd(v)
                elif branch == 0:
                    vadd(None)
                else:
                    raise ValueError(f"header value union branch byte {branch} (expected 0 or 2)")
        oadd(len(keys))
    return offsets, keys, values
