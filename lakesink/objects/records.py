"""The record model shared by partitioners, rotation and formats (no Spark here)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


#: Attribute of an Avro record schema lakesink derived from another schema language (``"protobuf"``): such a
#: record's Kafka bytes are not Avro, so they are never copied into Avro files nor re-framed as Avro wire format.
SOURCE_ATTR = "lakesink.source"


@dataclass(frozen=True)
class ValueSchema:
    """Identity of a record's value schema (an Avro schema, parsed to JSON-compatible form).

    Two records have "the same schema" iff their fingerprints and versions are equal.
    ``version`` is the Schema Registry version of the subject (Connect's ``Schema.version()``);
    it is None when unknown, which only ``schema.compatibility=NONE`` accepts.
    """

    avro: Any
    fingerprint: str
    subject: str | None = None
    id: int | None = None
    version: int | None = None

    @property
    def avro_wire(self) -> bool:
        """Whether values of this schema arrive as Confluent wire-format *Avro* (vs. a schema lakesink mapped to
        Avro from Protobuf, whose registry id names a .proto)."""
        return not (isinstance(self.avro, dict) and SOURCE_ATTR in self.avro)

    @property
    def name(self) -> str | None:
        """Full name of a named schema (record/enum/fixed), else None."""
        a = self.avro
        if isinstance(a, dict) and "name" in a:
            ns = a.get("namespace")
            n = a["name"]
            return n if ("." in n or not ns) else f"{ns}.{n}"
        return None


@dataclass(slots=True)
class SinkRecord:
    """One Kafka record after decoding, as the object layer sees it.

    ``value`` is the decoded value: a dict for Avro records / JSON objects, list, str, int, float,
    bool, bytes (ByteArray / bytes decoder), or None for a tombstone. ``raw_value`` keeps the bytes
    read from Kafka. ``value_schema`` is None for schemaless values. ``raw_avro`` is set (by the
    sink, for the bare-Avro value decoder) when ``raw_value`` is exactly one bare Avro datum
    written with that schema: the Avro format may then copy ``raw_value`` instead of re-encoding.
    ``timestamp_type`` is Kafka's id (-1 none, 0 CreateTime, 1 LogAppendTime), None when the reader did not
    carry it (the record-metadata side file then says CreateTime for a record with a timestamp).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...] = ()
    value_schema: ValueSchema | None = None
    raw_value: bytes | None = None
    raw_key: bytes | None = None
    extra: dict = field(default_factory=dict)
    raw_avro: ValueSchema | None = None
    timestamp_type: int | None = None
