"""Kafka key/value decoders: bytes -> (value, ValueSchema | None).

``create_decoder(name, **options)`` builds one of:

* ``bytes``  — the raw bytes (ByteArrayConverter).
* ``string`` — UTF-8 text (StringConverter); invalid UTF-8 is a DecodeError. Option ``encoding``.
* ``json``   — ``json.loads`` (JsonConverter, schemas.enable=false). NaN/Infinity are rejected as
  Jackson does. Option ``envelope=True`` unwraps a ``{"schema":..,"payload":..}`` envelope
  (the Connect schema in it is ignored: no ValueSchema).
* ``avro``   — Confluent wire format (magic 0, 4-byte big-endian schema id, Avro binary) with schemas
  from ``schema_registry_url`` (or an injected ``registry_client``), or a fixed ``schema`` (JSON
  text, dict, or .avsc path) either for bare Avro binary (``wire_format=False``) or for wire-format
  bytes whose id is then NOT checked (ValueSchema without id/subject/version).

Avro values are *raw* (no logical-type conversion; see :mod:`lakesink.schemas.avro`) and unions decode
to the bare branch value. A payload with trailing bytes is rejected: the Avro format's fast path
copies payloads into container blocks verbatim, so they must be exactly one datum.
Registry lookups are cached per schema id; subject/version come from ``lookup_schema`` under the
subject of ``subject_name_strategy`` (topic | record | topic_record, or a fixed ``subject``).
A registry that cannot be reached raises LakesinkError (the batch fails) — only problems of the
record itself (bad magic byte, unknown id, truncated payload) are DecodeErrors.
"""
from __future__ import annotations

import io
import json
from typing import Any, Callable, Sequence

import fastavro

from lakesink import registry
from lakesink.errors import DecodeError, InvalidArgumentError, LakesinkError, SchemaError
from lakesink.objects.records import ValueSchema
from lakesink.schemas.avro import parse_schema, raw_reader_schema, value_schema

Decoded = tuple[Any, "ValueSchema | None"]


class Decoder:
    """Base: ``decode`` one record, ``decode_many`` a batch (same results, less overhead)."""

    name = ""

    def decode(self, raw: bytes | None, topic: str, partition: int, offset: int) -> Decoded:
        """Decode one key/value; None (tombstone) -> (None, None); raises DecodeError."""
        raise NotImplementedError

    def decode_many(self, raws: Sequence[bytes | None], topic: str, partition: int, offsets: Sequence[int],
                    errors: str = "raise") -> list:
        """Decode a batch of one topic-partition. ``errors="raise"`` raises the first DecodeError;
        ``errors="return"`` puts the DecodeError instance in that record's slot instead."""
        out = []
        dec = self.decode
        for raw, off in zip(raws, offsets):
            try:
                out.append(dec(raw, topic, partition, off))
            except DecodeError as e:
                if errors != "return":
                    raise
                out.append(e)
        return out


class BytesDecoder(Decoder):
    name = "bytes"

    def decode(self, raw, topic, partition, offset):
        return (None if raw is None else bytes(raw)), None

    def decode_many(self, raws, topic, partition, offsets, errors="raise"):
        return [(r, None) for r in raws]


class StringDecoder(Decoder):
    name = "string"

    def __init__(self, encoding: str = "utf-8"):
        self.encoding = encoding

    def decode(self, raw, topic, partition, offset):
        if raw is None:
            return None, None
        try:
            return bytes(raw).decode(self.encoding), None
        except UnicodeDecodeError as e:
            raise DecodeError(topic, partition, offset, f"invalid {self.encoding}: {e}") from None


_JSON_WS = json.decoder.WHITESPACE.match


def _reject_constant(name: str):
    raise InvalidArgumentError(f"{name} is not valid JSON")


class JsonDecoder(Decoder):
    name = "json"

    def __init__(self, envelope: bool = False):
        self.envelope = envelope
        self._decoder = json.JSONDecoder(parse_constant=_reject_constant)
        self._loads = self._decoder.decode

    def decode(self, raw, topic, partition, offset):
        if raw is None:
            return None, None
        try:
            text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else bytes(raw).decode("utf-8")
            v = self._loads(text)
        except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise DecodeError(topic, partition, offset, f"invalid JSON: {e}") from None
        if self.envelope and isinstance(v, dict) and v.keys() == {"schema", "payload"}:
            v = v["payload"]
        return v, None

    def decode_many(self, raws, topic, partition, offsets, errors="raise"):
        """:meth:`decode` per record in one loop (``JSONDecoder.decode`` inlined: skip whitespace,
        scan one value, skip whitespace, nothing may follow); a record that fails any step is
        handed to :meth:`decode`, which raises (or, ``errors="return"``, gives) the same error."""
        scan = self._decoder.scan_once
        ws = _JSON_WS
        envelope = self.envelope
        out = []
        append = out.append
        for raw in raws:
            if raw is None:
                append((None, None))
                continue
            try:
                text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else bytes(raw).decode("utf-8")
                v, end = scan(text, ws(text, 0).end())
                end = ws(text, end).end()
            except Exception:  # noqa: BLE001 - decode() below names the record and the reason
                break
            if end != len(text):
                break
            if envelope and isinstance(v, dict) and v.keys() == {"schema", "payload"}:
                v = v["payload"]
            append((v, None))
        else:
            return out
        i = len(out)
        return out + super().decode_many(raws[i:], topic, partition, offsets[i:], errors)


# ---------------------------------------------------------------------------------------------
# Avro

_REGISTRY_CLIENTS: dict[tuple, Any] = {}


def shared_registry_client(url: str, config: dict | None = None):
    """A Schema Registry client, one per (url, config) per process. ``mock://`` URLs give
    confluent-kafka's in-memory mock; sharing it lets tests register schemas our decoder sees."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    key = (url, tuple(sorted((config or {}).items())))
    client = _REGISTRY_CLIENTS.get(key)
    if client is None:
        client = _REGISTRY_CLIENTS[key] = SchemaRegistryClient.new_client({"url": url, **(config or {})})
    return client


SUBJECT_STRATEGIES = ("topic", "record", "topic_record")


class AvroDecoder(Decoder):
    """Confluent wire-format / fixed-schema Avro. See the module docstring for the options."""

    name = "avro"

    def __init__(self, schema_registry_url: str | None = None, registry_client: Any = None,
                 registry_config: dict | None = None, schema: Any = None, wire_format: bool = True,
                 subject_name_strategy: str = "topic", subject: str | None = None, is_key: bool = False):
        if schema is None and registry_client is None and not schema_registry_url:
            raise InvalidArgumentError("avro decoder needs schema_registry_url (or registry_client) or a fixed schema")
        if not wire_format and schema is None:
            raise InvalidArgumentError("wire_format=False needs a fixed schema")
        if subject_name_strategy not in SUBJECT_STRATEGIES:
            raise InvalidArgumentError(f"subject_name_strategy {subject_name_strategy!r} not in {list(SUBJECT_STRATEGIES)}")
        self.wire_format = wire_format
        self.subject_name_strategy, self.subject, self.is_key = subject_name_strategy, subject, is_key
        self._fixed: tuple[ValueSchema, Any] | None = None
        if schema is not None:
            try:
                avro = parse_schema(schema)
            except SchemaError as e:
                raise InvalidArgumentError(str(e)) from None
            vs = value_schema(avro)
            self._fixed = (vs, raw_reader_schema(vs))
        self._client = registry_client
        if self._client is None and schema_registry_url and schema is None:
            self._client = shared_registry_client(schema_registry_url, registry_config)
        self._by_id: dict[tuple[int, str], tuple[ValueSchema, Any]] = {}
        self._read: Callable = fastavro.schemaless_reader

    @property
    def fixed_schema(self) -> ValueSchema | None:
        """The fixed ``schema`` every value is read with (None with a Schema Registry)."""
        return self._fixed[0] if self._fixed is not None else None

    # -- schema lookup

    def _subject_for(self, topic: str, avro: Any) -> str:
        if self.subject:
            return self.subject
        suffix = "key" if self.is_key else "value"
        name = avro.get("name") if isinstance(avro, dict) else None
        if isinstance(avro, dict) and name and "." not in name and avro.get("namespace"):
            name = f"{avro['namespace']}.{name}"
        if self.subject_name_strategy == "record" and name:
            return name
        if self.subject_name_strategy == "topic_record" and name:
            return f"{topic}-{name}"
        return f"{topic}-{suffix}"

    def _lookup(self, sid: int, topic: str, partition: int, offset: int) -> tuple[ValueSchema, Any]:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            schema = self._client.get_schema(sid)
        except SchemaRegistryError as e:
            if getattr(e, "http_status_code", None) == 404:
                raise DecodeError(topic, partition, offset, f"unknown schema id {sid}") from None
            raise LakesinkError(f"schema registry error fetching id {sid}: {e}") from None
        except Exception as e:  # connection refused, timeouts: not the record's fault
            raise LakesinkError(f"schema registry unreachable fetching id {sid}: {type(e).__name__}: {e}") from None
        if (schema.schema_type or "AVRO").upper() != "AVRO":
            raise DecodeError(topic, partition, offset, f"schema id {sid} is {schema.schema_type}, not AVRO")
        if schema.references:
            raise DecodeError(topic, partition, offset, f"schema id {sid} uses schema references (unsupported)")
        try:
            avro = parse_schema(schema.schema_str)
        except SchemaError as e:
            raise DecodeError(topic, partition, offset, f"schema id {sid}: {e}") from None
        subject, version = self._subject_for(topic, avro), None
        try:
            registered = self._client.lookup_schema(subject, schema)
            version = registered.version
        except Exception:  # not under that subject (other naming strategy): identity without version
            subject = None
        vs = value_schema(avro, subject=subject, id=sid, version=version)
        entry = self._by_id[(sid, topic)] = (vs, raw_reader_schema(vs))
        return entry

    # -- decoding

    def decode(self, raw, topic, partition, offset):
        if raw is None:
            return None, None
        if self.wire_format:
            if len(raw) < 5 or raw[0] != 0:
                what = ("empty value" if not raw else f"bad magic byte {raw[0]}" if raw[0] != 0
                        else "value shorter than 5 bytes")
                raise DecodeError(topic, partition, offset, f"not Confluent Avro wire format: {what}")
            if self._fixed is not None:
                vs, parsed = self._fixed
            else:
                sid = int.from_bytes(raw[1:5], "big")
                entry = self._by_id.get((sid, topic))
                vs, parsed = entry if entry is not None else self._lookup(sid, topic, partition, offset)
            start = 5
        else:
            vs, parsed = self._fixed
            start = 0
        buf = io.BytesIO(raw)
        buf.seek(start)
        try:
            value = self._read(buf, parsed, None)
        except Exception as e:  # EOFError, ValueError, UnicodeDecodeError, IndexError...
            raise DecodeError(topic, partition, offset,
                              f"truncated or corrupt Avro payload for schema {vs.name or 'id'}: "
                              f"{type(e).__name__}: {e}") from None
        end = buf.tell()
        if end != len(raw):
            raise DecodeError(topic, partition, offset, f"{len(raw) - end} trailing bytes after the Avro datum")
        return value, vs


    def decode_many(self, raws, topic, partition, offsets, errors="raise"):
        """:meth:`decode` per record in one loop; any record that is not a clean datum is handed
        to :meth:`decode`, which raises (or, ``errors="return"``, gives) the exact same error."""
        if self.wire_format and self._fixed is None:
            return super().decode_many(raws, topic, partition, offsets, errors)
        vs, parsed = self._fixed
        start = 5 if self.wire_format else 0
        read, BytesIO = self._read, io.BytesIO
        out = []
        append = out.append
        for raw in raws:
            if raw is None:
                append((None, None))
                continue
            if start and (len(raw) < 5 or raw[0] != 0):
                break
            buf = BytesIO(raw)
            if start:
                buf.seek(start)
            try:
                value = read(buf, parsed, None)
            except Exception:  # noqa: BLE001 - decode() below names the record and the reason
                break
            if buf.tell() != len(raw):
                break
            append((value, vs))
        else:
            return out
        # a bad record: finish with the per-record path from it on
        i = len(out)
        return out + super().decode_many(raws[i:], topic, partition, offsets[i:], errors)


#: The registered decoder names; the classes and the alias table (Connect converter class names,
#: ``bytearray``) live in :mod:`lakesink.registry`.
DECODER_NAMES: tuple[str, ...] = registry.names("decoder")


def create_decoder(name: str, **options) -> Decoder:
    """Build a decoder by name (bytes|string|json|avro, or a Connect converter class name).
    Raises ValueError for unknown names/options."""
    cls = registry.load("decoder", name)  # ValueError: unknown decoder ...
    key = registry.canonical("decoder", name)
    try:
        return cls(**options)
    except TypeError as e:
        raise InvalidArgumentError(f"decoder {key!r}: {e}") from None
