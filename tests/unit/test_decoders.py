"""Decoders: bytes/string/json and Confluent wire-format Avro against a mock:// registry."""
from __future__ import annotations

import io
import json
import struct
import uuid

import fastavro
import pytest

from lakesink.decoders import DECODER_NAMES, create_decoder
from lakesink.errors import DecodeError, LakesinkError
from lakesink.schemas.registry import shared_registry_client

USER = {"type": "record", "name": "User", "namespace": "ex", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "amt", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "opt", "type": ["null", "string"], "default": None},
]}


@pytest.fixture
def registry():
    """A fresh shared mock registry (unique URL) and a serializer for topic 'users'."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    url = f"mock://{uuid.uuid4().hex}"
    client = shared_registry_client(url)

    def serialize(value, schema=USER, topic="users"):
        ser = AvroSerializer(client, json.dumps(schema))
        return ser(value, SerializationContext(topic, MessageField.VALUE))

    return url, client, serialize


def user(i):
    return {"id": i, "name": f"ü{i}", "ts": 1700000000000 + i, "amt": (i * 7).to_bytes(2, "big", signed=True),
            "opt": None if i % 2 else "x"}


def test_names():
    assert set(DECODER_NAMES) == {"bytes", "string", "json", "avro", "json_schema", "protobuf"}
    assert create_decoder("io.confluent.connect.avro.AvroConverter", schema=USER).name == "avro"
    with pytest.raises(ValueError):
        create_decoder("thrift")
    with pytest.raises(ValueError):  # protobuf needs a registry: its values name their schema by id
        create_decoder("io.confluent.connect.protobuf.ProtobufConverter")
    with pytest.raises(ValueError):
        create_decoder("json", nope=1)
    with pytest.raises(ValueError):
        create_decoder("avro")  # neither registry nor schema


def test_bytes_string_json():
    assert create_decoder("bytes").decode(b"\x00\xff", "t", 0, 0) == (b"\x00\xff", None)
    assert create_decoder("string").decode("é".encode(), "t", 0, 0) == ("é", None)
    with pytest.raises(DecodeError, match=r"t-1@5.*invalid utf-8"):
        create_decoder("string").decode(b"\xff", "t", 1, 5)
    j = create_decoder("json")
    assert j.decode(b'{"a":[1,2.5,null]}', "t", 0, 0) == ({"a": [1, 2.5, None]}, None)
    assert j.decode(b'"s"', "t", 0, 0) == ("s", None)
    for bad in (b"{", b"NaN", b"\xff"):
        with pytest.raises(DecodeError, match="t-0@9"):
            j.decode(bad, "t", 0, 9)
    env = b'{"schema":{"type":"int32"},"payload":5}'
    assert j.decode(env, "t", 0, 0)[0] == {"schema": {"type": "int32"}, "payload": 5}
    assert create_decoder("json", envelope=True).decode(env, "t", 0, 0) == (5, None)


@pytest.mark.parametrize("name,opts", [("bytes", {}), ("string", {}), ("json", {}), ("avro", {"schema": USER})])
def test_tombstones(name, opts):
    assert create_decoder(name, **opts).decode(None, "t", 0, 0) == (None, None)


def test_avro_wire_round_trip_with_registry(registry):
    url, client, serialize = registry
    d = create_decoder("avro", schema_registry_url=url)
    raws = [serialize(user(i)) for i in range(5)]
    got = d.decode_many(raws, "users", 0, list(range(5)))
    assert [v for v, _ in got] == [user(i) for i in range(5)]  # raw logical values: ints / bytes
    vs = got[0][1]
    assert (vs.subject, vs.id, vs.version, vs.name) == ("users-value", 1, 1, "ex.User")
    assert vs.avro == USER
    assert all(s is vs for _, s in got)  # one shared ValueSchema per id


def test_avro_second_version_gets_its_own_identity(registry):
    url, client, serialize = registry
    v2 = dict(USER, fields=USER["fields"] + [{"name": "extra", "type": "int", "default": 0}])
    r1 = serialize(user(1))
    r2 = serialize(dict(user(2), extra=3), schema=v2)
    d = create_decoder("avro", schema_registry_url=url)
    (_, s1), (b, s2) = d.decode(r1, "users", 0, 1), d.decode(r2, "users", 0, 2)
    assert b["extra"] == 3
    assert (s1.version, s2.version) == (1, 2) and s1.fingerprint != s2.fingerprint


def test_avro_injected_client(registry):
    url, client, serialize = registry
    d = create_decoder("avro", registry_client=client)
    assert d.decode(serialize(user(3)), "users", 0, 0)[0] == user(3)


@pytest.mark.parametrize("mutate,reason", [
    (lambda r: b"\x01" + r[1:], "bad magic byte 1"),
    (lambda r: r[:1] + struct.pack(">I", 999) + r[5:], "unknown schema id 999"),
    (lambda r: r[:-3], "truncated or corrupt"),
    (lambda r: r + b"\x00", "trailing bytes"),
    (lambda r: r[:3], "shorter than 5 bytes"),
    (lambda r: b"", "empty value"),
])
def test_avro_bad_records_name_topic_partition_offset(registry, mutate, reason):
    url, client, serialize = registry
    d = create_decoder("avro", schema_registry_url=url)
    with pytest.raises(DecodeError) as ei:
        d.decode(mutate(serialize(user(4))), "users", 2, 77)
    assert (ei.value.topic, ei.value.partition, ei.value.offset) == ("users", 2, 77)
    assert "users-2@77" in str(ei.value) and reason in str(ei.value)


def test_decode_many_errors_return(registry):
    url, client, serialize = registry
    d = create_decoder("avro", schema_registry_url=url)
    raws = [serialize(user(0)), b"\x05bad", None]
    with pytest.raises(DecodeError):
        d.decode_many(raws, "users", 0, [10, 11, 12])
    got = d.decode_many(raws, "users", 0, [10, 11, 12], errors="return")
    assert got[0][0] == user(0) and isinstance(got[1], DecodeError) and got[1].offset == 11
    assert got[2] == (None, None)


def test_unreachable_registry_is_not_a_record_error():
    d = create_decoder("avro", schema_registry_url="http://127.0.0.1:9", registry_config={"timeout": 1, "max.retries": 0})
    with pytest.raises(LakesinkError) as ei:
        d.decode(b"\x00\x00\x00\x00\x01\x02", "users", 0, 0)
    assert not isinstance(ei.value, DecodeError)


def bare(value, schema=USER):
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), value)
    return buf.getvalue()


def test_avro_fixed_schema_bare_and_wire(tmp_path):
    path = tmp_path / "user.avsc"
    path.write_text(json.dumps(USER))
    for schema in (USER, json.dumps(USER), str(path)):
        d = create_decoder("avro", schema=schema, wire_format=False)
        v, vs = d.decode(bare(user(1)), "t", 0, 0)
        assert v == user(1) and vs.id is None and vs.avro == USER
    d = create_decoder("avro", schema=USER)  # wire format, id not checked
    assert d.decode(b"\x00\x00\x00\x30\x39" + bare(user(2)), "t", 0, 0)[0] == user(2)
    with pytest.raises(ValueError):
        create_decoder("avro", schema="{not json")
    with pytest.raises(ValueError):
        create_decoder("avro", schema_registry_url="mock://x", wire_format=False)


@pytest.mark.parametrize("wire_format", [False, True])
def test_fixed_schema_decode_many_matches_decode(wire_format):
    """The one-loop decode_many of a fixed-schema decoder gives decode()'s results and errors."""
    d = create_decoder("avro", schema=USER, wire_format=wire_format)
    head = b"\x00\x00\x00\x00\x07" if wire_format else b""
    good = [head + bare(user(i)) for i in range(4)]
    raws = [good[0], None, good[1], good[2] + b"\x00", good[3], head + bare(user(5))[:3], b"", b"\x01abcdef"]
    offs = list(range(100, 100 + len(raws)))
    one = []
    for raw, off in zip(raws, offs):
        try:
            one.append(d.decode(raw, "t", 3, off))
        except DecodeError as e:
            one.append(e)
    many = d.decode_many(raws, "t", 3, offs, errors="return")
    assert [type(x) for x in many] == [type(x) for x in one]
    for a, b in zip(many, one):
        if isinstance(a, DecodeError):
            assert str(a) == str(b)
        else:
            assert a == b and a[1] is b[1]
    assert d.decode_many(good, "t", 3, offs[:4]) == [d.decode(r, "t", 3, 0) for r in good]
    first_bad = next(i for i, x in enumerate(one) if isinstance(x, DecodeError))
    with pytest.raises(DecodeError) as ei:
        d.decode_many(raws, "t", 3, offs)
    assert str(ei.value) == str(one[first_bad])


@pytest.mark.parametrize("envelope", [False, True])
def test_json_decode_many_matches_decode(envelope):
    d = create_decoder("json", envelope=envelope)
    raws = [b' {"a": 1} ', b"[1,2]", None, b'"x"', b"3.5", b'{"schema": {}, "payload": {"b": 2}}', bytearray(b"true"),
            memoryview(b"null"), b"{} x", b"NaN", b"\xff", b"", b"  ", b'{"a":', b"[1] [2]", b"7"]
    offs = list(range(len(raws)))
    one = []
    for raw, off in zip(raws, offs):
        try:
            one.append(d.decode(raw, "t", 0, off))
        except DecodeError as e:
            one.append(e)
    many = d.decode_many(raws, "t", 0, offs, errors="return")
    assert [str(x) if isinstance(x, DecodeError) else x for x in many] == \
        [str(x) if isinstance(x, DecodeError) else x for x in one]
    good = [r for r, x in zip(raws, one) if not isinstance(x, DecodeError)]
    assert d.decode_many(good, "t", 0, list(range(len(good)))) == [d.decode(r, "t", 0, 0) for r in good]
