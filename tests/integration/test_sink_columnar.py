"""The columnar path on real Spark: the Kafka read carries only the columns the config uses, and bare
Avro is checked in the JVM (to_avro(from_avro(value)) = value) before its datums are copied."""
from __future__ import annotations

import io
import json

import fastavro
import pytest
from support.archive_checks import archived_values, base_config, check_chains, manifest_rows, produce

from lakesink.executor.columnar import CANONICAL
from lakesink.config import SinkConfig
from lakesink.driver.sink import PartitionPlan, SinkJob
from lakesink.errors import BatchFailedError

SCHEMA = {"type": "record", "name": "Reading", "namespace": "t",
          "fields": [{"name": "id", "type": "long"}, {"name": "site", "type": "string"},
                     {"name": "temp", "type": ["null", "double"], "default": None}]}
PARSED = fastavro.parse_schema(SCHEMA)


def datum(i: int) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, PARSED, {"id": i, "site": f"s{i % 3}", "temp": None if i % 4 else i / 2})
    return out.getvalue()


def test_read_columns_follow_the_config(spark, kafka, s3, bucket, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    plans = [PartitionPlan(topic_name, 0, 0, 1)]
    avro = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "format.class": "avro", "value.schema": json.dumps(SCHEMA)}))
    df, plan = SinkJob(spark, avro)._read(plans)
    # ts_type: the timestamp type, for the .metadata.avro side file (store.kafka.metadata, on by default)
    assert df.columns == ["value", "partition", "offset", "ts", "ts_type", CANONICAL] and plan.kind == "avro"
    stored = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "store.kafka.keys": "true", "store.kafka.headers": "true", "headers.format.class": "json"}))
    df, plan = SinkJob(spark, stored)._read(plans)
    assert df.columns == ["value", "partition", "offset", "ts", "key", "headers", "ts_type"]
    assert (plan.kind, plan.keys, plan.headers) == ("json", True, True)  # side files a column at a time too
    bare = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{"store.kafka.metadata": "false"}))
    df, plan = SinkJob(spark, bare)._read(plans)
    assert df.columns == ["value", "partition", "offset", "ts"]


def test_bare_avro_checked_in_the_jvm_then_copied(spark, kafka, s3, bucket, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    values = [datum(i) for i in range(45)]
    assert values[20][0] == 0x28  # id=20 zig-zags to one byte, 0x28 ...
    values[20] = b"\xa8\x00" + values[20][1:]  # ... written over-long: valid Avro, not canonical
    produce(kafka, topic_name, values, headers=False)
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "format.class": "avro", "value.schema": json.dumps(SCHEMA)}))
    SinkJob(spark, cfg).run_batch(flush_tail=True)
    check_chains(manifest_rows(spark, cfg), {(topic_name, 0): 45})
    want = [fastavro.schemaless_reader(io.BytesIO(v), PARSED, None) for v in values]
    assert archived_values(spark, cfg)[(topic_name, 0)] == want

    # a datum with a byte after it would shift every later datum of its block: the batch fails, naming it
    produce(kafka, topic_name, [datum(45), datum(46) + b"\x00", datum(47)], headers=False)
    with pytest.raises(BatchFailedError, match=rf"nothing was committed: DecodeError: record {topic_name}-0@46: "
                                              r"1 trailing bytes"):
        SinkJob(spark, cfg).run_batch(flush_tail=True)
    check_chains(manifest_rows(spark, cfg), {(topic_name, 0): 45})


def test_parquet_rows_decoded_by_spark_equal_the_record_path(spark, kafka, s3, bucket, topic_name, monkeypatch):
    from lakesink.executor.columnar import DECODED, ColumnarPlan

    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, [datum(i) for i in range(35)], headers=False)

    def cfg(name):
        return SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
            "name": f"{name}-{topic_name}", "topics.dir": name, "format.class": "parquet",
            "value.schema": json.dumps(SCHEMA)}))

    columnar, record = cfg("columnar"), cfg("record")
    df, plan = SinkJob(spark, columnar)._read([PartitionPlan(topic_name, 0, 0, 35)])
    assert plan.kind == "parquet" and DECODED in df.columns
    SinkJob(spark, columnar).run_batch(flush_tail=True)
    monkeypatch.setattr(ColumnarPlan, "for_parts", classmethod(lambda cls, p: None))  # driver side: no plan
    SinkJob(spark, record).run_batch(flush_tail=True)

    objects = {}
    for c in (columnar, record):
        rows = manifest_rows(spark, c)
        check_chains(rows, {(topic_name, 0): 35})
        objects[c.topics_dir] = {r.object_key.split("/", 1)[1]: s3.client().get_object(
            Bucket=bucket, Key=r.object_key)["Body"].read() for r in rows}
    assert len(objects["columnar"]) == 4 and objects["columnar"] == objects["record"]
    want = [fastavro.schemaless_reader(io.BytesIO(datum(i)), PARSED, None) for i in range(35)]
    assert archived_values(spark, columnar)[(topic_name, 0)] == want
