"""Restore into another Schema Registry (issue #29 item 4), against two real registries: the session's Apicurio
(the source, "A") and a second Apicurio started by this module ("B", the target), whose ids differ from A's
because unrelated schemas are registered in B first. lakesink.schemas.registry_copy copies the schemas the
records use from A into B under the destination subject, and each record's id is rewritten: B serves under
the new id exactly the schema A had under the old one, and B's deserializers read the rewritten records."""
from __future__ import annotations

import json
import re
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


# ---------------------------------------------------------------------------------------------- end to end

def archive_wire_topic(spark, kafka, s3, bucket, topic_name, schema_registry, target_registry) -> tuple:
    """A topic of wire-format Avro values (two schema versions) and keys serialized with registry A, archived
    (format avro, Avro keys files); B given unrelated schemas first. (config dict, rows, keys, values)."""
    from support.archive_checks import base_config, produce

    import lakesink
    from lakesink.config import SinkConfig

    a = schema_registry.client()
    rows = [({"id": i}, {"id": i, "name": f"n{i}"} if i < 4 else {"id": i, "name": f"n{i}", "email": f"e{i}"})
            for i in range(7)]
    key_ser, v1, v2 = (AvroSerializer(a, json.dumps(s)) for s in (KEY, USER_V1, USER_V2))
    keys = [key_ser(k, ctx(topic_name, True)) for k, _ in rows]
    values = [(v1 if i < 4 else v2)(v, ctx(topic_name)) for i, (_, v) in enumerate(rows)]
    diverge(target_registry, scan_ids(values) | scan_ids(keys))
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, values, keys=keys, partition_of=lambda i: 0, headers=False)
    conf = base_config(kafka, s3, bucket, topic_name, **{
        "format.class": "avro", "flush.size": "100", "store.kafka.keys": "true", "keys.format.class": "avro",
        "value.decoder": "avro", "key.decoder": "avro", "schema.registry.url": schema_registry.url})
    assert lakesink.SinkJob(spark, SinkConfig.from_dict(conf)).run_batch(flush_tail=True).records == 7
    return conf, rows, keys, values


def test_restore_of_a_wire_avro_topic_into_another_registry_read_with_its_deserializer(
        spark, kafka, s3, bucket, topic_name, schema_registry, target_registry):
    """Archive a topic of wire-format Avro values (two schema versions) and keys with registry A; restore it with
    ``target_registry`` = B into a new topic; a consumer deserializing with B's AvroDeserializer gets the same
    records, and the produced datum bytes are the archived ones."""
    from support.archive_checks import consume

    import lakesink
    from lakesink.config import SinkConfig

    conf, rows, keys, values = archive_wire_topic(spark, kafka, s3, bucket, topic_name, schema_registry,
                                                  target_registry)
    cfg = SinkConfig.from_dict(conf)
    a = schema_registry.client()

    dest = f"copy_of_{topic_name}"
    kafka.create_topic(dest, partitions=1)
    rep = lakesink.restore(spark, cfg, to_topic=dest, target_registry=target_registry.url)
    assert rep.produced == 7
    assert sorted(rep.schema_copies) == sorted(set(rep.schema_copies)) and len(rep.schema_copies) == 3

    got = consume(kafka, dest)
    b = target_registry.client()
    key_de, value_de = AvroDeserializer(b), AvroDeserializer(b)
    assert [(key_de(k, ctx(dest, True)), value_de(v, ctx(dest))) for k, v, *_ in got] == \
           rows  # each value read with its writer schema, as B holds it
    assert [(k[5:], v[5:]) for k, v, *_ in got] == [(k[5:], v[5:]) for k, v in zip(keys, values)]
    assert all(k[1:5] != k0[1:5] and v[1:5] != v0[1:5] for (k, v, *_), k0, v0 in zip(got, keys, values))
    for (k, v, *_), k0, v0 in zip(got, keys, values):  # B's schema under each new id is A's under the old
        for new, old in ((k, k0), (v, v0)):
            assert b.get_schema(int.from_bytes(new[1:5], "big")).schema_str == \
                   a.get_schema(int.from_bytes(old[1:5], "big")).schema_str
    assert sorted(s for s in b.get_subjects() if s.startswith(dest)) == [f"{dest}-key", f"{dest}-value"]


def test_cli_restore_with_a_target_registry_config_refuses_an_incompatible_subject_then_restores(
        spark, kafka, s3, bucket, topic_name, schema_registry, target_registry, tmp_path):
    """`lakesink restore --target-registry-config FILE`: the target's subject refuses the copy (one line naming
    subject, source id and the registry's message, exit 1, nothing produced); a bad key in FILE is exit 3 naming
    it; then `--target-registry URL` into another topic restores every record with B's ids."""
    from support.archive_checks import consume, run_cli

    conf, rows, keys, values = archive_wire_topic(spark, kafka, s3, bucket, topic_name, schema_registry,
                                                  target_registry)
    path = tmp_path / "sink.json"
    path.write_text(json.dumps(conf))
    dest, dest2 = f"copy_of_{topic_name}", f"copy2_of_{topic_name}"
    kafka.create_topic(dest, partitions=1)
    kafka.create_topic(dest2, partitions=1)
    b = target_registry.client()
    b.register_schema(f"{dest}-value", Schema(json.dumps({"type": "record", "name": "Other", "fields": [
        {"name": "z", "type": "int"}]}), "AVRO"))
    b.set_compatibility(f"{dest}-value", "FULL")
    reg_conf = tmp_path / "target-registry.properties"
    reg_conf.write_text(f"schema.registry.url={target_registry.url}\nschema.registry.timeout=20\n")

    rc, out = run_cli(["restore", "--config", str(path), "--to-topic", dest, "--target-registry-config",
                       str(reg_conf), "--master", "local[1]"])
    errors = [ln for ln in out.splitlines() if ln.startswith("lakesink:")]
    assert rc == 1 and len(errors) == 1 and "Traceback" not in out, out[-3000:]
    first_id = min(int.from_bytes(v[1:5], "big") for v in values)
    assert f"refused source schema id {first_id} under subject '{dest}-value' (incompatible" in errors[0]
    assert target_registry.url in errors[0] and "nothing was restored" in errors[0]
    assert consume(kafka, dest) == []

    bad = tmp_path / "bad.properties"
    bad.write_text(f"schema.registry.url={target_registry.url}\nschema.registry.basic.auth.user.info=nocolon\n")
    rc, out = run_cli(["restore", "--config", str(path), "--to-topic", dest2, "--target-registry-config", str(bad)])
    errors = [ln for ln in out.splitlines() if ln.startswith("lakesink:")]
    assert rc == 3 and len(errors) == 1, out[-3000:]
    assert "schema.registry.basic.auth.user.info" in errors[0] and "nocolon" not in out

    rc, out = run_cli(["restore", "--config", str(path), "--to-topic", dest2, "--target-registry",
                       target_registry.url, "--master", "local[1]"])
    assert rc == 0 and "7 record(s) produced" in out, out[-3000:]
    assert re.search(rf"  schema copied: value id \d+ -> \d+ under {re.escape(dest2)}-value \(AVRO\)", out), out[-3000:]
    got = consume(kafka, dest2)
    value_de = AvroDeserializer(b)
    assert [value_de(v, ctx(dest2)) for _k, v, *_ in got] == [v for _k, v in rows]
    assert [v[5:] for _k, v, *_ in got] == [v[5:] for v in values]


def test_raw_wire_protobuf_bytes_rewritten_and_a_record_whose_id_was_not_copied_is_never_produced(
        spark, kafka, s3, bucket, topic_name, schema_registry, target_registry):
    """A ByteArray archive of raw wire-format Protobuf values (a schema with a reference, under the topic's
    subject) and, at offset 3, a JSON Schema value whose schema is under another topic's subject only: restoring
    values (``target_registry_roles="value"``) fails naming that record and its id, nothing produced; up to
    offset 2 the records come with B's id and the same bytes after it."""
    from support.archive_checks import base_config, consume, produce

    import lakesink
    from lakesink.config import SinkConfig
    from lakesink.errors import RestoreError

    a = schema_registry.client()
    common_subject = f"{topic_name}-ex/common.proto"
    a.register_schema(common_subject, Schema(COMMON_PROTO, "PROTOBUF"))
    proto_id = a.register_schema(f"{topic_name}-value", Schema(ORDER_PROTO, "PROTOBUF", [
        SchemaReference("ex/common.proto", common_subject, 1)]))
    # message index [0] (Order) encoded as the single byte 0, then Order{id=i, price={currency="EUR"}}
    values = [b"\x00" + proto_id.to_bytes(4, "big") + b"\x00" + bytes([0x08, i, 0x12, 0x05, 0x0a, 0x03]) + b"EUR"
              for i in range(1, 4)]
    sep = "<rec-sep>"  # binary values: a separator no record holds
    stray = JSONSerializer(json.dumps(ORDER_JSON), a)({"id": 9, "item": "x"}, ctx(f"other-{topic_name}"))
    values.append(stray)
    diverge(target_registry, scan_ids(values))
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, values, partition_of=lambda i: 0, headers=False)
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "format.class": "bytearray", "format.bytearray.separator": sep, "flush.size": "100",
        "schema.registry.url": schema_registry.url}))
    assert all(sep.encode() not in v for v in values)
    assert lakesink.SinkJob(spark, cfg).run_batch(flush_tail=True).records == 4

    dest = f"copy_of_{topic_name}"
    kafka.create_topic(dest, partitions=1)
    with pytest.raises(RestoreError) as e:
        lakesink.restore(spark, cfg, to_topic=dest, target_registry=target_registry.url,
                         target_registry_roles="value")
    stray_id = int.from_bytes(stray[1:5], "big")
    assert f"record {topic_name}-0@3: value schema id {stray_id} was not copied to {target_registry.url}" in \
           str(e.value)
    assert consume(kafka, dest) == []  # the open transaction was aborted: nothing visible

    rep = lakesink.restore(spark, cfg, to_topic=dest, to_offset=2, target_registry=target_registry.url,
                           target_registry_roles="value")
    assert rep.produced == 3
    got = [v for _k, v, *_ in consume(kafka, dest)]
    assert [v[5:] for v in got] == [v[5:] for v in values[:3]]
    (new_id,) = {int.from_bytes(v[1:5], "big") for v in got}
    assert new_id != proto_id
    served = target_registry.client().get_schema(new_id)
    assert (served.schema_type, served.schema_str) == ("PROTOBUF", a.get_schema(proto_id).schema_str)
    assert [r.subject for r in served.references] == [common_subject]
