"""Confluent wire-format Protobuf values (ProtobufConverter / KafkaProtobufSerializer topics).

The wire format is a magic byte 0, the 4-byte big-endian schema id, the *message indexes* (which message of the
schema's ``.proto`` file the payload is: a zigzag-varint count then that many zigzag-varint indexes into the
file's messages and their nested messages; the single byte 0 stands for ``[0]``, the first message), then the
Protobuf payload.

The registry holds ``.proto`` text. It is compiled once per schema id per process with ``protoc`` (the
``grpcio-tools`` package, Google's compiler as a Python extension; imports of Google's well-known types are
resolved from its bundled files) into descriptors, and payloads are parsed with Google's ``protobuf`` runtime.

Each message becomes what Confluent's ``ProtobufData`` makes of it for a Connect sink, expressed as an Avro schema
(lakesink's value schema model), so every format can write it -- JSON, Avro and Parquet:

* message → record (name: the message name, namespace: the package and enclosing messages); every field is
  present, unset proto3 scalars with their default value; a message-typed field is nullable (null when unset);
* int32/sint32/sfixed32 → int; uint32/fixed32 and every 64-bit integer → long; float/double/bool/string/bytes
  as themselves; enum → string (the value's name; an unknown number is written as its number in text);
* ``repeated`` → array; ``map<string, V>`` → map; other map keys → array of ``{key, value}`` records;
* a ``oneof`` → one nullable record field named after the oneof, whose members are nullable fields (Connect's
  shape); proto3 ``optional`` scalars → nullable fields;
* ``google.protobuf.Timestamp`` → long ``timestamp-millis``; other well-known types are messages like any other.

Values are in lakesink's raw Avro form (unions as the bare branch value, logical types as their base values).
"""
from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

from lakesink.decoders import Decoder, check_strategy, registered, registry_for, wire_schema_id
from lakesink.errors import DecodeError, InvalidArgumentError
from lakesink.objects.records import SOURCE_ATTR
from lakesink.schemas.avro import value_schema
from lakesink.schemas.registry import subject_name

TIMESTAMP = "google.protobuf.Timestamp"

INSTALL_HINT = "Protobuf values need the protobuf and grpcio-tools packages (pip install 'lakesink[protobuf]')"


def available() -> bool:
    """Whether the Protobuf runtime and compiler are installed."""
    try:
        import google.protobuf  # noqa: F401
        import grpc_tools.protoc  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------------------------------------- wire format

def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned LEB128 varint at ``pos``: (value, next position). ValueError when truncated."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def message_indexes(buf: bytes, pos: int = 5) -> tuple[list[int], int]:
    """The message indexes after the 5-byte header: (indexes, position of the payload)."""
    count, pos = read_varint(buf, pos)
    count = zigzag(count)
    if count == 0:
        return [0], pos
    if count < 0 or count > 100:
        raise ValueError(f"implausible message-index count {count}")
    out = []
    for _ in range(count):
        i, pos = read_varint(buf, pos)
        out.append(zigzag(i))
    return out, pos


def encode_indexes(indexes: list[int]) -> bytes:
    """The wire bytes of ``indexes`` (``[0]`` is the single byte 0, as Confluent's serializers write it)."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            b = n & 0x7F
            n >>= 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def zz(n: int) -> int:
        return (n << 1) ^ (n >> 63)

    if indexes == [0]:
        return b"\x00"
    return varint(zz(len(indexes))) + b"".join(varint(zz(i)) for i in indexes)


# ---------------------------------------------------------------------------------------------- compiling

_COMPILE_LOCK = threading.Lock()


def compile_proto(text: str, name: str = "schema.proto") -> Any:
    """Compile ``.proto`` text with protoc into a FileDescriptor (its own descriptor pool). Raises ValueError with
    protoc's message when the text does not compile."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    from grpc_tools import protoc

    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="lakesink-proto-") as d:
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            f.write(text)
        out = os.path.join(d, "set.pb")
        err_path = os.path.join(d, "protoc.err")
        # protoc reports on fd 2: point it at a file for the call, so its message can be returned, not printed
        with _COMPILE_LOCK, open(err_path, "w+b") as err:
            saved = os.dup(2)
            os.dup2(err.fileno(), 2)
            try:
                code = protoc.main(["protoc", f"-I{d}", f"-I{include}", "--include_imports",
                                    f"--descriptor_set_out={out}", name])
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            err.seek(0)
            message = err.read().decode("utf-8", "replace").strip()
        if code != 0:
            raise ValueError(" ".join(message.replace(d + os.sep, "").split())[:300] or f"protoc exit {code}")
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:  # dependencies first (protoc's order)
        pool.AddSerializedFile(fd.SerializeToString())
    return pool.FindFileByName(name)


def message_at(file_desc: Any, indexes: list[int]) -> Any:
    """The message descriptor the indexes name (top-level message, then nested ones). IndexError if none."""
    types = list(file_desc.message_types_by_name.values())
    desc = None
    for i in indexes:
        desc = types[i]
        types = list(desc.nested_types)
    if desc is None:
        raise IndexError("no message index")
    return desc


# ---------------------------------------------------------------------------------------------- schema mapping

def _scalar_avro(fd: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as F

    t = fd.type
    if t in (F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32):
        return "int"
    if t in (F.TYPE_UINT32, F.TYPE_FIXED32, F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64, F.TYPE_UINT64,
             F.TYPE_FIXED64):
        return "long"
    if t == F.TYPE_FLOAT:
        return "float"
    if t == F.TYPE_DOUBLE:
        return "double"
    if t == F.TYPE_BOOL:
        return "boolean"
    if t == F.TYPE_STRING or t == F.TYPE_ENUM:
        return "string"
    if t == F.TYPE_BYTES:
        return "bytes"
    raise ValueError(f"unsupported Protobuf field type {t} ({fd.full_name})")


def _is_map(fd: Any) -> bool:
    m = fd.message_type
    return m is not None and m.GetOptions().map_entry


def _is_repeated(fd: Any) -> bool:
    # protobuf >= 5 has is_repeated; older releases only the label
    rep = getattr(fd, "is_repeated", None)
    if rep is not None:
        return bool(rep)
    return fd.label == fd.LABEL_REPEATED


def _real_oneof(fd: Any) -> Any:
    """The oneof ``fd`` belongs to, unless it is proto3 ``optional``'s synthetic one."""
    o = fd.containing_oneof
    if o is None:
        return None
    synthetic = getattr(fd, "has_presence", False) and len(o.fields) == 1 and o.name.startswith("_")
    return None if synthetic else o


def _optional_scalar(fd: Any) -> bool:
    o = fd.containing_oneof
    return o is not None and _real_oneof(fd) is None


@dataclass
class _Mapper:
    """Builds the Avro schema of a message once (named types defined once, referenced after)."""

    defined: set

    def record(self, desc: Any) -> Any:
        if desc.full_name in self.defined:
            return desc.full_name
        self.defined.add(desc.full_name)
        fields: list[dict] = []
        done_oneofs: set = set()
        for fd in desc.fields:
            o = _real_oneof(fd)
            if o is not None:
                if o.name in done_oneofs:
                    continue
                done_oneofs.add(o.name)
                members = [{"name": m.name, "type": ["null", self.field_type(m)], "default": None} for m in o.fields]
                union_name = f"{desc.full_name}.{o.name}" if f"{desc.full_name}.{o.name}" not in self.defined \
                    else f"{desc.full_name}.{o.name}_oneof"
                self.defined.add(union_name)
                fields.append({"name": o.name, "type": ["null", {"type": "record", "name": union_name.rsplit(".", 1)[1],
                                                                  "namespace": union_name.rsplit(".", 1)[0],
                                                                  "fields": members}], "default": None})
                continue
            t = self.field_type(fd)
            if _optional_scalar(fd) or (fd.message_type is not None and not _is_repeated(fd)):
                fields.append({"name": fd.name, "type": ["null", t], "default": None})
            else:
                fields.append({"name": fd.name, "type": t})
        ns, _, name = desc.full_name.rpartition(".")
        out: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
        if ns:
            out["namespace"] = ns
        return out

    def field_type(self, fd: Any) -> Any:
        if _is_map(fd):
            key_fd, val_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
            v = self.single(val_fd)
            if key_fd.type == key_fd.TYPE_STRING:
                return {"type": "map", "values": v}
            entry = f"{fd.message_type.full_name}"
            if entry in self.defined:
                return {"type": "array", "items": entry}
            self.defined.add(entry)
            ns, _, name = entry.rpartition(".")
            return {"type": "array", "items": {"type": "record", "name": name, "namespace": ns,
                                               "fields": [{"name": "key", "type": _scalar_avro(key_fd)},
                                                          {"name": "value", "type": v}]}}
        t = self.single(fd)
        return {"type": "array", "items": t} if _is_repeated(fd) else t

    def single(self, fd: Any) -> Any:
        if fd.message_type is None:
            return _scalar_avro(fd)
        if fd.message_type.full_name == TIMESTAMP:
            return {"type": "long", "logicalType": "timestamp-millis"}
        return self.record(fd.message_type)


def avro_schema(desc: Any) -> Any:
    """The Avro schema (JSON form) lakesink archives messages of ``desc`` with (see the module docstring). It is
    marked ``"lakesink.source": "protobuf"`` (an attribute Avro readers ignore): the Kafka bytes of its records
    are Protobuf, never to be copied into Avro files or re-framed as Avro wire format."""
    return {**_Mapper(set()).record(desc), SOURCE_ATTR: "protobuf"}


# ---------------------------------------------------------------------------------------------- values

def to_value(msg: Any) -> dict:
    """A parsed message as a dict in the shape of :func:`avro_schema` (raw Avro value form)."""
    desc = msg.DESCRIPTOR
    out: dict[str, Any] = {}
    done_oneofs: set = set()
    for fd in desc.fields:
        o = _real_oneof(fd)
        if o is not None:
            if o.name in done_oneofs:
                continue
            done_oneofs.add(o.name)
            which = msg.WhichOneof(o.name)
            out[o.name] = None if which is None else {
                m.name: (_field_value(msg, m) if m.name == which else None) for m in o.fields}
            continue
        if _optional_scalar(fd) or (fd.message_type is not None and not _is_repeated(fd)):
            out[fd.name] = _field_value(msg, fd) if msg.HasField(fd.name) else None
        else:
            out[fd.name] = _field_value(msg, fd)
    return out


def _field_value(msg: Any, fd: Any) -> Any:
    v = getattr(msg, fd.name)
    if _is_map(fd):
        val_fd = fd.message_type.fields_by_name["value"]
        key_fd = fd.message_type.fields_by_name["key"]
        items = {k: _single(v[k], val_fd) for k in v}
        if key_fd.type == key_fd.TYPE_STRING:
            return items
        return [{"key": k, "value": items[k]} for k in sorted(items)]
    if _is_repeated(fd):
        return [_single(x, fd) for x in v]
    return _single(v, fd)


def _single(v: Any, fd: Any) -> Any:
    if fd.message_type is not None:
        if fd.message_type.full_name == TIMESTAMP:
            return v.seconds * 1000 + v.nanos // 1_000_000
        return to_value(v)
    if fd.enum_type is not None:
        ev = fd.enum_type.values_by_number.get(v)
        return ev.name if ev is not None else str(v)
    return v


# ---------------------------------------------------------------------------------------------- decoder

class ProtobufDecoder(Decoder):
    """Confluent wire-format Protobuf values, schemas from a Schema Registry (see the module docstring).

    The subject and version reported for each value follow ``subject_name_strategy`` as for Avro (the record
    name is the message's full name)."""

    name = "protobuf"

    def __init__(self, registry: Any = None, schema_registry_url: str | None = None,
                 registry_config: dict | None = None, registry_client: Any = None,
                 subject_name_strategy: str = "topic", subject: str | None = None, is_key: bool = False):
        if not available():
            raise InvalidArgumentError(INSTALL_HINT)
        self._registry = registry_for(registry, schema_registry_url, registry_config, registry_client, "protobuf")
        if self._registry is None:
            raise InvalidArgumentError("protobuf decoder needs a Schema Registry "
                                       "(registry / schema_registry_url / registry_client)")
        self.subject_name_strategy = check_strategy(subject_name_strategy, "protobuf")
        self.subject, self.is_key = subject, is_key
        self._files: dict[int, Any] = {}                       # schema id -> FileDescriptor
        self._messages: dict[tuple[int, tuple[int, ...], str], tuple[Any, Any]] = {}  # -> (class, ValueSchema)

    def _file(self, sid: int, topic: str, partition: int, offset: int) -> Any:
        reg = registered(self._registry, sid, topic, partition, offset)
        if reg.schema_type != "PROTOBUF":
            raise DecodeError(topic, partition, offset, f"schema id {sid} is {reg.schema_type}, not PROTOBUF")
        if reg.references:
            names = ", ".join(r[0] for r in reg.references)
            raise DecodeError(topic, partition, offset,
                              f"schema id {sid} imports other registered schemas ({names}): unsupported; only "
                              f"Google's well-known types may be imported")
        try:
            fd = compile_proto(reg.text)
        except ValueError as e:
            raise DecodeError(topic, partition, offset, f"schema id {sid} does not compile: {e}") from None
        self._files[sid] = fd
        return fd

    def _message(self, sid: int, indexes: tuple[int, ...], topic: str, partition: int, offset: int):
        from google.protobuf import message_factory

        fd = self._files.get(sid) or self._file(sid, topic, partition, offset)
        try:
            desc = message_at(fd, list(indexes))
        except IndexError:
            raise DecodeError(topic, partition, offset,
                              f"message indexes {list(indexes)} name no message of schema id {sid}") from None
        if self.subject is not None:
            subject = self.subject
        else:
            subject = subject_name(self.subject_name_strategy, topic, desc.full_name, is_key=self.is_key)
        version = self._registry.subject_version(sid, subject)
        vs = value_schema(avro_schema(desc), subject=subject if version is not None else None, id=sid,
                          version=version)
        entry = self._messages[(sid, indexes, topic)] = (message_factory.GetMessageClass(desc), vs)
        return entry

    def decode(self, raw, topic, partition, offset):
        if raw is None:
            return None, None
        raw = bytes(raw)
        sid = wire_schema_id(raw, topic, partition, offset, "Protobuf")
        try:
            indexes, start = message_indexes(raw)
        except ValueError as e:
            raise DecodeError(topic, partition, offset, f"corrupt Protobuf message indexes: {e}") from None
        key = (sid, tuple(indexes), topic)
        entry = self._messages.get(key)
        cls, vs = entry if entry is not None else self._message(sid, tuple(indexes), topic, partition, offset)
        msg = cls()
        try:
            msg.ParseFromString(raw[start:])
        except Exception as e:  # google.protobuf.message.DecodeError and friends
            raise DecodeError(topic, partition, offset,
                              f"truncated or corrupt Protobuf payload for {vs.name}: {type(e).__name__}: {e}") from None
        return to_value(msg), vs
