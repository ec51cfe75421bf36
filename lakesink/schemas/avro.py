"""Avro schema identity: parsing, fingerprints, cached ValueSchema objects, and the schema-driven
helpers the formats need (raw decoding without logical-type conversion, Avro -> Arrow types).

Values inside lakesink are *raw* Avro values: logical types are NOT converted (timestamp-millis
stays an int of epoch ms, date an int of days, decimal the unscaled two's-complement bytes, uuid a
str). That makes Avro -> Avro byte-exact, and Avro -> JSON equal to Connect's JsonConverter
(Timestamp -> epoch ms, Date -> days, Decimal -> base64 of the unscaled bytes by default).
"""
from __future__ import annotations

import copy
import decimal
import json
import os
from functools import lru_cache
from typing import Any, Callable

import fastavro
from fastavro.schema import expand_schema, fingerprint as _fa_fingerprint, to_parsing_canonical_form


from lakesink.objects.records import ValueSchema
from lakesink.errors import SchemaError

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


# ---------------------------------------------------------------------------------------------
# Parsing and identity


def parse_schema(schema: Any) -> Any:
    """Return an Avro schema in JSON form from a dict/list, a JSON string, a primitive name, or a
    path to a ``.avsc`` file. Validates it with fastavro; raises :class:`SchemaError`."""
    obj = schema
    if isinstance(schema, (bytes, bytearray)):
        schema = schema.decode("utf-8")
    if isinstance(schema, os.PathLike):
        schema = os.fspath(schema)
    if isinstance(schema, str):
        text = schema.strip()
        if text in PRIMITIVES:
            obj = text
        elif text[:1] in ("{", "[", '"'):
            try:
                obj = json.loads(text)
            except ValueError as e:
                raise SchemaError(f"schema is not valid JSON: {e}") from None
        elif os.path.exists(text):
            with open(text, encoding="utf-8") as f:
                return parse_schema(f.read())
        else:
            raise SchemaError(f"schema is neither JSON, a primitive type nor an existing file: {text[:80]!r}")
    try:
        fastavro.parse_schema(copy.deepcopy(obj))
    except Exception as e:  # fastavro raises SchemaParseException, UnknownType, KeyError...
        raise SchemaError(f"invalid Avro schema: {e}") from None
    return obj


def canonical_form(schema: Any) -> str:
    """The Avro Parsing Canonical Form (drops doc, aliases, defaults, logical types)."""
    return to_parsing_canonical_form(schema)


def fingerprint(schema: Any) -> str:
    """SHA-256 hex of the Parsing Canonical Form.

    Equal fingerprints mean equal binary encodings (that is what the Avro fast path relies on).
    Schemas differing only in doc/defaults/logical types share a fingerprint; registry versions
    tell them apart (ValueSchema equality is fingerprint + version).
    """
    return _fingerprint_of_text(_stable_json(schema))


@lru_cache(maxsize=4096)
def _fingerprint_of_text(text: str) -> str:
    return _fa_fingerprint(to_parsing_canonical_form(json.loads(text)), "SHA-256")


def _stable_json(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


_VALUE_SCHEMAS: dict[tuple, ValueSchema] = {}


def value_schema(avro: Any, subject: str | None = None, id: int | None = None,
                 version: int | None = None) -> ValueSchema:
    """A (cached, shared) ValueSchema for ``avro`` with its registry identity; ``avro`` is kept as
    given (key order included), so Avro file headers show the schema as registered."""
    key = (_stable_json(avro), subject, id, version)
    vs = _VALUE_SCHEMAS.get(key)
    if vs is None:
        if len(_VALUE_SCHEMAS) > 4096:  # bounded: schemas are few; this only guards against churn
            _VALUE_SCHEMAS.clear()
        vs = _VALUE_SCHEMAS[key] = ValueSchema(avro=copy.deepcopy(avro), fingerprint=_fingerprint_of_text(key[0]),
                                               subject=subject, id=id, version=version)
    return vs


def primitive_schema_for(value: Any) -> str | None:
    """The Avro primitive schema for a schemaless scalar (keys, bytes/str values), else None."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytes"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "long"
    if isinstance(value, float):
        return "double"
    return None


# ---------------------------------------------------------------------------------------------
# Raw (no logical types) decoding schemas


def strip_logical_types(schema: Any) -> Any:
    """A copy of ``schema`` without ``logicalType`` attributes, so fastavro returns raw values."""
    if isinstance(schema, list):
        return [strip_logical_types(s) for s in schema]
    if isinstance(schema, dict):
        out = {k: v for k, v in schema.items() if k != "logicalType"}
        t = out.get("type")
        if isinstance(t, (dict, list)):
            out["type"] = strip_logical_types(t)
        if "fields" in out:
            out["fields"] = [dict(f, type=strip_logical_types(f["type"])) for f in out["fields"]]
        if "items" in out:
            out["items"] = strip_logical_types(out["items"])
        if "values" in out and out.get("type") == "map":
            out["values"] = strip_logical_types(out["values"])
        return out
    return schema


def raw_reader_schema(vs: ValueSchema) -> Any:
    """fastavro-parsed schema that decodes ``vs`` to raw values (cached per fingerprint: the raw
    decoding depends only on the canonical form)."""
    return _raw_parsed(vs.fingerprint, _stable_json(vs.avro))


@lru_cache(maxsize=1024)
def _raw_parsed(fp: str, text: str) -> Any:
    return fastavro.parse_schema(strip_logical_types(json.loads(text)))


def raw_parsed_schema(avro: Any) -> Any:
    """Like :func:`raw_reader_schema` for a bare Avro schema."""
    text = _stable_json(avro)
    return _raw_parsed(_fingerprint_of_text(text), text)


# ---------------------------------------------------------------------------------------------
# Schema-guided value conversion (only where logical types need it)

Converter = Callable[[Any], Any]


def value_converter(schema: Any, leaf: Callable[[dict], Converter | None],
                    maps_from_pairs: bool = False) -> Converter | None:
    """Compile a function applying ``leaf(node)`` converters inside values of ``schema``.

    ``leaf`` is asked about every dict schema node with a ``logicalType`` and returns a converter
    or None. ``maps_from_pairs``: values of map nodes may come as lists of (key, value) pairs (Arrow's
    maps) and are turned into dicts. The result is None when nothing in the schema needs converting
    (callers then skip the walk entirely: the common case costs nothing).
    """
    return _compile(expand_schema(copy.deepcopy(schema)), leaf, maps_from_pairs)


def _compile(s: Any, leaf, pairs: bool = False) -> Converter | None:
    if isinstance(s, list):
        return _compile_union(s, leaf, pairs)
    if isinstance(s, str):
        return None
    t = s.get("type")
    if s.get("logicalType"):
        conv = leaf(s)
        if conv is not None:
            return conv
    if isinstance(t, (dict, list)):
        return _compile(t, leaf, pairs)
    if t == "record":
        convs = [(f["name"], _compile(f["type"], leaf, pairs)) for f in s["fields"]]
        convs = [(n, c) for n, c in convs if c is not None]
        if not convs:
            return None

        def conv_record(v, convs=convs):
            if v is None:
                return v
            v = dict(v)
            for n, c in convs:
                if n in v:
                    v[n] = c(v[n])
            return v

        return conv_record
    if t == "array":
        c = _compile(s["items"], leaf, pairs)
        return None if c is None else (lambda v, c=c: v if v is None else [c(x) for x in v])
    if t == "map":
        c = _compile(s["values"], leaf, pairs)
        if pairs:
            return lambda v, c=c: v if v is None else {
                k: (x if c is None else c(x)) for k, x in (v.items() if isinstance(v, dict) else v)}
        return None if c is None else (lambda v, c=c: v if v is None else {k: c(x) for k, x in v.items()})
    return None


_PY_TYPES = {
    "null": type(None), "boolean": bool, "int": int, "long": int, "float": float, "double": float,
    "bytes": (bytes, bytearray), "string": str, "fixed": (bytes, bytearray), "enum": str,
    "record": dict, "map": dict, "array": list,
}


def _compile_union(branches: list, leaf, pairs: bool = False) -> Converter | None:
    convs = []
    for b in branches:
        c = _compile(b, leaf, pairs)
        if c is not None:
            t = b if isinstance(b, str) else b.get("type")
            pytype = (dict, list) if pairs and t == "map" else _PY_TYPES.get(t, object) if isinstance(t, str) else object
            convs.append((pytype, c))
    if not convs:
        return None

    def conv_union(v, convs=convs):
        if v is None:
            return v
        for pytype, c in convs:  # first branch whose Python type matches (ambiguous unions: best effort)
            if isinstance(v, pytype):
                return c(v)
        return v

    return conv_union


def decimal_from_bytes(scale: int) -> Converter:
    """Converter of Avro decimal's unscaled two's-complement bytes to :class:`decimal.Decimal`."""

    def conv(v):
        if isinstance(v, (bytes, bytearray)):
            return decimal.Decimal(int.from_bytes(v, "big", signed=True)).scaleb(-scale)
        return v

    return conv


# ---------------------------------------------------------------------------------------------
# Avro -> Arrow (Parquet)


def avro_to_arrow_schema(schema: Any, metadata: dict | None = None):
    """Arrow schema for a top-level Avro record (Parquet's file schema; Confluent needs a Struct)."""
    import pyarrow as pa

    s = expand_schema(copy.deepcopy(schema))
    if not (isinstance(s, dict) and s.get("type") == "record"):
        raise SchemaError("Parquet needs an Avro record schema at the top level")
    st = _arrow_type(s)
    return pa.schema(list(st), metadata=metadata)


def _arrow_type(s: Any):
    """(Arrow type) for an expanded Avro schema node; nullability is decided by the caller."""
    import pyarrow as pa

    if isinstance(s, list):
        non_null = [b for b in s if b != "null"]
        if len(non_null) != 1:
            raise SchemaError(f"union {json.dumps(s)[:120]} has no Parquet mapping (only [\"null\", X])")
        return _arrow_type(non_null[0])
    if isinstance(s, str):
        prim = {
            "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
            "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(),
        }
        if s not in prim:
            raise SchemaError(f"named type {s!r} is recursive; Parquet cannot hold recursive schemas")
        return prim[s]
    t, lt = s.get("type"), s.get("logicalType")
    if isinstance(t, (dict, list)):
        return _arrow_type(t)
    if lt == "decimal" and t in ("bytes", "fixed"):
        p, sc = int(s["precision"]), int(s.get("scale", 0))
        return pa.decimal128(p, sc) if p <= 38 else pa.decimal256(p, sc)
    if t == "int" and lt == "date":
        return pa.date32()
    if t == "int" and lt == "time-millis":
        return pa.time32("ms")
    if t == "long" and lt == "time-micros":
        return pa.time64("us")
    if t == "long" and lt in ("timestamp-millis", "timestamp-micros", "timestamp-nanos"):
        return pa.timestamp({"timestamp-millis": "ms", "timestamp-micros": "us"}.get(lt, "ns"), tz="UTC")
    if t == "long" and lt in ("local-timestamp-millis", "local-timestamp-micros"):
        return pa.timestamp("ms" if lt.endswith("millis") else "us")
    if t in PRIMITIVES:
        return _arrow_type(t)
    if t == "enum":
        return pa.string()
    if t == "fixed":
        return pa.binary(int(s["size"]))
    if t == "array":
        item = s["items"]
        return pa.list_(pa.field("element", _arrow_type(item), nullable=_nullable(item)))
    if t == "map":
        v = s["values"]
        return pa.map_(pa.string(), pa.field("value", _arrow_type(v), nullable=_nullable(v)))
    if t == "record":
        return pa.struct([pa.field(f["name"], _arrow_type(f["type"]), nullable=_nullable(f["type"]))
                          for f in s["fields"]])
    raise SchemaError(f"no Parquet mapping for Avro type {t!r}")


def _nullable(s: Any) -> bool:
    return (isinstance(s, list) and "null" in s) or s == "null"


def arrow_value_converter(schema: Any) -> Converter | None:
    """Converter from raw Avro values to what ``pyarrow`` accepts for the mapped types
    (decimal bytes -> Decimal; ints for dates/timestamps are accepted as they are)."""

    def leaf(node):
        if node.get("logicalType") == "decimal" and node.get("type") in ("bytes", "fixed"):
            return decimal_from_bytes(int(node.get("scale", 0)))
        return None

    return value_converter(schema, leaf)
