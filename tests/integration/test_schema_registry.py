"""lakesink's Schema Registry client and registry decoders against a real registry (Apicurio, Confluent API):
wire-format Avro and JSON Schema written by confluent-kafka's serializers, caching (counted in the
registry's own access log), unknown ids, an unreachable registry, basic-auth settings, subject/version."""
from __future__ import annotations

import json
import re
import socket
import struct
import time
import uuid

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.decoders import create_decoder
from lakesink.errors import DecodeError, RegistryError
from lakesink.schemas.registry import RegistrySettings, shared_client

USER_V1 = {"type": "record", "name": "User", "namespace": "ex", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
USER_V2 = {**USER_V1, "fields": USER_V1["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}]}
ORDER_JSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"}, "qty": {"type": "number"}},
              "required": ["id", "item"]}
BASE = {"name": "job", "flush.size": "3", "s3.bucket.name": "bkt", "manifest.location": "s3a://bkt/manifest",
        "kafka.bootstrap.servers": "localhost:9092"}


def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def serialize(ser, value, topic_name: str) -> bytes:
    return ser(value, SerializationContext(topic_name, MessageField.VALUE))


def id_of(raw: bytes) -> int:
    return struct.unpack(">I", raw[1:5])[0]


def access_log_count(registry, path: str, timeout: float = 5.0) -> int:
    """Requests for exactly ``path`` in the registry's access log (written asynchronously: settle first)."""
    pattern = re.compile(r'path="' + re.escape(path) + r'(\?[^"]*)?"')
    last, deadline = -1, time.monotonic() + timeout
    while True:
        n = len(pattern.findall(registry.log_path.read_text(errors="replace")))
        if n == last or time.monotonic() > deadline:
            return n
        last = n
        time.sleep(0.5)


def test_avro_v1_v2_decoded_through_a_config(schema_registry, schema_registry_url):
    t = topic()
    client = schema_registry.client()
    client.set_compatibility(f"{t}-value", "BACKWARD")  # Apicurio's global default is NONE
    r1 = serialize(AvroSerializer(client, json.dumps(USER_V1)), {"id": 1, "name": "ann"}, t)
    r2 = serialize(AvroSerializer(client, json.dumps(USER_V2)), {"id": 2, "name": "bob", "email": "b@x"}, t)
    assert id_of(r1) != id_of(r2)

    cfg = SinkConfig.from_dict({**BASE, "topics": t, "schema.registry.url": schema_registry_url})
    decoder = wiring.value_decoder_instance(cfg)
    (v1, s1), (v2, s2) = decoder.decode_many([r1, r2], t, 0, [10, 11])
    assert v1 == {"id": 1, "name": "ann"} and v2 == {"id": 2, "name": "bob", "email": "b@x"}
    assert (s1.subject, s1.id, s1.version, s1.name) == (f"{t}-value", id_of(r1), 1, "ex.User")
    assert (s2.subject, s2.id, s2.version) == (f"{t}-value", id_of(r2), 2)
    assert s1.avro == USER_V1 and s2.avro == USER_V2


def test_json_schema_values(schema_registry, schema_registry_url):
    t = topic()
    client = schema_registry.client()
    ser = JSONSerializer(json.dumps(ORDER_JSON), client)
    values = [{"id": 1, "item": "pen", "qty": 2.5}, {"id": 2, "item": "ü-nib"}]
    raws = [serialize(ser, v, t) for v in values]
    assert raws[0][0] == 0 and json.loads(raws[0][5:]) == values[0]  # magic + id + JSON text

    cfg = SinkConfig.from_dict({**BASE, "topics": t, "format.class": "json", "schema.registry.url": schema_registry_url,
                                "value.converter": "io.confluent.connect.json.JsonSchemaConverter"})
    decoder = wiring.value_decoder_instance(cfg)
    assert decoder.name == "json_schema"
    assert decoder.decode_many(raws + [None], t, 1, [0, 1, 2]) == [(values[0], None), (values[1], None), (None, None)]

    # validation is optional: a value the schema refuses passes unless validate=True
    sid = id_of(raws[0])
    bad = b"\x00" + struct.pack(">I", sid) + json.dumps({"id": "three"}).encode()
    assert decoder.decode(bad, t, 1, 5) == ({"id": "three"}, None)
    checking = create_decoder("json_schema", registry=RegistrySettings(schema_registry_url), validate=True)
    assert checking.decode(raws[1], t, 1, 1) == (values[1], None)
    with pytest.raises(DecodeError) as ei:
        checking.decode(bad, t, 1, 5)
    assert f"{t}-1@5" in str(ei.value) and f"JSON schema id {sid}" in str(ei.value)

    # an Avro id is not a JSON schema, a JSON id is not Avro, broken JSON names the record
    avro_raw = serialize(AvroSerializer(client, json.dumps(USER_V1)), {"id": 1, "name": "a"}, topic())
    with pytest.raises(DecodeError, match=r"is AVRO, not JSON"):
        decoder.decode(avro_raw, t, 1, 6)
    with pytest.raises(DecodeError, match=r"is JSON, not AVRO"):
        create_decoder("avro", registry=RegistrySettings(schema_registry_url)).decode(raws[0], t, 1, 7)
    with pytest.raises(DecodeError, match=rf"{t}-1@8: invalid JSON"):
        decoder.decode(raws[0][:-2], t, 1, 8)


def test_one_registry_call_per_schema_id_per_process(schema_registry, schema_registry_url):
    t = topic()
    client = schema_registry.client()
    mine = {**USER_V1, "namespace": "ex" + t.replace("-", "_")}  # ids are content ids: a schema no test asked for
    raws = [serialize(AvroSerializer(client, json.dumps(mine)), {"id": i, "name": f"n{i}"}, t) for i in range(20)]
    sid = id_of(raws[0])
    jraw = serialize(JSONSerializer(json.dumps({**ORDER_JSON, "title": t}), client), {"id": 1, "item": "x"}, t)
    jid = id_of(jraw)
    settings = RegistrySettings(schema_registry_url)
    assert access_log_count(schema_registry, f"/apis/ccompat/v7/schemas/ids/{sid}") == 0

    # several decoders (as several tasks of one executor process build them), single and batch decoding
    for _ in range(3):
        d = create_decoder("avro", registry=settings)
        assert [v["id"] for v, _ in d.decode_many(raws, t, 0, list(range(20)))] == list(range(20))
        d.decode(raws[3], t, 0, 3)
        j = create_decoder("json_schema", registry=settings, validate=True)
        j.decode_many([jraw] * 5, t, 0, list(range(5)))
    assert access_log_count(schema_registry, f"/apis/ccompat/v7/schemas/ids/{sid}") == 1
    assert access_log_count(schema_registry, f"/apis/ccompat/v7/schemas/ids/{sid}/versions") == 1
    assert access_log_count(schema_registry, f"/apis/ccompat/v7/schemas/ids/{jid}") == 1
    assert access_log_count(schema_registry, f"/apis/ccompat/v7/schemas/ids/{jid}/versions") == 0  # not needed
    assert shared_client(settings) is shared_client(RegistrySettings(schema_registry_url))


def test_unknown_id_is_a_decode_error_naming_the_record(schema_registry_url):
    d = create_decoder("avro", registry=RegistrySettings(schema_registry_url))
    raw = b"\x00" + struct.pack(">I", 987654) + b"\x02\x02a"
    with pytest.raises(DecodeError) as ei:
        d.decode(raw, "orders", 3, 4242)
    e = ei.value
    assert (e.topic, e.partition, e.offset) == ("orders", 3, 4242)
    assert "orders-3@4242" in str(e) and "unknown schema id 987654" in str(e) and "\n" not in str(e)
    j = create_decoder("json_schema", registry=RegistrySettings(schema_registry_url))
    with pytest.raises(DecodeError, match=r"orders-0@1: unknown schema id 987654"):
        j.decode(raw, "orders", 0, 1)


@pytest.mark.timeout(60)  # bounded retries: the failure comes in seconds, never a hang
def test_unreachable_registry_fails_with_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: connection refused
    url = f"http://alice:pw@127.0.0.1:{port}/apis/ccompat/v7"
    d = create_decoder("avro", registry=RegistrySettings(url, max_retries=2, retries_wait_ms=100))
    with pytest.raises(RegistryError) as ei:
        d.decode(b"\x00\x00\x00\x00\x07\x02", "orders", 0, 9)
    msg = str(ei.value)
    assert not isinstance(ei.value, DecodeError)
    assert "unreachable" in msg and "schema id 7" in msg and f"127.0.0.1:{port}" in msg
    assert "\n" not in msg and "pw" not in msg and "alice" not in msg


def test_basic_auth_settings_reach_the_client(schema_registry, schema_registry_url):
    """Apicurio here runs without auth and ignores the header (its access log shows no user either): the
    client is configured with the credentials and the registry still answers."""
    t = topic()
    raw = serialize(AvroSerializer(schema_registry.client(), json.dumps(USER_V1)), {"id": 5, "name": "e"}, t)
    cfg = SinkConfig.from_dict({**BASE, "topics": t, "schema.registry.url": schema_registry_url,
                                "schema.registry.basic.auth.user.info": "lakesink-user:s3cret",
                                "schema.registry.timeout": "5"})
    settings = wiring.registry_settings(cfg)
    assert settings.client_config()["basic.auth.user.info"] == "lakesink-user:s3cret"
    assert "s3cret" not in repr(settings) and "s3cret" not in repr(cfg)
    client = shared_client(settings).client
    assert client.config()["basic.auth.user.info"] == "lakesink-user:s3cret"  # confluent-kafka's own view
    value, vs = wiring.value_decoder_instance(cfg).decode(raw, t, 0, 0)
    assert value == {"id": 5, "name": "e"} and vs.version == 1


def test_subject_and_version_per_strategy(schema_registry, schema_registry_url):
    t = topic()
    ns = "ex" + t.replace("-", "_")  # a record of its own: equal schemas share one (content) id across subjects
    v1 = {**USER_V1, "namespace": ns}
    v2 = {**USER_V2, "namespace": ns}
    client = schema_registry.client()
    client.set_compatibility(f"{t}-value", "BACKWARD")
    client.register_schema(f"{t}-value", Schema(json.dumps(v1), "AVRO"))
    sid2 = client.register_schema(f"{t}-value", Schema(json.dumps(v2), "AVRO"))
    client.register_schema(f"{t}-{ns}.User", Schema(json.dumps(v1), "AVRO"))
    assert client.register_schema(f"{t}-{ns}.User", Schema(json.dumps(v2), "AVRO")) == sid2
    reg = shared_client(RegistrySettings(schema_registry_url))
    assert set(reg.versions(sid2)) == {(f"{t}-value", 2), (f"{t}-{ns}.User", 2)}
    assert reg.subject_version(sid2, f"{t}-value") == 2
    assert reg.subject_version(sid2, f"{t}-{ns}.User") == 2
    assert reg.subject_version(sid2, "not-a-subject") is None

    raw = b"\x00" + struct.pack(">I", sid2) + b"\x0e\x02a\x00"  # id 7, name "a", email null
    settings = RegistrySettings(schema_registry_url)
    for strategy, subject in (("topic", f"{t}-value"), ("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
                                                        f"{t}-{ns}.User")):
        _, vs = create_decoder("avro", registry=settings, subject_name_strategy=strategy).decode(raw, t, 0, 0)
        assert (vs.subject, vs.id, vs.version) == (subject, sid2, 2)
    # registered under the RecordNameStrategy subject after the versions of the id were cached: the subject
    # they do not list is asked once more, and found
    client.register_schema(f"{ns}.User", Schema(json.dumps(v2), "AVRO"))
    _, vs = create_decoder("avro", registry=settings, subject_name_strategy="RecordNameStrategy").decode(raw, t, 0, 0)
    assert (vs.subject, vs.id, vs.version) == (f"{ns}.User", sid2, 1)
    # a subject the id is not under: identity without a version (that answer is kept for the process)
    _, vs = create_decoder("avro", registry=settings, subject=f"{t}-other").decode(raw, t, 0, 0)
    assert (vs.subject, vs.id, vs.version) == (None, sid2, None)
