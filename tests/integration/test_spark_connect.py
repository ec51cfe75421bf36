"""Spark Connect as a tested environment (issue #28): every notebook API call on a Connect client session of a real
Spark Connect server (``spark_connect`` in conftest.py: pip pyspark's ``SparkConnectServer`` with the project's jars,
:mod:`lakesink.devstack.connect`).

One module archive (the direct reader, a path manifest written through Spark's SQL route, ``manifest.engine=spark``)
serves run, read_archive, restore, sql and every view, status and validate; a second job reads the same topic through
Spark's Kafka source (on the server's class path) into a catalog-table manifest; a third archives Avro through the
Schema Registry for schema_history / schema_check (the schema_evolution notebook's calls).
"""
from __future__ import annotations

import json
import uuid

import pytest
from support.archive_checks import base_config, consume, produce

import lakesink
from lakesink.config import SinkConfig
from lakesink.manifest.table import Manifest, commit_tag, is_connect
from lakesink.manifest.views import END_OFFSETS, MANIFEST, METRICS, VIEWS

N = 40  # records, 20 per partition; flush.size 10 -> 2 objects per partition


def values(start: int, end: int) -> list[bytes]:
    """JSON values as lakesink's JSON format writes them (compact), so read_archive and restore give the bytes back."""
    return [json.dumps({"id": i}, separators=(",", ":")).encode() for i in range(start, end)]


@pytest.fixture(scope="module", autouse=True)
def connect_mode():
    """``$SPARK_CONNECT_MODE_ENABLED`` while this module runs, as ``SparkSession.builder.remote()`` leaves it for a
    user (pyspark's ``functions`` then build Connect columns); unset again for the rest of the test process."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
        yield


@pytest.fixture(scope="module")
def archive(spark_connect, kafka, s3):
    """One topic (2 partitions, keys and headers) archived once on the Connect session: direct reader, JSON, a path
    manifest through Spark (``manifest.engine=spark``: DESCRIBE HISTORY, not the Delta Python API)."""
    assert is_connect(spark_connect)
    bucket = s3.create_bucket(f"connect-{uuid.uuid4().hex[:10]}")
    topic = f"connect-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=2)
    sent = produce(kafka, topic, values(0, N), partition_of=lambda i: i % 2)
    raw = base_config(kafka, s3, bucket, topic, **{
        "flush.size": "10", "manifest.engine": "spark", "store.kafka.keys": "true", "store.kafka.headers": "true",
        "manifest.location": f"s3a://{bucket}/_lakesink/connect"})
    cfg = SinkConfig.from_dict(raw)
    batches = lakesink.run(spark_connect, cfg, flush_tail=True)
    return {"cfg": cfg, "raw": raw, "topic": topic, "sent": sent, "batches": batches, "bucket": bucket}


def test_run_with_the_direct_reader_commits_through_sql_on_a_connect_session(spark_connect, archive):
    cfg = archive["cfg"]
    assert sum(b.records for b in archive["batches"]) == N
    manifest = Manifest(spark_connect, cfg.manifest_location)
    assert manifest.exists() and manifest.version() >= 1
    rows = manifest.df().where(f"job = '{cfg.name}' AND kind = 'object'").collect()
    assert sum(r.record_count for r in rows) == N and {r.kafka_partition for r in rows} == {0, 1}
    tags = {r.userMetadata for r in spark_connect.sql(f"DESCRIBE HISTORY delta.`{cfg.manifest_location}`").collect()}
    first = archive["batches"][0]
    assert commit_tag(cfg.name, first.batch_id, first.run_id) in tags
    # a path that holds no table is "no table", not an error (exists() without Delta's isDeltaTable)
    assert not Manifest(spark_connect, f"s3a://{archive['bucket']}/_lakesink/none").exists()


def test_run_continues_from_the_manifest_on_a_connect_session(spark_connect, kafka, archive):
    more = produce(kafka, archive["topic"], values(N, N + 6),
                   partition_of=lambda i: i % 2)
    done = lakesink.run(spark_connect, archive["cfg"], engine="spark", flush_tail=True)
    assert sum(b.records for b in done) == 6
    offsets = {r.kafka_partition: r.next_offset for r in lakesink.sql(
        spark_connect, archive["cfg"], "SELECT kafka_partition, next_offset FROM committed_offsets").collect()}
    assert offsets == {p: more[p][-1][0] + 1 for p in (0, 1)}


def test_run_with_the_spark_kafka_reader_into_a_catalog_manifest(spark_connect, kafka, s3, archive):
    raw = dict(archive["raw"], **{"name": f"spark-reader-{uuid.uuid4().hex[:6]}", "kafka.reader": "spark",
                                  "manifest.location": f"lakesink_connect_{uuid.uuid4().hex[:8]}",
                                  "topics.dir": "spark-reader"})
    raw.pop("manifest.engine")
    cfg = SinkConfig.from_dict(raw)
    batches = lakesink.run(spark_connect, cfg, flush_tail=True)
    archived = sum(b.records for b in batches)
    assert archived >= N
    total = spark_connect.sql(f"SELECT sum(record_count) AS n FROM {cfg.manifest_location} "
                              f"WHERE kind = 'object'").collect()[0].n
    assert total == archived
    report = lakesink.status(cfg, spark=spark_connect)
    assert not report.never_ran and {p.partition for p in report.partitions} == {0, 1}


def test_read_archive_on_a_connect_session(spark_connect, archive):
    df = lakesink.read_archive(spark_connect, archive["cfg"], where=f"topic = '{archive['topic']}'")
    got = {(r.partition, r.offset): (r.key, r.value) for r in df.collect()}
    for part, records in archive["sent"].items():
        for offset, key, value in records:
            assert got[(part, offset)] == (key, value)


def test_restore_on_a_connect_session(spark_connect, kafka, archive):
    to = f"{archive['topic']}-copy"
    kafka.create_topic(to, partitions=2)
    plan = lakesink.restore(spark_connect, archive["cfg"], where="kafka_partition = 1", to_topic=to, dry_run=True)
    done = lakesink.restore(spark_connect, archive["cfg"], where="kafka_partition = 1", to_topic=to)
    assert plan.records == done.produced >= N // 2
    copy = consume(kafka, to, 1)
    original = consume(kafka, archive["topic"], 1)[:len(copy)]
    assert [(k, v, h) for k, v, h, *_ in copy] == [(k, v, h) for k, v, h, *_ in original]


def test_sql_and_every_view_on_a_connect_session(spark_connect, archive):
    cfg = archive["cfg"]
    names = [MANIFEST, END_OFFSETS, METRICS, *VIEWS]
    counts = {name: lakesink.sql(spark_connect, cfg, f"SELECT * FROM {name}").count() for name in names}
    assert counts[MANIFEST] > 0 and counts["objects"] > 0 and counts["committed_offsets"] == 2
    registered = lakesink.register_views(spark_connect, cfg)
    assert set(names) <= set(registered)
    lag = {r.kafka_partition for r in spark_connect.sql("SELECT kafka_partition FROM lag").collect()}
    assert lag == {0, 1}


def test_status_and_validate_on_a_connect_session(spark_connect, archive):
    cfg = archive["cfg"]
    report = lakesink.status(cfg, spark=spark_connect)
    assert not report.never_ran and report.manifest_exists and {p.partition for p in report.partitions} == {0, 1}
    checked = lakesink.validate(cfg, spark=spark_connect)
    assert checked.success, [o for o in checked.outcomes if not o.success]
    assert checked.rows > 0


def test_notebook_calls_on_a_connect_session_keep_the_s3_secret_out_of_the_session_conf(spark_connect, archive):
    """The quickstart notebook's calls: get_spark(s3=...) returns the Connect session without putting the keys in
    its conf (the server reads s3a:// with its own credentials), then the manifest as a temp view and an object
    read back at its ETag."""
    from lakesink import wiring
    from lakesink.driver.archive import iter_objects, read_object
    from lakesink.store import open_store
    from lakesink.store.settings import S3Settings

    cfg = archive["cfg"]
    planted = S3Settings(endpoint_url=wiring.s3_settings(cfg).endpoint_url, access_key="AKIACONNECTPLANTED",
                         secret_key=f"planted-{uuid.uuid4().hex}")
    spark = lakesink.get_spark(app_name="lakesink-notebook", s3=planted)
    assert spark is spark_connect
    for key in ("fs.s3a.secret.key", "spark.hadoop.fs.s3a.secret.key", "fs.s3a.access.key"):
        assert spark.conf.get(key, None) is None, key
    shown = " ".join(f"{r.key}={r.value}" for r in spark.sql("SET").collect())
    assert planted.secret_key not in shown and planted.access_key not in shown
    spark.read.format("delta").load(cfg.manifest_location).createOrReplaceTempView("manifest")
    assert spark.sql("SELECT sum(record_count) AS n FROM manifest WHERE kind = 'object'").collect()[0].n >= N
    store = open_store(wiring.store_settings(cfg))
    first = next(iter_objects(spark.table("manifest").where("kind = 'object'").collect()))
    assert read_object(store, wiring.value_format(cfg), first)


def test_schema_history_and_check_on_a_connect_session(spark_connect, kafka, s3, schema_registry_url):
    """The schema_evolution notebook's calls: Avro through the registry archived on the Connect session into a
    catalog-table manifest (read through Spark), its schema history, a compatible and an incompatible candidate."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    v1 = {"type": "record", "name": "User", "namespace": "example",
          "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
    topic = f"users-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=1)
    registry = SchemaRegistryClient({"url": schema_registry_url})
    registry.set_compatibility(subject_name=f"{topic}-value", level="BACKWARD")
    serialize = AvroSerializer(registry, json.dumps(v1))
    p = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for i in range(20):
        p.produce(topic, key=str(i).encode(), value=serialize({"id": i, "name": f"u{i}"},
                                                               SerializationContext(topic, MessageField.VALUE)))
    assert p.flush(30) == 0
    bucket = s3.create_bucket(f"connect-avro-{uuid.uuid4().hex[:8]}")
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic, **{
        "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": schema_registry_url, "schema.compatibility": "BACKWARD",
        "manifest.location": f"lakesink_users_{uuid.uuid4().hex[:8]}"}))
    assert sum(b.records for b in lakesink.run(spark_connect, cfg, flush_tail=True)) == 20
    history = lakesink.schema_history(cfg, topic, spark=spark_connect)
    assert len(history.entries) == 1
    v2 = {**v1, "fields": v1["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}]}
    assert lakesink.schema_check(cfg, v2, mode="BACKWARD", spark=spark_connect).compatible
    bad = {**v1, "fields": [{"name": "id", "type": "string"}, {"name": "name", "type": "string"}]}
    report = lakesink.schema_check(cfg, bad, mode="BACKWARD", spark=spark_connect)
    assert not report.compatible and "id" in {i.path for i in report.incompatibilities}
    versions = lakesink.sql(spark_connect, cfg, "SELECT schema_version FROM schema_history").collect()
    assert [r.schema_version for r in versions] == [1]
