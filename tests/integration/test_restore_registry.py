"""Restore into another Schema Registry (issue #29 item 4), against two real registries: the session's Apicurio
(the source, "A") and a second Apicurio started by this module ("B", the target), whose ids differ from A's
because unrelated schemas are registered in B first. lakesink.schemas.registry_copy copies the schemas the
records use from A into B under the destination subject, and each record's id is rewritten: B serves under
the new id exactly the schema A had under the old one, and B's deserializers read the rewritten records."""
from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from lakesink.errors import DecodeError, RegistryError, SchemaCopyError
from lakesink.schemas.registry import RegistryClient, RegistrySettings, shared_client
from lakesink.schemas.registry_copy import copy_schemas, scan_ids, subject_ids

USER_V1 = {"type": "record", "name": "User", "namespace": "ex", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
USER_V2 = {**USER_V1, "fields": USER_V1["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}]}
KEY = {"type": "record", "name": "UserKey", "namespace": "ex", "fields": [{"name": "id", "type": "long"}]}
COMMON_PROTO = 'syntax = "proto3";\npackage ex.common;\n\nmessage Money {\n  string currency = 1;\n  int64 units = 2;\n}\n'
ORDER_PROTO = ('syntax = "proto3";\npackage ex;\n\nimport "ex/common.proto";\n\n'
               'message Order {\n  int64 id = 1;\n  ex.common.Money price = 2;\n}\n')
ORDER_JSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"}}, "required": ["id", "item"]}


@pytest.fixture(scope="module")
def target_registry():
    """A second Apicurio (the restore's target registry), its own process and ids."""
    from lakesink.devstack.registry import SchemaRegistry

    registry = SchemaRegistry()
    try:
        registry.start()
        yield registry
    finally:
        registry.stop()


def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def client_of(registry) -> RegistryClient:
    return shared_client(RegistrySettings(registry.url))


def diverge(target_registry, source_ids) -> None:
    """Register unrelated schemas in the target until its next id is above every source id (and never 0), so
    an id kept by mistake cannot name the same schema there."""
    sr = target_registry.client()
    noise = f"noise-{uuid.uuid4().hex[:8]}"
    for i in range(max(source_ids) + 2):
        sr.register_schema(noise, Schema(json.dumps({"type": "record", "name": f"N{uuid.uuid4().hex[:8]}",
                                                     "fields": [{"name": f"f{i}", "type": "int"}]}), "AVRO"))


def ctx(t: str, key: bool = False) -> SerializationContext:
    return SerializationContext(t, MessageField.KEY if key else MessageField.VALUE)


def test_avro_values_and_keys_copied_and_rewritten_read_back_through_the_target(schema_registry, target_registry):
    src, dest = topic(), topic()
    a = schema_registry.client()
    values = [({"id": 1}, {"id": 1, "name": "ann"}, USER_V1),
              ({"id": 2}, {"id": 2, "name": "bob", "email": "b@x"}, USER_V2),
              ({"id": 3}, {"id": 3, "name": "cy", "email": None}, USER_V2)]
    key_ser = AvroSerializer(a, json.dumps(KEY))
    records = [(key_ser(k, ctx(src, True)), AvroSerializer(a, json.dumps(s))(v, ctx(src))) for k, v, s in values]
    records.append((None, None))  # a keyless tombstone passes as it is

    value_ids, key_ids = scan_ids(v for _, v in records), scan_ids(k for k, _ in records)
    assert len(value_ids) == 2 and len(key_ids) == 1
    diverge(target_registry, value_ids | key_ids)

    source, target = client_of(schema_registry), client_of(target_registry)
    assert subject_ids(source, [f"{src}-value"]) == value_ids  # the source topic's subjects name the same ids
    m = copy_schemas(source, target, {"value": value_ids, "key": key_ids}, topic=dest)
    value_map, key_map = m.mapping("value"), m.mapping("key")
    assert set(value_map) == value_ids and set(key_map) == key_ids
    assert all(s != t for s, t in {**value_map, **key_map}.items())
    b = target_registry.client()
    for sid, tid in {**value_map, **key_map}.items():  # B serves under the new id exactly A's schema of the old
        old, new = a.get_schema(sid), b.get_schema(tid)
        assert (new.schema_str, new.schema_type) == (old.schema_str, old.schema_type)
    assert sorted(s for s in b.get_subjects() if s.startswith(dest)) == [f"{dest}-key", f"{dest}-value"]
    assert [v.version for v in map(lambda n: b.get_version(f"{dest}-value", n), (1, 2))] == [1, 2]

    rewrite_key, rewrite_value = m.rewriter("key"), m.rewriter("value")
    out = [(rewrite_key(k, dest, 0, i), rewrite_value(v, dest, 0, i)) for i, (k, v) in enumerate(records)]
    for (k0, v0), (k1, v1) in zip(records[:-1], out[:-1]):
        assert k1[5:] == k0[5:] and v1[5:] == v0[5:]  # datum bytes identical
        assert (k1[1:5], v1[1:5]) != (k0[1:5], v0[1:5])
    assert out[-1] == (None, None)
    key_de, value_de = AvroDeserializer(b), AvroDeserializer(b)
    assert [(key_de(k, ctx(dest, True)), value_de(v, ctx(dest))) for k, v in out[:-1]] == \
           [(k, {"email": None, **v} if s is USER_V2 else v) for k, v, s in values]

    stray = AvroSerializer(a, json.dumps({"type": "record", "name": "Stray", "fields": []}))({}, ctx(topic()))
    with pytest.raises(DecodeError, match=rf"^record {dest}-0@7: value schema id \d+ was not copied to "
                                          rf"{target_registry.url}"):
        rewrite_value(stray, dest, 0, 7)


def test_protobuf_and_json_schema_with_references_copied_with_their_references(schema_registry, target_registry):
    src, dest = topic(), topic()
    a = schema_registry.client()
    common_subject = f"{src}-ex/common.proto"
    a.register_schema(common_subject, Schema(COMMON_PROTO, "PROTOBUF"))
    proto_id = a.register_schema(f"{src}-value", Schema(ORDER_PROTO, "PROTOBUF", [
        SchemaReference("ex/common.proto", common_subject, 1)]))
    json_id = JSONSerializer(json.dumps(ORDER_JSON), a)  # a JSON Schema value of another topic, same copy
    raw_json = json_id({"id": 1, "item": "pen"}, ctx(src + "-json"))
    ids = {proto_id, int.from_bytes(raw_json[1:5], "big")}
    diverge(target_registry, ids)

    m = copy_schemas(client_of(schema_registry), client_of(target_registry), {"value": ids}, topic=dest)
    b = target_registry.client()
    new_proto = b.get_schema(m.mapping("value")[proto_id])
    assert new_proto.schema_type == "PROTOBUF" and new_proto.schema_str == a.get_schema(proto_id).schema_str
    (ref,) = new_proto.references
    assert (ref.name, ref.subject) == ("ex/common.proto", common_subject)  # a referenced schema keeps its subject
    assert b.get_version(common_subject, ref.version).schema.schema_str == COMMON_PROTO

    rewritten = m.rewrite("value", raw_json, dest, 0, 0)
    assert rewritten[5:] == raw_json[5:]
    assert JSONDeserializer(None, schema_registry_client=b)(rewritten, ctx(dest)) == {"id": 1, "item": "pen"}


def test_keeping_the_source_subject(schema_registry, target_registry):
    src, dest = topic(), topic()
    a = schema_registry.client()
    sid = a.register_schema(f"{src}-value", Schema(json.dumps(USER_V1), "AVRO"))
    m = copy_schemas(client_of(schema_registry), client_of(target_registry), {"value": [sid]}, topic=dest,
                     strategy="source", source_topic=src)
    assert [c.subject for c in m.copies] == [f"{src}-value"]
    assert target_registry.client().get_version(f"{src}-value", 1).schema_id == m.mapping("value")[sid]


def test_an_incompatible_destination_subject_is_one_line_naming_subject_id_and_the_registry(schema_registry,
                                                                                            target_registry):
    src, dest = topic(), topic()
    sid = schema_registry.client().register_schema(f"{src}-value", Schema(json.dumps(USER_V1), "AVRO"))
    b = target_registry.client()
    b.register_schema(f"{dest}-value", Schema(json.dumps({"type": "record", "name": "Other", "namespace": "ex",
                                                          "fields": [{"name": "z", "type": "int"}]}), "AVRO"))
    b.set_compatibility(f"{dest}-value", "FULL")
    with pytest.raises(SchemaCopyError) as e:
        copy_schemas(client_of(schema_registry), client_of(target_registry), {"value": [sid]}, topic=dest)
    msg = str(e.value)
    assert "\n" not in msg and e.value.exit_code == 1
    assert f"refused source schema id {sid} under subject '{dest}-value' (incompatible" in msg
    assert target_registry.url in msg and msg.endswith("nothing was restored")
    assert [v for v in b.get_versions(f"{dest}-value")] == [1]  # nothing registered


def test_an_unreachable_target_is_a_registry_error_without_the_credentials(schema_registry):
    from lakesink.devstack import free_port

    sid = schema_registry.client().register_schema(f"{topic()}-value", Schema(json.dumps(USER_V1), "AVRO"))
    url = f"http://user:s3cret@127.0.0.1:{free_port()}/apis/ccompat/v7"
    target = shared_client(RegistrySettings(url, max_retries=0, timeout_s=2))
    with pytest.raises(RegistryError) as e:
        copy_schemas(client_of(schema_registry), target, {"value": [sid]}, topic=topic())
    assert "s3cret" not in str(e.value) and "unreachable registering source schema id" in str(e.value)
    assert e.value.exit_code == 5
