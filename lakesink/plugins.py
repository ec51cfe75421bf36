"""Names → implementations for the pluggable kinds: output formats, decoders and partitioners.

Modelled on fsspec's ``registry.py``: per kind, one table ``short name → dotted path`` of the class
(imported with :mod:`importlib` on first use and cached) and ONE alias table (Confluent / Kafka Connect
class names and other spellings → short name). Config validation asks :func:`canonical`; the factories
(:func:`lakesink.objects.formats.create`, :func:`lakesink.decoders.create_decoder`) and
:mod:`lakesink.wiring` ask :func:`load`. Nothing is imported until a class is asked for.

Lookup rule (:func:`canonical`): the exact name, else its lower-cased form, in the short names or the
aliases — so ``AVRO``/``AvroFormat`` work, while Confluent class names must be spelled exactly.
Partitioners also accept a custom ``pkg.mod.Class`` (a subclass of
:class:`lakesink.objects.partitioners.Partitioner`), which :func:`load` imports.
"""
from __future__ import annotations

import importlib
from typing import Any
from lakesink.errors import InvalidArgumentError

__all__ = ["KINDS", "REGISTRY", "ALIASES", "names", "canonical", "load", "is_custom_path"]

#: kind → short name → ``package.module.Attribute`` (the order is the documented order of names).
REGISTRY: dict[str, dict[str, str]] = {
    "format": {
        "avro": "lakesink.objects.formats.avro.AvroFormat",
        "json": "lakesink.objects.formats.json.JsonFormat",
        "bytearray": "lakesink.objects.formats.bytearray.ByteArrayFormat",
        "parquet": "lakesink.objects.formats.parquet.ParquetFormat",
        "blockgzip": "lakesink.objects.formats.blockgzip.BlockGzipFormat",
    },
    #: read-only formats of other connectors' objects, adopted by ``lakesink manifest import`` (never a
    #: ``format.class``): :mod:`lakesink.objects.formats.foreign`
    "import_format": {
        "aiven_jsonl": "lakesink.objects.formats.foreign.AivenJsonlFormat",
        "aiven_csv": "lakesink.objects.formats.foreign.AivenCsvFormat",
        "lines": "lakesink.objects.formats.foreign.LinesFormat",
    },
    "decoder": {
        "avro": "lakesink.decoders.AvroDecoder",
        "json": "lakesink.decoders.JsonDecoder",
        "bytes": "lakesink.decoders.BytesDecoder",
        "string": "lakesink.decoders.StringDecoder",
        "json_schema": "lakesink.decoders.JsonSchemaDecoder",
        "protobuf": "lakesink.schemas.protobuf.ProtobufDecoder",
    },
    "partitioner": {
        "default": "lakesink.objects.partitioners.DefaultPartitioner",
        "field": "lakesink.objects.partitioners.FieldPartitioner",
        "time": "lakesink.objects.partitioners.TimeBasedPartitioner",
        "daily": "lakesink.objects.partitioners.DailyPartitioner",
        "hourly": "lakesink.objects.partitioners.HourlyPartitioner",
    },
}

_S3F = "io.confluent.connect.s3.format."
_PART = "io.confluent.connect.storage.partitioner."

#: kind → alias → short name. Aliases written in lower case also match case-insensitively.
ALIASES: dict[str, dict[str, str]] = {
    "format": {
        _S3F + "avro.AvroFormat": "avro",
        _S3F + "json.JsonFormat": "json",
        _S3F + "bytearray.ByteArrayFormat": "bytearray",
        _S3F + "parquet.ParquetFormat": "parquet",
        "lakesink.formats.BlockGzipFormat": "blockgzip",
        "avroformat": "avro",
        "jsonformat": "json",
        "bytearrayformat": "bytearray",
        "parquetformat": "parquet",
        "blockgzipformat": "blockgzip",
    },
    "import_format": {},
    "decoder": {
        "org.apache.kafka.connect.converters.ByteArrayConverter": "bytes",
        "org.apache.kafka.connect.storage.StringConverter": "string",
        "org.apache.kafka.connect.json.JsonConverter": "json",
        "io.confluent.connect.avro.AvroConverter": "avro",
        "io.confluent.connect.json.JsonSchemaConverter": "json_schema",
        "io.confluent.connect.protobuf.ProtobufConverter": "protobuf",
        "bytearray": "bytes",
        "jsonschema": "json_schema",
    },
    "partitioner": {
        _PART + "DefaultPartitioner": "default",
        _PART + "FieldPartitioner": "field",
        _PART + "TimeBasedPartitioner": "time",
        _PART + "DailyPartitioner": "daily",
        _PART + "HourlyPartitioner": "hourly",
        "defaultpartitioner": "default",
        "fieldpartitioner": "field",
        "timebased": "time",
        "timebasedpartitioner": "time",
        "dailypartitioner": "daily",
        "hourlypartitioner": "hourly",
    },
}

KINDS: tuple[str, ...] = tuple(REGISTRY)

_loaded: dict[tuple[str, str], Any] = {}


def _table(kind: str) -> dict[str, str]:
    try:
        return REGISTRY[kind]
    except KeyError:
        raise InvalidArgumentError(f"unknown registry kind {kind!r}; expected one of {list(KINDS)}") from None


def names(kind: str) -> tuple[str, ...]:
    """The short names of ``kind``, in their documented order."""
    return tuple(_table(kind))


def canonical(kind: str, name: Any) -> str | None:
    """The short name ``name`` stands for (a short name or an alias), or None when it is neither.

    Custom partitioner paths are not resolved here (see :func:`is_custom_path` / :func:`load`)."""
    table, aliases = _table(kind), ALIASES[kind]
    if not isinstance(name, str):
        return None
    for candidate in (name, name.lower()):
        if candidate in table:
            return candidate
        if candidate in aliases:
            return aliases[candidate]
    return None


def is_custom_path(name: str) -> bool:
    """``pkg.mod.Class``-shaped (dotted Python identifiers)."""
    parts = name.split(".")
    return len(parts) >= 2 and all(p.isidentifier() for p in parts)


def _import(path: str) -> Any:
    mod_name, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(mod_name), attr)


def load(kind: str, name: str) -> Any:
    """The class registered for ``name`` (short name or alias), imported on first use and cached.

    A partitioner ``name`` that is not registered but looks like ``pkg.mod.Class`` is imported and
    checked to subclass ``Partitioner`` (not cached: the module may change between jobs).
    Raises ValueError for an unknown name (message ``unknown <kind> ...``) or a bad custom class."""
    short = canonical(kind, name)
    if short is None:
        if kind == "partitioner" and isinstance(name, str) and "." in name:
            from lakesink.objects.partitioners import load_partitioner_class

            return load_partitioner_class(name)
        raise InvalidArgumentError(f"unknown {kind} {name!r}; expected one of {list(names(kind))}")
    key = (kind, short)
    hit = _loaded.get(key)
    if hit is None:
        hit = _loaded[key] = _import(REGISTRY[kind][short])
    return hit
