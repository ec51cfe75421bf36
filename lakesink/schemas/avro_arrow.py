"""A whole Arrow column of bare Avro datums decoded into Arrow columns at once, with numpy.

The record path writes Parquet from fastavro's dicts, one value at a time (most of a direct-reader
Parquet batch's CPU). :func:`decode_column` reads the column with :mod:`lakesink.schemas.avro_check`'s
walk instead, keeping what it reads (varints, string spans, union branches, array items) and building
Arrow arrays from it: the Parquet writer gets a table in its file's Arrow types
(:func:`lakesink.schemas.avro.avro_to_arrow_schema`) holding exactly the values the record path converts.

It decodes records made of records, arrays, ``[null, X]`` / ``[X, null]`` unions and the primitives
boolean, int, long, float, double, bytes and string (what Spark's ``from_avro`` decodes alike, see
:func:`lakesink.executor.columnar.spark_decodes_alike`), and is exactly as strict as the record path:
a column is decoded only when every value is one datum of the schema with nothing after it (the walk's
check, sound against fastavro), every string valid UTF-8 and every int within 32 bits (Arrow refuses a
wider one when the record path converts it). Otherwise the caller takes the record path, which names the
value at fault.
"""
from __future__ import annotations

from typing import Any, Literal

import numpy as np

from lakesink.schemas.avro_check import ColumnWalk, Op, compile_schema, gather_spans

__all__ = ["decode_column"]

_INT32 = (-(2 ** 31), 2 ** 31 - 1)
_FLOATS = {"float": "<f4", "double": "<f8"}


def decode_column(values: Any, schema: Any) -> Any | Literal[False] | None:
    """``values`` (an Arrow binary or large-binary array of bare Avro datums) decoded with ``schema`` (a
    fastavro-parsed record schema) into a ``pyarrow.Table``, one column per field, in the Arrow types of
    :func:`~lakesink.schemas.avro.avro_to_arrow_schema`. False when a value is not exactly one datum of
    the schema, holds invalid UTF-8 in a string or an int over 32 bits; None when the schema holds types
    this decoder does not take (enums, fixed, maps, logical types, other unions, recursive types, an empty
    record) or the column is not binary or has an array block of over
    :data:`~lakesink.schemas.avro_check.MAX_BLOCK_ITEMS` items. On False and None the record path decodes
    the values (and names a bad one)."""
    import pyarrow as pa

    program = compile_schema(schema)
    if program is None or program.kind != "record" or not _decodes(program):
        return None
    walk = ColumnWalk.of(values, record=True)
    if not isinstance(walk, ColumnWalk):
        return walk
    n = len(values)
    rows = np.arange(n)
    ok = walk.run(program, rows, rows)
    if not ok:
        return ok  # False, or None: an array block too long for the walk
    if not np.array_equal(walk.pos, walk.end):
        return False  # bytes after the datum
    try:
        column = _Columns(walk).build(program, n, None)
    except pa.ArrowInvalid:  # a string that is not UTF-8 (the cast checks it)
        return False
    return False if column is None else pa.Table.from_struct_array(column)


def _decodes(op: Op) -> bool:
    """Whether :class:`_Columns` builds ``op``'s values (in the Arrow type the file maps it to)."""
    if op.kind == "record":
        return bool(op.children) and all(_decodes(f) for f in op.children)
    if op.kind == "union":
        return _nullable_branch(op) is not None
    if op.kind == "array":
        return _decodes(op.children[0])
    return op.avro in ("boolean", "int", "long", "float", "double", "bytes", "string")


def _nullable_branch(op: Op) -> int | None:
    """The index of X in a ``[null, X]`` or ``[X, null]`` union (X decodable and not null), else None."""
    if op.kind != "union" or len(op.children) != 2:
        return None
    nulls = [b.avro == "null" for b in op.children]
    if sum(nulls) != 1:
        return None
    k = nulls.index(False)
    return k if _decodes(op.children[k]) else None


class _Columns:
    """Arrow arrays from a recording walk. Each node's array has one element per *slot* of its space: the
    values (top level, slot = row), or an array node's items (slot = position among all its items, value
    by value). A node's recorded slots are mapped to those positions by ``where`` (None: they are)."""

    def __init__(self, walk: ColumnWalk):
        self.walk = walk

    def visits(self, op: Op, parts: int) -> list[np.ndarray]:
        """The node's recorded arrays, each concatenated over its visits (``parts`` arrays per visit)."""
        seen = self.walk.seen.get(op)
        if not seen:
            return [np.zeros(0, np.int64)] * parts
        return [np.concatenate([v[i] for v in seen]) if len(seen) > 1 else seen[0][i] for i in range(parts)]

    def build(self, op: Op, size: int, where: np.ndarray | None) -> Any:
        """``op``'s array of ``size`` slots (slots no visit reached hold zeros or empty values: a union
        masks them), or None for an int over 32 bits."""
        import pyarrow as pa

        kind = op.kind
        if kind == "record":
            fields, arrays = [], []
            for name, child in zip(op.names, op.children):
                array = self.build(child, size, where)
                if array is None:
                    return None
                arrays.append(array)
                fields.append(pa.field(name, array.type, nullable=child.kind == "union"))
            return pa.StructArray.from_arrays(arrays, fields=fields)
        if kind == "union":
            slots, index = self.visits(op, 2)
            k = _nullable_branch(op)
            array = self.build(op.children[k], size, where)
            if array is None:
                return None
            valid = np.zeros(size, bool)
            valid[_at(slots[index == k], where)] = True
            return _with_validity(array, valid)
        if kind == "array":
            parents, ordinals = self.visits(op, 2)
            parents = _at(parents, where)
            offsets = np.zeros(size + 1, np.int64)
            np.cumsum(np.bincount(parents, minlength=size), out=offsets[1:])
            item = op.children[0]
            items = self.build(item, int(offsets[-1]), offsets[parents] + ordinals)
            if items is None:
                return None
            element = pa.field("element", items.type, nullable=item.kind == "union")
            return pa.Array.from_buffers(pa.list_(element), size, [None, pa.py_buffer(offsets.astype(np.int32))],
                                         children=[items])
        if kind in ("bytes", "string"):
            return self.spans(op, size, where)
        slots, got = self.visits(op, 2)
        slots = _at(slots, where)
        if op.avro in _FLOATS:
            width = 4 if op.avro == "float" else 8
            raw = self.walk.data[got[:, None] + np.arange(width)]
            got = raw.view(_FLOATS[op.avro]).ravel()
            if op.avro == "float":
                # fastavro reads a float into a Python float and Arrow narrows it back: that round trip
                # quiets a signalling NaN, so it is done here too, for the same bytes
                with np.errstate(invalid="ignore"):
                    got = got.astype(np.float64).astype(np.float32)
            out = np.zeros(size, got.dtype)
        elif op.avro == "boolean":
            out = np.zeros(size, bool)
        else:
            out = np.zeros(size, np.int64)
        out[slots] = got
        if op.avro == "int":
            if len(got) and (got.min() < _INT32[0] or got.max() > _INT32[1]):
                return None
            out = out.astype(np.int32)
        return pa.array(out)

    def spans(self, op: Op, size: int, where: np.ndarray | None) -> Any:
        """A bytes or string node's array: its spans of the column's data, gathered by Arrow."""
        import pyarrow as pa

        slots, starts, sizes = self.visits(op, 3)
        slots = _at(slots, where)
        start = np.zeros(size, np.int64)
        end = np.zeros(size, np.int64)
        start[slots] = starts
        end[slots] = starts + sizes
        if len(slots) < size:
            # a slot no visit reached (a null, under a union) is given an empty span where the previous
            # one ends, so the spans still ascend for gather_spans
            missed = np.ones(size, bool)
            missed[slots] = False
            reach = np.maximum.accumulate(end)
            start[missed] = end[missed] = reach[missed]
        gathered = gather_spans(start, end, self.walk.data_buf)
        return gathered.cast(pa.string() if op.kind == "string" else pa.binary())


def _at(slots: np.ndarray, where: np.ndarray | None) -> np.ndarray:
    return slots if where is None else where[slots]


def _with_validity(array: Any, valid: np.ndarray) -> Any:
    """``array`` with the slots where ``valid`` is False null."""
    import pyarrow as pa

    if valid.all():
        return array
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    t = array.type
    if pa.types.is_struct(t):
        own, children = 1, [array.field(i) for i in range(t.num_fields)]
    elif pa.types.is_list(t):
        own, children = 2, [array.values]
    else:
        own, children = t.num_buffers, None
    return pa.Array.from_buffers(t, len(array), [bitmap] + array.buffers()[1:own],
                                 null_count=int(len(valid) - valid.sum()), children=children)
