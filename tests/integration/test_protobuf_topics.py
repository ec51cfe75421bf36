"""Confluent wire-format Protobuf topics (ProtobufConverter) against a real Schema Registry (Apicurio): the
decoder resolves ids to .proto text, compiles it once, follows the message indexes, reports subject/id/version;
the sink archives such a topic as JSON, Avro and Parquet with the same records; bad payloads name the record."""
from __future__ import annotations

import struct
import uuid

import pytest
from support.archive_checks import archived_values, base_config, manifest_rows, produce
from confluent_kafka.schema_registry import Schema
from google.protobuf import message_factory

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.errors import ArchiveReadError, BatchFailedError, DecodeError
from lakesink.schemas import protobuf as pb

PROTO = """
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";

message Order {
  message Line { string sku = 1; uint32 qty = 2; }
  enum Status { NEW = 0; PAID = 1; }
  int64 id = 1;
  string customer = 2;
  Status status = 3;
  repeated Line lines = 4;
  google.protobuf.Timestamp created = 5;
  optional string coupon = 6;
}
"""


@pytest.fixture(scope="module")
def order_cls():
    return message_factory.GetMessageClass(pb.message_at(pb.compile_proto(PROTO), [0]))


def register(schema_registry, subject: str, text: str, kind: str = "PROTOBUF") -> int:
    return schema_registry.client().register_schema(subject, Schema(text, kind))


def wire(sid: int, msg, indexes=(0,)) -> bytes:
    return b"\x00" + struct.pack(">I", sid) + pb.encode_indexes(list(indexes)) + msg.SerializeToString()


def orders(order_cls, n: int):
    out = []
    for i in range(n):
        m = order_cls(id=i, customer=f"c{i % 3}", status=i % 2)
        m.lines.add(sku=f"s{i}", qty=i + 1)
        m.created.seconds = 1_700_000_000 + i
        if i % 4 == 0:
            m.coupon = "TEN"
        out.append(m)
    return out


def expected(m) -> dict:
    return {"id": m.id, "customer": m.customer, "status": "PAID" if m.status else "NEW",
            "lines": [{"sku": m.lines[0].sku, "qty": m.lines[0].qty}], "created": m.created.seconds * 1000,
            "coupon": m.coupon if m.HasField("coupon") else None}


def test_decoder_resolves_ids_indexes_and_subject_versions(schema_registry, schema_registry_url, order_cls):
    t = f"pb-{uuid.uuid4().hex[:8]}"
    sid = register(schema_registry, f"{t}-value", PROTO)
    cfg = SinkConfig.from_dict({"name": "j", "topics": t, "s3.bucket.name": "bkt", "format.class": "json", "flush.size": "3",
                                "manifest.location": "/tmp/unused", "kafka.bootstrap.servers": "localhost:9092",
                                "value.converter": "io.confluent.connect.protobuf.ProtobufConverter",
                                "value.converter.schema.registry.url": schema_registry_url})
    decoder = wiring.value_decoder_instance(cfg)
    assert decoder.name == "protobuf"
    m = orders(order_cls, 1)[0]
    value, vs = decoder.decode(wire(sid, m), t, 0, 10)
    assert value == expected(m)
    assert (vs.subject, vs.id, vs.version, vs.name) == (f"{t}-value", sid, 1, "shop.v1.Order")
    # the nested message by its indexes [0, 0]
    line = order_cls.Line(sku="x", qty=3)
    value, vs = decoder.decode(wire(sid, line, (0, 0)), t, 0, 11)
    assert value == {"sku": "x", "qty": 3} and vs.name == "shop.v1.Order.Line"
    # bad input names the record
    with pytest.raises(DecodeError) as e:
        decoder.decode(wire(sid, m)[:-3] + b"\xff\xff\xff", t, 0, 12)
    assert f"{t}-0@12" in str(e.value) and "corrupt Protobuf payload" in str(e.value)
    with pytest.raises(DecodeError) as e:
        decoder.decode(wire(sid, m, (4,)), t, 0, 13)
    assert "message indexes [4] name no message" in str(e.value)
    avro_id = register(schema_registry, f"{t}-other", '{"type": "string"}', "AVRO")
    with pytest.raises(DecodeError) as e:
        decoder.decode(b"\x00" + struct.pack(">I", avro_id) + b"\x00\x02a", t, 0, 14)
    assert f"schema id {avro_id} is AVRO, not PROTOBUF" in str(e.value)


@pytest.mark.parametrize("fmt", ["json", "avro", "parquet"])
def test_sink_archives_a_protobuf_topic(fmt, spark, kafka, s3, bucket, schema_registry, schema_registry_url,
                                        order_cls):
    t = f"pb-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(t, partitions=1)
    sid = register(schema_registry, f"{t}-value", PROTO)
    msgs = orders(order_cls, 12)
    produce(kafka, t, [wire(sid, m) for m in msgs])
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, t, **{
        "format.class": fmt, "flush.size": "5", "schema.registry.url": schema_registry_url,
        "value.converter": "io.confluent.connect.protobuf.ProtobufConverter"}))
    SinkJob(spark, cfg).run_batch(flush_tail=True)
    rows = [r for r in manifest_rows(spark, cfg) if r.kind == "object"]
    assert sum(r.record_count for r in rows) == 12
    assert {(r.schema_subject, r.schema_id, r.schema_version) for r in rows} == {(f"{t}-value", sid, 1)}
    got = archived_values(spark, cfg)[(t, 0)]
    want = [expected(m) for m in msgs]
    assert got == want
    # the Kafka bytes were Protobuf: read_archive/restore cannot rebuild them from Avro or Parquet, and say so
    from lakesink.executor.readback import iter_objects, read_records
    from lakesink.store import open_store

    store, obj = open_store(wiring.store_settings(cfg)), next(iter_objects(rows))
    if fmt == "json":
        assert len(read_records(store, wiring.value_format(cfg), obj)) == obj.record_count
    else:
        with pytest.raises(ArchiveReadError) as e:
            read_records(store, wiring.value_format(cfg), obj)
        assert "came from protobuf values" in str(e.value) and obj.object_key in str(e.value)


def test_a_corrupt_protobuf_record_fails_the_batch_naming_it(spark, kafka, s3, bucket, schema_registry,
                                                             schema_registry_url, order_cls):
    t = f"pb-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(t, partitions=1)
    sid = register(schema_registry, f"{t}-value", PROTO)
    good = [wire(sid, m) for m in orders(order_cls, 3)]
    produce(kafka, t, [good[0], good[1], b"\x00" + struct.pack(">I", sid) + b"\x00\x0a\xff", good[2]])
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, t, **{
        "format.class": "json", "schema.registry.url": schema_registry_url,
        "value.converter": "io.confluent.connect.protobuf.ProtobufConverter"}))
    with pytest.raises(BatchFailedError) as e:
        SinkJob(spark, cfg).run_batch(flush_tail=True)
    assert f"{t}-0@2" in str(e.value) and "Protobuf" in str(e.value) and e.value.exit_code == 6
    assert manifest_rows(spark, cfg) == []
