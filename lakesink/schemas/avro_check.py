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

The walk can also keep what it read (:class:`ColumnWalk` with ``record=True``): per node of the program,
the values' varints, string spans, union branches, array items. :mod:`lakesink.schemas.avro_arrow` builds
Arrow columns from them, so a decode is exactly as strict as this check.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MAX_BLOCK_ITEMS", "ColumnWalk", "Op", "check_datums", "compile_schema", "gather_spans"]

_VARINT_BYTES = {"int": 5, "long": 10}


@dataclass(frozen=True, eq=False)  # eq=False: nodes hash by identity, keys of ColumnWalk.seen
class Op:
    """One node of a walk program (:func:`compile_schema`)."""

    kind: str  # record | skip | varint | boolean | bytes | string | enum | array | map | union
    size: int = 0  # skip: its bytes; varint: its longest encoding; enum: its symbols
    children: tuple[Op, ...] = ()  # record: fields; array: (items,); map: (keys, values); union: branches
    avro: str = ""  # the Avro type (int, long, float, double, null, fixed, record, ...), for decoders
    names: tuple[str, ...] = ()  # record: its field names


def compile_schema(schema: Any, named: dict | None = None, seen: frozenset = frozenset()) -> Op | None:
    """The walk program of a fastavro-parsed schema, or None when it holds a type the walk does not take.
    ``named``: fastavro's named types (``__named_schemas``), so a reference to one is walked as the type;
    a recursive type is not walked (its program would never end)."""
    if named is None:
        named = schema.get("__named_schemas", {}) if isinstance(schema, dict) else {}
    if isinstance(schema, list):
        branches = [compile_schema(b, named, seen) for b in schema]
        return None if any(b is None for b in branches) else Op("union", children=tuple(branches), avro="union")
    if isinstance(schema, str):
        if schema in named:
            return None if schema in seen else compile_schema(named[schema], named, seen | {schema})
        return _primitive(schema)
    if not isinstance(schema, dict) or "logicalType" in schema:
        return None
    t = schema.get("type")
    if isinstance(t, (list, dict)):
        return compile_schema(t, named, seen)
    if t == "record":
        seen = seen | {schema.get("name")}
        fields = schema.get("fields", [])
        ops = [compile_schema(f.get("type"), named, seen) for f in fields]
        if any(f is None for f in ops):
            return None
        return Op("record", children=tuple(ops), avro="record", names=tuple(f.get("name") for f in fields))
    if t == "enum":
        return Op("enum", len(schema.get("symbols", [])), avro="enum")
    if t == "array":
        items = compile_schema(schema.get("items"), named, seen)
        return None if items is None else Op("array", children=(items,), avro="array")
    if t == "map":
        values = compile_schema(schema.get("values"), named, seen)
        return None if values is None else Op("map", children=(Op("string", avro="string"), values), avro="map")
    if t == "fixed":
        return Op("skip", int(schema["size"]), avro="fixed")
    return _primitive(t) if isinstance(t, str) else compile_schema(t, named, seen)


def _primitive(name: str) -> Op | None:
    if name == "null":
        return Op("skip", 0, avro=name)
    if name in _VARINT_BYTES:
        return Op("varint", _VARINT_BYTES[name], avro=name)
    if name == "float":
        return Op("skip", 4, avro=name)
    if name == "double":
        return Op("skip", 8, avro=name)
    if name in ("boolean", "bytes", "string"):
        return Op(name, avro=name)
    return None  # a named-type reference, or not Avro


#: arrays and maps are walked an item position at a time across all values: a block longer than this
#: would cost more numpy passes than decoding, so such a column is decoded instead
MAX_BLOCK_ITEMS = 64


class ColumnWalk:
    """The column's read positions, advanced field by field. Each step answers True (all values fine so
    far), False (one is not a datum of the schema: the walk stops) or None (decode the column instead).

    With ``record``, :attr:`seen` keeps, per node, one tuple per visit, whose first array is the *slots*
    of the values visited (the ``slots`` passed to :meth:`run`: one output position per row):
    varint ``(slots, values)``; boolean ``(slots, bytes)``; skip of some bytes ``(slots, starts)``; bytes
    and string ``(slots, starts, sizes)``; enum and union ``(slots, indexes)``; array and map
    ``(slots, ordinals)`` per item position, the items' own slots being numbered 0, 1, ... in visit order
    across the node's visits (``ordinals``: each item's place in its value's array)."""

    def __init__(self, data: np.ndarray, pos: np.ndarray, end: np.ndarray, data_buf: Any = None,
                 record: bool = False):
        self.data, self.pos, self.end, self.data_buf = data, pos, end, data_buf
        self.strings: list[tuple[np.ndarray, np.ndarray]] = []
        self.seen: dict[Op, list[tuple[np.ndarray, ...]]] | None = {} if record else None
        self._items: dict[Op, int] = {}  # array/map node -> items numbered so far

    @classmethod
    def of(cls, values: Any, skip: int = 0, record: bool = False) -> ColumnWalk | bool | None:
        """A walk over ``values`` (an Arrow binary or large-binary array) from each value's byte ``skip``;
        or False when a value is null or shorter than ``skip``, None when ``values`` is not binary."""
        import pyarrow as pa

        if values.null_count:
            return False
        if pa.types.is_binary(values.type):
            offset_type = np.int32
        elif pa.types.is_large_binary(values.type):
            offset_type = np.int64
        else:
            return None
        n = len(values)
        _validity, offsets_buf, data_buf = values.buffers()
        if data_buf is None:
            data_buf = pa.py_buffer(b"")
        if n:
            offsets = np.frombuffer(offsets_buf, offset_type)[values.offset:values.offset + n + 1].astype(np.int64)
        else:
            offsets = np.zeros(1, np.int64)
        walk = cls(np.frombuffer(data_buf, np.uint8), offsets[:-1] + skip, offsets[1:].copy(), data_buf, record)
        return False if (walk.pos > walk.end).any() else walk

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

    def run(self, op: Op, rows: np.ndarray, slots: np.ndarray | None = None) -> bool | None:
        """Walk ``op`` over the values ``rows``; ``slots`` (with ``record``): their output positions."""
        if not len(rows):
            return True
        kind = op.kind
        seen = self.seen
        if kind == "record":
            for field in op.children:
                ok = self.run(field, rows, slots)
                if not ok:
                    return ok
        elif kind == "skip":
            if op.size:
                p = self.pos[rows]
                if (p + op.size > self.end[rows]).any():
                    return False
                self.pos[rows] = p + op.size
                if seen is not None:
                    seen.setdefault(op, []).append((slots, p))
        elif kind == "varint":
            v = self.varint(rows, op.size)
            if v is None:
                return False
            if seen is not None:
                seen.setdefault(op, []).append((slots, v))
        elif kind == "boolean":
            p = self.pos[rows]
            if (p >= self.end[rows]).any():
                return False
            b = self.data[p]
            if (b > 1).any():
                return False
            self.pos[rows] = p + 1
            if seen is not None:
                seen.setdefault(op, []).append((slots, b))
        elif kind in ("bytes", "string"):
            size = self.varint(rows, 10)
            if size is None:
                return False
            p = self.pos[rows]
            # size against the bytes left, not p + size against the end: a size near 2**63 would wrap
            if (size < 0).any() or (size > self.end[rows] - p).any():
                return False
            if kind == "string":
                self.strings.append((p, p + size))
            self.pos[rows] = p + size
            if seen is not None:
                seen.setdefault(op, []).append((slots, p, size))
        elif kind in ("enum", "union"):
            index = self.varint(rows, 5)
            limit = op.size if kind == "enum" else len(op.children)
            if index is None or (index < 0).any() or (index >= limit).any():
                return False
            if seen is not None:
                seen.setdefault(op, []).append((slots, index))
            if kind == "union":
                for k, branch in enumerate(op.children):
                    pick = index == k
                    ok = self.run(branch, rows[pick], None if slots is None else slots[pick])
                    if not ok:
                        return ok
        elif kind in ("array", "map"):
            return self._blocks(op, rows, slots)
        else:  # pragma: no cover - compile_schema makes no other op
            raise AssertionError(kind)
        return True

    def _blocks(self, op: Op, rows: np.ndarray, slots: np.ndarray | None) -> bool | None:
        """An array's or map's blocks: a count (negative: a byte size follows), that many items (a map's:
        string key, value), until a count of 0."""
        seen = self.seen
        active = rows
        done = np.zeros(len(rows), np.int64)  # items so far, per active value (record)
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
            if seen is not None:
                slots, done = slots[more], done[more]
            for k in range(int(count.max()) if len(count) else 0):
                pick = count > k
                sub = active[pick]
                items = None
                if seen is not None:
                    seen.setdefault(op, []).append((slots[pick], done[pick] + k))
                    first = self._items.get(op, 0)
                    items = np.arange(first, first + len(sub))
                    self._items[op] = first + len(sub)
                for child in op.children:  # a map's key, then its value; an array's item
                    ok = self.run(child, sub, items)
                    if not ok:
                        return ok
            if seen is not None:
                done = done + count
        return True


def check_datums(values: Any, schema: Any, skip: int = 0) -> bool | None:
    """Whether every value of ``values`` (an Arrow binary or large-binary array) is, after its first
    ``skip`` bytes, exactly one datum of ``schema`` (fastavro-parsed) with nothing after it: True or
    False; None when the schema holds a type this check does not walk (decode instead)."""
    program = compile_schema(schema)
    if program is None:
        return None
    if not len(values):
        return True
    walk = ColumnWalk.of(values, skip)
    if not isinstance(walk, ColumnWalk):
        return walk
    ok = walk.run(program, np.arange(len(values)))
    if not ok:
        return ok  # False, or None: decode instead
    if not np.array_equal(walk.pos, walk.end):
        return False  # bytes after the datum
    return _utf8(walk.strings, walk.data_buf)


def gather_spans(starts: np.ndarray, ends: np.ndarray, data_buf: Any) -> Any:
    """``data[start:end]`` for each span, as one Arrow large-binary array (the bytes copied by Arrow). The
    spans must ascend and not overlap, as one field's spans do across a column."""
    import pyarrow as pa

    n = len(starts)
    if not n:
        return pa.array([], pa.large_binary())
    # [s0, e0, s1, e1, ...] ascends: element 2i is span i, element 2i+1 the bytes up to the next one (other
    # fields), left out by the take
    bounds = np.empty(2 * n + 1, np.int64)
    bounds[0:-1:2], bounds[1::2] = starts, ends
    bounds[-1] = ends[-1]
    spans = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 2 * n, [None, pa.py_buffer(bounds), data_buf])
    return spans.take(pa.array(np.arange(0, 2 * n, 2)))


def _utf8(strings: list[tuple[np.ndarray, np.ndarray]], data_buf: Any) -> bool:
    """Whether every string slice ``data[start:end]`` is valid UTF-8 (Arrow's check, as strict as Python's)."""
    import pyarrow as pa

    for starts, ends in strings:
        try:
            gather_spans(starts, ends, data_buf).cast(pa.large_string())
        except (pa.ArrowInvalid, UnicodeDecodeError):
            return False
    return True
