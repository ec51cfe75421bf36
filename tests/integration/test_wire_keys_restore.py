"""Keys in Confluent wire-format Avro, against the real Schema Registry (Apicurio) (#10 item 2): archived with
key.decoder=avro into Avro .keys side files (the key's registry schema, its id in the file's metadata, new files
when the key schema changes) and restored byte-identical, keys and values, in order."""
from __future__ import annotations

import json
import struct

import fastavro
from support.archive_checks import base_config, check_chains, consume, manifest_rows, produce
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

import lakesink
from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.objects.formats.avro import KEY_SCHEMA_ID

K1 = {"type": "record", "name": "OrderKey", "namespace": "k", "fields": [{"name": "order_id", "type": "long"}]}
K2 = {**K1, "fields": K1["fields"] + [{"name": "region", "type": ["null", "string"], "default": None}]}


def test_wire_avro_keys_round_trip_byte_identical(spark, kafka, s3, bucket, topic_name, schema_registry,
                                                  schema_registry_url):
    client = schema_registry.client()

    def keys(schema, values):
        ser = AvroSerializer(client, json.dumps(schema))
        return [ser(v, SerializationContext(topic_name, MessageField.KEY)) for v in values]

    ks = keys(K1, [{"order_id": i} for i in range(5)]) + keys(K2, [{"order_id": 5, "region": "eu"}]) + \
        keys(K1, [{"order_id": i} for i in range(6, 9)])
    values = [b"value-%d\x00\xff" % i for i in range(len(ks))]
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, values, keys=ks, partition_of=lambda i: 0, headers=False)
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "format.class": "bytearray", "flush.size": "100", "store.kafka.keys": "true", "key.decoder": "avro",
        "schema.registry.url": schema_registry_url}))
    res = SinkJob(spark, cfg).run_batch(flush_tail=True)
    assert res.records == 9
    rows = sorted((r for r in manifest_rows(spark, cfg) if r.kind == "object"), key=lambda r: r.first_offset)
    check_chains(manifest_rows(spark, cfg), {(topic_name, 0): 9})
    # the key schema changes at offsets 5 and 6: each change starts new files
    assert [(r.first_offset, r.last_offset) for r in rows] == [(0, 4), (5, 5), (6, 8)]
    for r, k in zip(rows, (ks[0], ks[5], ks[6])):
        body = s3.client().get_object(Bucket=bucket, Key=r.keys_key)["Body"]
        reader = fastavro.reader(body)
        assert int(reader.metadata[KEY_SCHEMA_ID]) == struct.unpack(">I", k[1:5])[0]
        assert reader.writer_schema["name"] == "k.OrderKey"

    copy = f"copy_of_{topic_name}"
    kafka.create_topic(copy, partitions=1)
    rep = lakesink.restore(spark, cfg, to_topic=copy)
    assert rep.produced == 9
    got = consume(kafka, copy)
    assert [k for k, *_ in got] == ks  # byte-identical: magic byte, schema id, datum
    assert [v for _k, v, *_ in got] == values
    df = lakesink.read_archive(spark, cfg).orderBy("offset").select("key").collect()
    assert [bytes(r.key) for r in df] == ks
