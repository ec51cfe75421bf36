"""A whole Arrow column of Avro datums checked at once: is each value exactly one datum of the schema?

The columnar path copies bare (and wire-format) Avro datums into container blocks; before it may, every
value must be exactly one datum of the writer schema with nothing after it. The record path answers that
by decoding each value with fastavro (most of a direct-reader Avro batch's CPU). This module answers it for
a whole column with numpy: each field of the schema is walked for all values at once (varints, lengths,
union branches, fixed sizes, array and map blocks), and string bytes are checked as UTF-8 by Arrow.

It is a *sound* check, never a laxer one: it says True only for values fastavro reads as exactly one
datum, and is stricter where that is simpler (a boolean byte other than 0/1, an int varint over 5 bytes,
a long varint over 10). It says None, and the caller decodes as before, for schemas with types it does not
walk: logical types (fastavro converts those and may refuse a value; the decoders read with them stripped)
and recursive types; and for a column with an array or map block of more than :data:`MAX_BLOCK_ITEMS` items.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MAX_BLOCK_ITEMS", "check_datums"]

_VARINT_BYTES = {"int": 5, "long": 10}


def _compile(schema: Any, named: dict | None = None, seen: frozenset = frozenset()) -> tuple | None:
    """The walk program of a parsed schema, or None when it holds a type this check does not take.
    ``named``: fastavro's named types (``__named_schemas``), so a reference to one is walked as the type;
    a recursive type is not walked (its program would never end)."""
    if named is None:
        named = schema.get("__named_schemas", {}) if isinstance(schema, dict) else {}
    if isinstance(schema, list):
        branches = [_compile(b, named, seen) for b in schema]
        return None if any(b is None for b in branches) else ("union", tuple(branches))
    if isinstance(schema, str):
        if schema in named:
            return None if schema in seen else _compile(named[schema], named, seen | {schema})
        return _primitive(schema)
    if not isinstance(schema, dict) or "logicalType" in schema:
        return None
    t = schema.get("type")
    if isinstance(t, (list, dict)):
        return _compile(t, named, seen)
    if t == "record":
        seen = seen | {schema.get("name")}
        fields = [_compile(f.get("type"), named, seen) for f in schema.get("fields", [])]
        return None if any(f is None for f in fields) else ("record", tuple(fields))
    if t == "enum":
        return ("enum", len(schema.get("symbols", [])))
    if t in ("array", "map"):
        inner = _compile(schema.get("items" if t == "array" else "values"), named, seen)
        return None if inner is None else (t, inner)
    if t == "fixed":
        return ("skip", int(schema["size"]))
    return _primitive(t) if isinstance(t, str) else _compile(t, named, seen)


def _primitive(name: str) -> tuple | None:
    if name == "null":
        return ("skip", 0)
    if name in _VARINT_BYTES:
        return ("varint", _VARINT_BYTES[name])
    if name == "float":
        return ("skip", 4)
    if name == "double":
        return ("skip", 8)
    if name == "boolean":
        return ("boolean",)
    if name in ("bytes", "string"):
        return (name,)
    return None  # a named-type reference, or not Avro


#: arrays and maps are walked an item position at a time across all values: a block longer than this
#: would cost more numpy passes than decoding, so such a column is decoded instead
MAX_BLOCK_ITEMS = 64


class _Walk:
    """The column's read positions, advanced field by field. Each step answers True (all values fine so
    far), False (one is not a datum of the schema: the walk stops) or None (decode the column instead)."""

    def __init__(self, data: np.ndarray, pos: np.ndarray, end: np.ndarray):
        self.data, self.pos, self.end = data, pos, end
        self.strings: list[tuple[np.ndarray, np.ndarray]] = []

    def varint(self, rows: np.ndarray, max_bytes: int) -> np.ndarray | None:
        """Zigzag-decoded varints at ``pos[rows]`` (advanced past them), or None for a truncated varint or
        one longer than ``max_bytes``."""
        p, e = self.pos[rows], self.end[rows]
        if (p >= e).any():
            return None
        first = self.data[p]
        if (first < 0x80).all():  # every varint one byte (lengths, indexes, small numbers): no loop
            self.pos[rows] = p + 1
            v = first.astype(np.int64)
            return (v >> 1) ^ -(v & 1)
        n = len(rows)
        value = np.zeros(n, np.uint64)
        length = np.zeros(n, np.int64)
        todo = np.arange(n)
        for j in range(max_bytes):
            q = p[todo] + j
            if (q >= e[todo]).any():
                return None
            b = self.data[q].astype(np.uint64)
            if j == 9 and (b > 1).any():
                return None  # over 64 bits
            value[todo] |= (b & np.uint64(0x7F)) << np.uint64(7 * j)
            last = b < 0x80
            length[todo[last]] = j + 1
            todo = todo[~last]
            if not len(todo):
                break
        else:
            return None
        self.pos[rows] = p + length
        return (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)

    def run(self, op: tuple, rows: np.ndarray) -> bool | None:
        if not len(rows):
            return True
        kind = op[0]
        if kind == "record":
            for field in op[1]:
                ok = self.run(field, rows)
                if not ok:
                    return ok
        elif kind == "skip":
            if op[1]:
                p = self.pos[rows] + op[1]
                if (p > self.end[rows]).any():
                    return False
                self.pos[rows] = p
        elif kind == "varint":
            return self.varint(rows, op[1]) is not None
        elif kind == "boolean":
            p = self.pos[rows]
            if (p >= self.end[rows]).any() or (self.data[p] > 1).any():
                return False
            self.pos[rows] = p + 1
        elif kind in ("bytes", "string"):
            size = self.varint(rows, 10)
            if size is None:
                return False
            p = self.pos[rows]
            if (size < 0).any() or (p + size > self.end[rows]).any():
                return False
            if kind == "string":
                self.strings.append((p, p + size))
            self.pos[rows] = p + size
        elif kind == "enum":
            index = self.varint(rows, 5)
            if index is None or (index < 0).any() or (index >= op[1]).any():
                return False
        elif kind in ("array", "map"):
            # blocks: a count (negative: a byte size follows), that many items (a map's: string key, value),
            # until a count of 0
            active = rows
            while len(active):
                count = self.varint(active, 10)
                if count is None:
                    return False
                sized = count < 0
                if sized.any():
                    if self.varint(active[sized], 10) is None:
                        return False
                    count = np.abs(count)
                    if (count < 0).any():
                        return False
                if (count > MAX_BLOCK_ITEMS).any():
                    return None
                more = count > 0
                active, count = active[more], count[more]
                for k in range(int(count.max()) if len(count) else 0):
                    sub = active[count > k]
                    if kind == "map":
                        ok = self.run(("string",), sub)
                        if not ok:
                            return ok
                    ok = self.run(op[1], sub)
                    if not ok:
                        return ok
        elif kind == "union":
            index = self.varint(rows, 5)
            if index is None or (index < 0).any() or (index >= len(op[1])).any():
                return False
            for k, branch in enumerate(op[1]):
                ok = self.run(branch, rows[index == k])
                if not ok:
                    return ok
        else:  # pragma: no cover - _compile makes no other op
            raise AssertionError(kind)
        return True


def check_datums(values: Any, schema: Any, skip: int = 0) -> bool | None:
    """Whether every value of ``values`` (an Arrow binary or large-binary array) is, after its first
    ``skip`` bytes, exactly one datum of ``schema`` (fastavro-parsed) with nothing after it: True or
    False; None when the schema holds a type this check does not walk (decode instead)."""
    import pyarrow as pa

    program = _compile(schema)
    if program is None:
        return None
    n = len(values)
    if n == 0:
        return True
    if values.null_count:
        return False
    if pa.types.is_binary(values.type):
        offset_type = np.int32
    elif pa.types.is_large_binary(values.type):
        offset_type = np.int64
    else:
        return None
    _validity, offsets_buf, data_buf = values.buffers()
    offsets = np.frombuffer(offsets_buf, offset_type)[values.offset:values.offset + n + 1].astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    walk = _Walk(data, offsets[:-1] + skip, offsets[1:].copy())
    if (walk.pos > walk.end).any():
        return False
    ok = walk.run(program, np.arange(n))
    if not ok:
        return ok  # False, or None: decode instead
    if not np.array_equal(walk.pos, walk.end):
        return False  # bytes after the datum
    return _utf8(walk.strings, data_buf)


def _utf8(strings: list[tuple[np.ndarray, np.ndarray]], data_buf: Any) -> bool:
    """Whether every string slice ``data[start:end]`` is valid UTF-8 (Arrow's check, as strict as Python's)."""
    import pyarrow as pa

    for starts, ends in strings:
        if not len(starts):
            continue
        # one field's slices ascend with the values and never overlap, so [s0, e0, s1, e1, ...] ascends:
        # element 2i is string i, element 2i+1 the bytes up to the next one (other fields), left out below
        bounds = np.empty(2 * len(starts) + 1, np.int64)
        bounds[0:-1:2], bounds[1::2] = starts, ends
        bounds[-1] = ends[-1]
        spans = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(bounds) - 1,
                                                 [None, pa.py_buffer(bounds), data_buf])
        try:
            spans.take(pa.array(np.arange(0, len(bounds) - 1, 2))).cast(pa.large_string())
        except (pa.ArrowInvalid, UnicodeDecodeError):
            return False
    return True
