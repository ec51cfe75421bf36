"""Schema compatibility decisions and projection (spec §4, Confluent ``StorageSchemaCompatibility``).

Only the value schema counts. For the current schema of an open file and an incoming record:

* both None, or equal (fingerprint and version) → keep writing, no projection;
* exactly one None → :class:`SchemaSwitchError` ("Switch between schema-based and schema-less data is
  not supported"); the rotator avoids this by rotating first (spec §3 step 2);
* mode ≠ NONE and a version is None → :class:`SchemaVersionError`;
* NONE: rotate iff the schemas differ; never project (interleaved v1/v2 ⇒ a file per switch);
* BACKWARD / FULL (FULL ≡ BACKWARD, as in Confluent): structurally incompatible → rotate;
  ``record.version > current.version`` → rotate (the newer schema becomes current);
  else project the record to the current schema;
* FORWARD: structurally incompatible → rotate; ``record.version < current.version`` → rotate;
  else project.

"Structurally compatible" = the current schema can read data written with the record's schema
(Apache ``avro`` ``ReaderWriterCompatibilityChecker``, reader = current, writer = record). That is
the question projection needs answered; it covers Confluent's type/name/params/required-field rules.

Projection (:func:`project_value`) is Avro schema resolution done by fastavro: encode with the
writer schema, decode with the reader schema (defaults fill missing fields, extra fields dropped,
numeric promotion). It costs an encode+decode per projected record — acceptable because it only
happens for records of an older/newer version than their file; when both sides are Confluent
wire-format Avro a caller can instead decode the raw bytes directly with the reader schema.
"""
from __future__ import annotations

import dataclasses
import io
import json
from enum import Enum
from functools import lru_cache
from typing import Any


from lakesink.objects.records import SinkRecord, ValueSchema
from lakesink.errors import SchemaSwitchError, SchemaVersionError

__all__ = [
    "Mode",
    "Decision",
    "SchemaSwitchError",
    "SchemaVersionError",
    "SchemaCompatibility",
    "same_schema",
    "structurally_compatible",
    "project_value",
]


class Mode(str, Enum):
    NONE = "NONE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"


class Decision(Enum):
    SAME = "same"          # write as is
    PROJECT = "project"    # write after projecting to the current schema
    ROTATE = "rotate"      # close the files; the record's schema becomes current


def same_schema(a: ValueSchema | None, b: ValueSchema | None) -> bool:
    """Equal identity: fingerprint and version (None only equals None)."""
    if a is None or b is None:
        return a is b
    return a.fingerprint == b.fingerprint and a.version == b.version


@lru_cache(maxsize=512)
def _parsed_avro(text: str) -> Any:
    import avro.schema

    return avro.schema.parse(text)


@lru_cache(maxsize=512)
def _parsed_fast(text: str) -> Any:
    import fastavro

    return fastavro.parse_schema(json.loads(text))


def _text(schema: ValueSchema) -> str:
    a = schema.avro
    return a if isinstance(a, str) and a.lstrip()[:1] in ("{", "[", '"') else json.dumps(a, sort_keys=True)


@lru_cache(maxsize=1024)
def _compatible_texts(reader: str, writer: str) -> bool:
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    result = ReaderWriterCompatibilityChecker().get_compatibility(
        reader=_parsed_avro(reader), writer=_parsed_avro(writer)
    )
    return result.compatibility is SchemaCompatibilityType.compatible


def structurally_compatible(reader: ValueSchema, writer: ValueSchema) -> bool:
    """True when data written with ``writer`` can be read (projected) with ``reader``."""
    if reader.fingerprint == writer.fingerprint:
        return True
    try:
        return _compatible_texts(_text(reader), _text(writer))
    except Exception:  # an unparsable schema cannot be projected: treat as incompatible → rotate
        return False


def project_value(value: Any, from_schema: ValueSchema, to_schema: ValueSchema) -> Any:
    """Avro schema resolution of ``value`` (written with ``from_schema``) into ``to_schema``."""
    if from_schema.fingerprint == to_schema.fingerprint:
        return value
    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _parsed_fast(_text(from_schema)), value)
    buf.seek(0)
    return fastavro.schemaless_reader(buf, _parsed_fast(_text(from_schema)), _parsed_fast(_text(to_schema)))


class SchemaCompatibility:
    """Decides, per record, whether the open files must rotate or the record be projected."""

    def __init__(self, mode: Mode | str = Mode.NONE):
        self.mode = Mode(mode) if not isinstance(mode, Mode) else mode

    def decide(self, record: SinkRecord, current: ValueSchema | None) -> Decision:
        """SAME, PROJECT or ROTATE for ``record`` against the file's ``current`` schema."""
        incoming = record.value_schema
        if same_schema(incoming, current):
            return Decision.SAME
        if incoming is None or current is None:
            raise SchemaSwitchError(record.topic, record.partition, record.offset,
                                    "Switch between schema-based and schema-less data is not supported")
        if self.mode is not Mode.NONE and (incoming.version is None or current.version is None):
            raise SchemaVersionError(record.topic, record.partition, record.offset,
                                     f"Schema version required for {self.mode.value} compatibility")
        if self.mode is Mode.NONE:
            return Decision.ROTATE
        if not structurally_compatible(current, incoming):
            return Decision.ROTATE
        assert incoming.version is not None and current.version is not None
        if self.mode is Mode.FORWARD:
            return Decision.ROTATE if incoming.version < current.version else Decision.PROJECT
        return Decision.ROTATE if incoming.version > current.version else Decision.PROJECT

    def should_change(self, record: SinkRecord, current: ValueSchema | None) -> bool:
        """Confluent ``shouldChangeSchema``."""
        return self.decide(record, current) is Decision.ROTATE

    def project(self, record: SinkRecord, current: ValueSchema | None) -> SinkRecord:
        """The record with its value projected to ``current`` (unchanged when not needed)."""
        incoming = record.value_schema
        if current is None or incoming is None or same_schema(incoming, current):
            return record
        if self.mode is Mode.NONE:
            return record
        try:
            value = project_value(record.value, incoming, current)
        except Exception as e:
            raise SchemaSwitchError(record.topic, record.partition, record.offset,
                                    f"cannot project value to schema {current.name or current.fingerprint} "
                                    f"v{current.version}: {e}") from None
        return dataclasses.replace(record, value=value, value_schema=current)
