"""Only the Avro blocks a cut needs: an Avro object container file is a header and blocks, each block naming its
record count and byte size before its (compressed) datums, so the blocks that hold a set of record positions are
found without decompressing anything, and a container of the header and those blocks alone (:func:`narrow`) reads
as the original would, minus the other blocks. :mod:`lakesink.executor.readback` narrows the value objects and the
``.keys`` / ``.headers`` side files of an object a cut falls inside this way (the positions come from its
metadata side file), then spreads what it decoded back to the object's positions (:func:`spread_binary`,
:func:`spread_headers`); :class:`BlockCounts` counts the blocks read and left unread.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakesink.objects.formats.avro_columns import read_long

__all__ = ["MAGIC", "BlockCounts", "avro_blocks", "narrow", "spread_binary", "spread_headers"]

MAGIC = b"Obj\x01"
SYNC = 16


@dataclass
class BlockCounts:
    """Blocks (Avro blocks, Block-GZIP chunks) of the objects read: read and left unread by a cut."""

    read: int = 0
    skipped: int = 0


def avro_blocks(data: bytes) -> tuple[int, list[tuple[int, int, int]]] | None:
    """Where an Avro container's header ends and each block's ``(start, end, records)`` (``data[start:end]``: its
    count, size, datums and sync marker); None when ``data`` is not a well-formed container (the full read then
    names what is wrong)."""
    if not data.startswith(MAGIC):
        return None
    try:
        p = len(MAGIC)
        while True:  # the metadata map: blocks of (key, value) pairs, a zero count ends it
            count, p = read_long(data, p)
            if count == 0:
                break
            if count < 0:
                count = -count
                _size, p = read_long(data, p)
            for _ in range(2 * count):
                n, p = read_long(data, p)
                if n < 0:
                    return None
                p += n
        sync = data[p:p + SYNC]
        p += SYNC
        header_end = p
        blocks = []
        while p < len(data):
            start = p
            count, p = read_long(data, p)
            size, p = read_long(data, p)
            if count < 0 or size < 0 or data[p + size:p + size + SYNC] != sync:
                return None
            p += size + SYNC
            blocks.append((start, p, count))
    except IndexError:
        return None
    return header_end, blocks


def narrow(data: bytes, positions: Any, total: int, counts: BlockCounts | None = None) -> tuple[bytes, Any] | None:
    """The container of ``data``'s header and only the blocks holding record ``positions`` (sorted numpy ints),
    and the record positions it holds, in order (numpy int64); None when ``data`` is not a container of ``total``
    records or every block is needed (read it whole)."""
    import numpy as np

    found = avro_blocks(data)
    if found is None:
        return None
    header_end, blocks = found
    sizes = np.fromiter((b[2] for b in blocks), np.int64, len(blocks))
    if int(sizes.sum()) != total:
        return None
    firsts = np.concatenate(([0], np.cumsum(sizes)[:-1])) if len(blocks) else np.zeros(0, np.int64)
    need = np.unique(np.searchsorted(firsts, np.asarray(positions, np.int64), "right") - 1)
    # (a block of no records holds no position: searchsorted gives the last block starting there, never it)
    if len(need) == len(blocks):
        return None
    if counts is not None:
        counts.read += len(need)
        counts.skipped += len(blocks) - len(need)
    sub = b"".join([data[:header_end], *(data[blocks[i][0]:blocks[i][1]] for i in need)])
    held = (np.concatenate([np.arange(firsts[i], firsts[i] + sizes[i], dtype=np.int64) for i in need])
            if len(need) else np.zeros(0, np.int64))
    return sub, held


def _places(held: Any, n: int) -> Any:
    """For each of ``n`` positions, its index in ``held`` (-1: not held)."""
    import numpy as np

    idx = np.full(n, -1, np.int64)
    idx[held] = np.arange(len(held), dtype=np.int64)
    return idx


def spread_binary(arr: Any, held: Any, n: int) -> Any:
    """``arr`` (the records at positions ``held``) as an array of all ``n`` positions, null where not held."""
    import pyarrow as pa

    idx = _places(held, n)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not isinstance(arr, pa.Array):
        arr = pa.array(arr, pa.binary())
    return arr.take(pa.array(idx, mask=idx < 0))


def spread_headers(cols: tuple[Any, Any, Any], held: Any, n: int) -> tuple[Any, Any, Any]:
    """Flattened headers (``offsets``, ``keys``, ``values``) of the records at positions ``held`` as those of all
    ``n`` positions (no headers where not held)."""
    import numpy as np

    offsets, keys, values = cols
    per = np.zeros(n, np.int64)
    per[held] = np.diff(np.asarray(offsets, np.int64))
    out = np.zeros(n + 1, np.int64)
    np.cumsum(per, out=out[1:])
    return out, keys, values
