"""Avro container blocks of the side files' schemas, decoded with numpy instead of a loop per datum.

A block's datums are concatenated with no boundaries: finding datum i means reading datums 0..i-1, which
in Python is a loop per datum decoding every field (most of ``read_archive``'s CPU for an object with keys
and headers). Here every byte position of the block is treated as a possible datum start at once:
``step[p]``, the position just after a datum that would start at ``p``, is computed for all ``p`` together
with numpy, so the chain ``0 → step[0] → step[step[0]] → …`` costs one lookup per datum; the fields of the
datums on it are then gathered a column at a time. A position where no datum can start steps to a poison
position; a chain that meets it, or that does not end exactly at the block's end, is declined (None) and
the caller reads that block datum by datum, naming what is wrong with it.

Two schemas are scanned: a ``bytes``/``string`` datum (the ``.keys`` side file of bytes or string keys) and
lakesink's headers schema, an array of ``{key: string, value: [null, string]}`` records (``.headers``).
A headers array written in more than one block, or with more than :data:`MAX_ITEMS` headers in one record,
is declined: fastavro and Confluent's writers emit one block per array, and records rarely carry that many.

The numpy scan costs per byte of the block (~0.09 µs a byte here), a walk datum by datum per header. For headers
of a few bytes the scan is cheaper; from :data:`POSITIONS_FROM_BYTES` bytes per record on (two headers of ~25 B:
4.1-4.7 µs a record scanned, 2.3-2.9 walked: ``bench/headers_read.py``), :func:`headers_positions` walks the datums in Python, noting only
where each key and value starts and how long it is (no object per header), and the spans are gathered into Arrow
columns with numpy as the scan gathers them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MAX_ITEMS", "POSITIONS_FROM_BYTES", "bytes_block", "headers_block", "headers_positions"]

#: headers per record the scan takes (bits of the binary lifting over items); a block with more is declined
MAX_ITEMS = 127
_LIFT_BITS = MAX_ITEMS.bit_length()
# a varint is at most 10 bytes (64 bits); lengths and counts beyond the block are never valid
_MAX_VARINT = 10


class _Varints:
    """The zigzag varint that would start at each position of ``data`` (two 0xFF bytes padded on, so a read
    at the block's end or one past it is an unterminated varint): ``value`` (clipped to -1..end + 1: a
    length or count outside the block is invalid whatever its size) and byte ``length``; ``ok`` where the
    varint is terminated within 10 bytes. Positions are int32 (a block is far below 2 GiB): half the memory
    traffic of int64 in the gathers that follow."""

    def __init__(self, block: bytes):
        n = len(block)
        data = np.frombuffer(block + b"\xff\xff", np.uint8)
        self.data, self.end, self.poison = data, n, n + 1
        size = n + 2
        at = np.arange(size, dtype=np.int32)
        # the first terminating byte (high bit clear) at or after each position
        term = np.where(data < 0x80, at, np.int32(size))
        nxt = np.minimum.accumulate(term[::-1])[::-1]
        length = nxt - at + 1
        ok = (nxt < size) & (length <= _MAX_VARINT)
        # a 10th byte may carry only the 64th bit (a longer value is no Avro long)
        tenth = np.nonzero(ok & (length == _MAX_VARINT))[0]
        ok[tenth[data[tenth + _MAX_VARINT - 1] > 1]] = False
        raw = data & 0x7F
        value = ((raw >> 1) ^ -(raw & 1).astype(np.int8)).astype(np.int32)  # one-byte varints, zigzagged
        multi = np.nonzero(ok & (length > 1))[0]
        if len(multi):
            mlen = length[multi]
            acc = raw[multi].astype(np.uint64)
            for k in range(1, _MAX_VARINT):
                more = mlen > k
                if not more.any():
                    break
                acc[more] |= raw[multi[more] + k].astype(np.uint64) << np.uint64(7 * k)
            big = (acc >> np.uint64(1)).astype(np.int64) ^ -(acc & np.uint64(1)).astype(np.int64)
            value[multi] = np.clip(big, -1, n + 1)
        self.value, self.length, self.ok = value, length, ok
        self.at = at
        # a bytes/string at each position: its first byte, byte count and the position after it (poison
        # where the length is not a varint, is negative or runs past the block)
        start = at + length
        count = np.where(ok & (value >= 0), value, np.int32(0))
        after = start + count
        after[~ok | (value < 0) | (after > n)] = self.poison
        self.start, self.count, self.after = start, count, after


#: bytes per record from which :func:`headers_positions` is the cheaper reader of a headers block
POSITIONS_FROM_BYTES = 24


def _long(data: bytes, p: int) -> tuple[int, int]:
    """The zigzag varint at ``data[p:]`` and the position after it (IndexError past the end; ValueError past 10
    bytes)."""
    n = shift = 0
    for k in range(_MAX_VARINT):
        b = data[p + k]
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (n >> 1) ^ -(n & 1), p + k + 1
    raise ValueError("a varint longer than 10 bytes")


def headers_positions(block: bytes, count: int) -> tuple[np.ndarray, Any, Any] | None:
    """:func:`headers_block`'s columns of one block, read by walking its ``count`` datums in Python (see the module
    docstring), or None when the block is not exactly ``count`` headers datums (the caller reads it datum by datum,
    naming the fault)."""
    starts_k: list[int] = []
    lens_k: list[int] = []
    starts_v: list[int] = []
    lens_v: list[int] = []
    offsets = [0]
    ka, kla, va, vla, oa = starts_k.append, lens_k.append, starts_v.append, lens_v.append, offsets.append
    data, pos = block, 0
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                n, pos = _long(data, pos)
            while n:
                if n < 0:  # a negative count is followed by the array block's byte size
                    n = -n
                    _size, pos = _long(data, pos)
                for _ in range(n):
                    b = data[pos]
                    if b < 0x80 and not b & 1:  # a one-byte, non-negative length: inline
                        length, pos = b >> 1, pos + 1
                    else:
                        length, pos = _long(data, pos)
                        if length < 0:
                            return None
                    ka(pos)
                    kla(length)
                    pos += length
                    branch = data[pos]
                    pos += 1
                    if branch == 2:  # the union's string branch; its length read inline as the key's (this loop
                        # runs per header: no call per field)
                        b = data[pos]
                        if b < 0x80 and not b & 1:
                            length, pos = b >> 1, pos + 1
                        else:
                            length, pos = _long(data, pos)
                            if length < 0:
                                return None
                        va(pos)
                        vla(length)
                        pos += length
                    elif branch == 0:
                        va(pos)
                        vla(-1)
                    else:
                        return None
                b = data[pos]
                if b < 0x80:
                    n, pos = (b >> 1) ^ -(b & 1), pos + 1
                else:
                    n, pos = _long(data, pos)
            oa(len(starts_k))
    except (IndexError, ValueError):
        return None
    if pos != len(data):
        return None
    raw = np.frombuffer(data, np.uint8)
    vlen = np.asarray(lens_v, np.int64)
    valid = vlen >= 0
    keys = _binary(raw, np.asarray(starts_k, np.int64), np.asarray(lens_k, np.int64))
    values = _binary(raw, np.asarray(starts_v, np.int64), np.where(valid, vlen, 0), valid)
    if keys is None or values is None:
        return None
    return np.asarray(offsets, np.int64), keys, values


def _chain(step: np.ndarray, count: int, end: int) -> np.ndarray | None:
    """The start positions of ``count`` datums, the first at 0, each the ``step`` of the one before, or None
    unless the last ends exactly at ``end``. ``step`` maps the block's end and the poison position to the
    poison position, which maps to itself, so a chain that ends early or meets a bad datum ends there.

    The one loop per datum left: a memoryview lookup (tens of nanoseconds), cheaper here than unrolling the
    chain by pointer doubling, which costs log2(count) gathers over the whole block."""
    starts = np.empty(count, np.int32)
    out = memoryview(starts)
    nxt = memoryview(step)
    p = 0
    for i in range(count):
        out[i] = p
        p = nxt[p]
    return starts if p == end else None


def _binary(data: np.ndarray, starts: np.ndarray, counts: np.ndarray, valid: np.ndarray | None = None) -> Any:
    """A pyarrow binary array of the spans ``data[starts[i]:starts[i] + counts[i]]`` (null where not ``valid``)."""
    import pyarrow as pa

    n = len(starts)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 2 ** 31:
        return None  # past a binary array's 32-bit offsets: not for a side file block
    gather = np.repeat(starts - offsets[:-1], counts) + np.arange(total, dtype=np.int64)
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data[gather])]
    nulls = 0
    if valid is not None and not valid.all():
        nulls = int(n - valid.sum())
        buffers[0] = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, buffers, null_count=nulls)


def bytes_block(block: bytes, count: int) -> Any:
    """The ``count`` bytes/string datums of one decompressed block as a pyarrow binary array (a string's
    UTF-8, unchecked), or None when the block is not exactly ``count`` such datums."""
    v = _Varints(block)
    starts = _chain(v.after, count, v.end)
    if starts is None:
        return None
    return _binary(v.data, v.start[starts], v.count[starts])


def headers_block(block: bytes, count: int) -> tuple[np.ndarray, Any, Any] | None:
    """The ``count`` headers datums of one decompressed block, flattened: (``offsets``, int64, record i's
    headers at ``[offsets[i]:offsets[i + 1]]``; ``keys``, binary (UTF-8, unchecked); ``values``, binary with
    nulls), or None when the block is not exactly ``count`` such datums in the shape this scan takes."""
    v = _Varints(block)
    # one header record at each position: the key string, then the union's branch (0: null, 2: string)
    # (the padding makes every step below land at most on the poison position, with no clipping: a read at
    # the end or the poison position meets 0xFF, which is neither a terminated varint nor a branch byte)
    key_after = v.after
    branch = v.data[key_after]
    str_after = v.after[np.minimum(key_after + 1, np.int32(v.poison))]
    item = np.where(branch == 0, key_after + 1, np.where(branch == 2, str_after, np.int32(v.poison)))
    first_item = v.at + v.length
    c = np.where(v.ok, v.value, np.int32(-1))
    # one datum at each position: a count c, c items (binary lifting over item steps), then the 0 ending
    # it. Few headers per record is the rule: lift 2 bits (c <= 3) first, all of MAX_ITEMS only if needed.
    for bits in (2, _LIFT_BITS):
        pos = np.where((c >= 0) & (c < (1 << bits)), first_item, np.int32(v.poison))
        lift = item
        for bit in range(bits):
            has = (c & (1 << bit)) != 0
            pos = np.where(has, lift[pos], pos)
            if bit + 1 < bits:
                lift = lift[lift]
        after = np.where(c == 0, first_item, np.where(v.data[pos] == 0, pos + 1, np.int32(v.poison)))
        starts = _chain(after.astype(np.int32, copy=False), count, v.end)
        if starts is not None:
            break
    else:
        return None
    counts = v.value[starts].astype(np.int64)
    offsets = np.zeros(count + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    items = np.zeros(int(offsets[-1]), np.int32)
    cur = first_item[starts]
    for j in range(int(counts.max()) if count else 0):
        live = np.nonzero(counts > j)[0]
        items[offsets[live] + j] = cur[live]
        cur[live] = item[cur[live]]
    kafter = v.after[items]
    is_str = v.data[kafter] == 2
    vat = kafter + 1
    keys = _binary(v.data, v.start[items], v.count[items])
    values = _binary(v.data, v.start[vat], np.where(is_str, v.count[vat], 0), is_str)
    if keys is None or values is None:
        return None
    return offsets, keys, values
