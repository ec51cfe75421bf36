"""Kafka key/value decoders: bytes -> (value, ValueSchema | None).

``create_decoder(name, **options)`` builds one of:

* ``bytes``  — the raw bytes (ByteArrayConverter).
* ``string`` — UTF-8 text (StringConverter); invalid UTF-8 is a DecodeError. Option ``encoding``.
* ``json``   — ``json.loads`` (JsonConverter, schemas.enable=false). NaN/Infinity are rejected as
  Jackson does. Option ``envelope=True`` unwraps a ``{"schema":..,"payload":..}`` envelope
  (the Connect schema in it is ignored: no ValueSchema).
* ``avro``   — Confluent wire format (magic 0, 4-byte big-endian schema id, Avro binary) with schemas
  from a Schema Registry (``registry``: :class:`lakesink.schemas.registry.RegistrySettings`, or
  ``schema_registry_url`` + ``registry_config``, or an injected confluent-kafka ``registry_client``), or a
  fixed ``schema`` (JSON text, dict, or .avsc path) either for bare Avro binary (``wire_format=False``) or
  for wire-format bytes whose id is then NOT checked (ValueSchema without id/subject/version).
* ``json_schema`` — Confluent wire-format JSON Schema values (JsonSchemaConverter / JSONSerializer: magic
  0, 4-byte schema id, JSON text): the id must name a JSON schema in the registry; the value is the JSON
  text parsed as the ``json`` decoder parses it and carries no ValueSchema (archived like schemaless JSON).
  ``validate=True`` also checks each value against its schema (needs the ``jsonschema`` package; off by
  default: it costs far more than the parse).

Avro values are *raw* (no logical-type conversion; see :mod:`lakesink.schemas.avro`) and unions decode
to the bare branch value. A payload with trailing bytes is rejected: the Avro format's fast path
copies payloads into container blocks verbatim, so they must be exactly one datum.
Registry calls go through :mod:`lakesink.schemas.registry` (one call per schema id per process, cached);
an Avro value's subject is the one ``subject_name_strategy`` names (topic | record | topic_record, or a
fixed ``subject``) and its version that subject's version of the id (None when the id is not registered
under it). A registry that cannot be reached, or refuses the credentials, raises RegistryError (the
batch fails) — only problems of the record itself (bad magic byte, unknown id, truncated payload) are
DecodeErrors.
"""
from __future__ import annotations

import io
import json
from typing import Any, Callable, NamedTuple, Sequence

import fastavro

from lakesink import plugins
from lakesink.errors import DecodeError, InvalidArgumentError, SchemaError, SchemaNotFoundError
from lakesink.objects.records import ValueSchema
from lakesink.schemas.avro import parse_schema, raw_reader_schema, value_schema
from lakesink.schemas.avro_arrow import decode_column
from lakesink.schemas.avro_check import check_datums
from lakesink.schemas.registry import (STRATEGIES, RegisteredSchema, RegistryClient, RegistrySettings,
                                       canonical_strategy, shared_client, subject_name)

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

#: Subject name strategies (also Confluent's class names, see :func:`lakesink.schemas.registry.canonical_strategy`).
SUBJECT_STRATEGIES = STRATEGIES


def registry_for(registry: RegistrySettings | None, schema_registry_url: str | None, registry_config: dict | None,
                 registry_client: Any, who: str) -> RegistryClient | None:
    """The decoder's :class:`RegistryClient`: an injected confluent-kafka client (not shared), else the
    process-wide client of ``registry`` (or of ``schema_registry_url`` + ``registry_config``), else None."""
    if registry_client is not None:
        return RegistryClient(registry_client)
    if registry is None and schema_registry_url:
        conf = dict(registry_config or {})
        known = {"basic.auth.user.info": "user_info", "ssl.ca.location": "ssl_ca_location",
                 "ssl.certificate.location": "ssl_certificate_location", "ssl.key.location": "ssl_key_location",
                 "ssl.key.password": "ssl_key_password", "timeout": "timeout_s", "max.retries": "max_retries",
                 "retries.wait.ms": "retries_wait_ms", "retries.max.wait.ms": "retries_max_wait_ms"}
        kwargs = {known[k]: conf.pop(k) for k in list(conf) if k in known}
        try:
            registry = RegistrySettings(schema_registry_url, extra=tuple(sorted(conf.items())), **kwargs)
        except TypeError as e:
            raise InvalidArgumentError(f"{who} decoder: registry_config: {e}") from None
    if registry is None:
        return None
    if not isinstance(registry, RegistrySettings):
        raise InvalidArgumentError(f"{who} decoder: registry must be a RegistrySettings, not {type(registry).__name__}")
    return shared_client(registry)


def check_strategy(name: str, who: str) -> str:
    """The short name of a subject name strategy, or InvalidArgumentError naming the choices."""
    short = canonical_strategy(name)
    if short is None:
        raise InvalidArgumentError(f"{who} decoder: subject_name_strategy {name!r} not in {list(STRATEGIES)} "
                                   f"(or io.confluent.kafka.serializers.subject.<X>Strategy)")
    return short


def wire_schema_id(raw: Any, topic: str, partition: int, offset: int, what: str) -> int:
    """The schema id of a Confluent wire-format payload (magic byte 0 + 4-byte big-endian id)."""
    if len(raw) < 5 or raw[0] != 0:
        why = ("empty value" if not raw else f"bad magic byte {raw[0]}" if raw[0] != 0
               else "value shorter than 5 bytes")
        raise DecodeError(topic, partition, offset, f"not Confluent {what} wire format: {why}")
    return int.from_bytes(raw[1:5], "big")


def registered(client: RegistryClient, sid: int, topic: str, partition: int, offset: int) -> RegisteredSchema:
    """``client.schema(sid)``; an id the registry does not know is the record's DecodeError."""
    try:
        return client.schema(sid)
    except SchemaNotFoundError:
        raise DecodeError(topic, partition, offset,
                          f"unknown schema id {sid} (not in the Schema Registry at {client.shown_url})") from None


class AvroDecoder(Decoder):
    """Confluent wire-format / fixed-schema Avro. See the module docstring for the options."""

    name = "avro"

    def __init__(self, schema_registry_url: str | None = None, registry_client: Any = None,
                 registry_config: dict | None = None, schema: Any = None, wire_format: bool = True,
                 subject_name_strategy: str = "topic", subject: str | None = None, is_key: bool = False,
                 registry: RegistrySettings | None = None):
        if schema is None and registry_client is None and not schema_registry_url and registry is None:
            raise InvalidArgumentError("avro decoder needs a Schema Registry (registry / schema_registry_url / "
                                       "registry_client) or a fixed schema")
        if not wire_format and schema is None:
            raise InvalidArgumentError("wire_format=False needs a fixed schema")
        self.wire_format = wire_format
        self.subject_name_strategy = check_strategy(subject_name_strategy, "avro")
        self.subject, self.is_key = subject, is_key
        self._fixed: tuple[ValueSchema, Any] | None = None
        if schema is not None:
            try:
                avro = parse_schema(schema)
            except SchemaError as e:
                raise InvalidArgumentError(str(e)) from None
            vs = value_schema(avro)
            self._fixed = (vs, raw_reader_schema(vs))
        self._registry = None if schema is not None else registry_for(
            registry, schema_registry_url, registry_config, registry_client, "avro")
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
        name = avro.get("name") if isinstance(avro, dict) else None
        if isinstance(avro, dict) and name and "." not in name and avro.get("namespace"):
            name = f"{avro['namespace']}.{name}"
        return subject_name(self.subject_name_strategy, topic, name, self.is_key)

    def _lookup(self, sid: int, topic: str, partition: int, offset: int) -> tuple[ValueSchema, Any]:
        reg = registered(self._registry, sid, topic, partition, offset)
        if reg.schema_type != "AVRO":
            raise DecodeError(topic, partition, offset, f"schema id {sid} is {reg.schema_type}, not AVRO")
        if reg.references:
            raise DecodeError(topic, partition, offset, f"schema id {sid} uses schema references (unsupported)")
        try:
            avro = parse_schema(reg.text)
        except SchemaError as e:
            raise DecodeError(topic, partition, offset, f"schema id {sid}: {e}") from None
        subject = self._subject_for(topic, avro)
        version = self._registry.subject_version(sid, subject)
        if version is None:  # not under the subject the strategy names: identity without version
            subject = None
        vs = value_schema(avro, subject=subject, id=sid, version=version)
        entry = self._by_id[(sid, topic)] = (vs, raw_reader_schema(vs))
        return entry

    # -- decoding

    def decode(self, raw, topic, partition, offset):
        if raw is None:
            return None, None
        if self.wire_format:
            sid = wire_schema_id(raw, topic, partition, offset, "Avro")
            if self._fixed is not None:
                vs, parsed = self._fixed
            else:
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


    def wire_run(self, raws: Any, topic: str, partition: int, offset: int) -> ValueSchema | None:
        """The registry schema of ``raws`` (bytes, or an Arrow binary array) when they are Confluent wire-format
        values that all carry ONE schema id and are each exactly one datum of it (what the record path decodes,
        then copies after the 5-byte prefix); None otherwise (several ids, a null, a bad prefix, an unknown id,
        a datum that does not decode or has bytes after it): such values take the record path, which names the
        record. The datums are checked a column at a time (:func:`~lakesink.schemas.avro_check.check_datums`),
        or decoded one by one for a schema that check does not walk."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not self.wire_format or self._fixed is not None or not len(raws):
            return None
        values = raws if isinstance(raws, pa.Array) else pa.array(raws, pa.binary())
        if values.null_count:
            return None
        prefix = values[0].as_py()[:5]
        if len(prefix) < 5 or prefix[0] != 0:
            return None
        if not pc.all(pc.equal(pc.binary_slice(values, 0, 5), pa.scalar(prefix, values.type))).as_py():
            return None
        sid = int.from_bytes(prefix[1:5], "big")
        entry = self._by_id.get((sid, topic))
        if entry is None:
            try:
                entry = self._lookup(sid, topic, partition, offset)
            except DecodeError:
                return None
        vs, parsed = entry
        verdict = check_datums(values, parsed, skip=5)
        if verdict is None:
            verdict = self._each_one_datum(values.to_pylist(), parsed, 5)
        return vs if verdict else None

    def check_fixed(self, values: Any) -> bool | None:
        """With a fixed ``schema`` and bare datums: whether every value of the Arrow binary array ``values`` is
        exactly one datum of it (True/False); None when the schema holds types the column check does not walk,
        or the values are wire-framed (decode instead)."""
        if self._fixed is None or self.wire_format:
            return None
        return check_datums(values, self._fixed[1])

    def decode_fixed_column(self, values: Any) -> Any:
        """With a fixed ``schema`` and bare datums: the Arrow binary array ``values`` decoded into a pyarrow
        Table in the Parquet file's Arrow types (:func:`~lakesink.schemas.avro_arrow.decode_column`); False
        when a value is not exactly one datum the record path would write, None when the schema or the
        column is not one that decoder takes, or the values are wire-framed (decode one by one instead)."""
        if self._fixed is None or self.wire_format:
            return None
        return decode_column(values, self._fixed[1])

    def _each_one_datum(self, raws: Sequence[bytes], parsed: Any, skip: int) -> bool:
        read, BytesIO = self._read, io.BytesIO
        for raw in raws:
            buf = BytesIO(raw)
            buf.seek(skip)
            try:
                read(buf, parsed, None)
            except Exception:  # noqa: BLE001 - the record path names the record and the reason
                return False
            if buf.tell() != len(raw):
                return False
        return True

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


# ---------------------------------------------------------------------------------------------
# JSON Schema (Confluent wire format)

class JsonSchemaDecoder(Decoder):
    """Confluent wire-format JSON Schema values (magic 0, schema id, JSON text). The id is resolved once
    per process and must name a JSON schema; the value is parsed like the ``json`` decoder does (NaN and
    Infinity rejected) and carries no ValueSchema. ``validate=True`` checks each value against its schema
    with ``jsonschema`` (schemas with references cannot be validated and are refused)."""

    name = "json_schema"

    def __init__(self, registry: RegistrySettings | None = None, schema_registry_url: str | None = None,
                 registry_config: dict | None = None, registry_client: Any = None, validate: bool = False,
                 subject_name_strategy: str = "topic", subject: str | None = None, is_key: bool = False):
        self._registry = registry_for(registry, schema_registry_url, registry_config, registry_client, "json_schema")
        if self._registry is None:
            raise InvalidArgumentError("json_schema decoder needs a Schema Registry "
                                       "(registry / schema_registry_url / registry_client)")
        # the subject is not needed to decode (the id names the schema); kept for symmetry with avro
        self.subject_name_strategy = check_strategy(subject_name_strategy, "json_schema")
        self.subject, self.is_key = subject, is_key
        self.validate = bool(validate)
        if self.validate:
            try:
                import jsonschema  # noqa: F401
            except ImportError:
                raise InvalidArgumentError("json_schema decoder: validate=True needs the jsonschema package "
                                           "(pip install jsonschema)") from None
        self._json = JsonDecoder()
        self._checked: dict[int, Any] = {}  # id -> validator (or True when not validating)

    def _schema_ok(self, sid: int, topic: str, partition: int, offset: int) -> Any:
        reg = registered(self._registry, sid, topic, partition, offset)
        if reg.schema_type != "JSON":
            raise DecodeError(topic, partition, offset, f"schema id {sid} is {reg.schema_type}, not JSON")
        check: Any = True
        if self.validate:
            if reg.references:
                raise DecodeError(topic, partition, offset,
                                  f"schema id {sid} uses schema references (validation unsupported)")
            import jsonschema

            try:
                doc = json.loads(reg.text)
                cls = jsonschema.validators.validator_for(doc)
                cls.check_schema(doc)
                check = cls(doc)
            except (ValueError, jsonschema.SchemaError) as e:
                raise DecodeError(topic, partition, offset,
                                  f"schema id {sid} is not a valid JSON schema: {str(e).splitlines()[0]}") from None
        self._checked[sid] = check
        return check

    def decode(self, raw, topic, partition, offset):
        if raw is None:
            return None, None
        raw = bytes(raw)
        sid = wire_schema_id(raw, topic, partition, offset, "JSON Schema")
        check = self._checked.get(sid) or self._schema_ok(sid, topic, partition, offset)
        value, _ = self._json.decode(raw[5:], topic, partition, offset)
        if check is not True:
            err = next(iter(check.iter_errors(value)), None)
            if err is not None:
                where = "/".join(str(p) for p in err.absolute_path) or "(root)"
                raise DecodeError(topic, partition, offset,
                                  f"value does not match JSON schema id {sid} at {where}: {err.message[:200]}")
        return value, None


#: The registered decoder names; the classes and the alias table (Connect converter class names,
#: ``bytearray``) live in :mod:`lakesink.plugins`.
DECODER_NAMES: tuple[str, ...] = plugins.names("decoder")


def create_decoder(name: str, **options) -> Decoder:
    """Build a decoder by name (bytes|string|json|avro|json_schema, or a Connect converter class name).
    Raises ValueError for unknown names/options."""
    cls = plugins.load("decoder", name)  # ValueError: unknown decoder ...
    key = plugins.canonical("decoder", name)
    try:
        return cls(**options)
    except TypeError as e:
        raise InvalidArgumentError(f"decoder {key!r}: {e}") from None


class DecoderSpec(NamedTuple):
    """A decoder as a plain value (name, options) a task builds with :meth:`build`
    (:func:`lakesink.wiring.decoder_spec`)."""

    name: str
    options: dict[str, Any]

    def build(self) -> Decoder:
        return create_decoder(self.name, **self.options)
