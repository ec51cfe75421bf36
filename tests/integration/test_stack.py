"""The local stack's building blocks, each checked exactly: Kafka -> Spark, Delta on S3A, S3 multipart."""
from __future__ import annotations

import json
import random

import pytest

N_RECORDS = 10_000
PARTITIONS = 3
MiB = 1024 * 1024


# ------------------------------------------------------------------------------ Kafka -> Spark source
def _headers_for(i: int) -> list[tuple[str, bytes | None]]:
    hs: list[tuple[str, bytes | None]] = [("idx", str(i).encode()), ("bin", bytes([i % 256, 0, 255]))]
    if i % 7 == 0:
        hs.append(("nullable", None))
    if i % 11 == 0:
        hs.append(("idx", b"dup"))  # repeated header keys keep their order
    return hs


def test_kafka_records_roundtrip_through_spark_kafka_source(kafka, spark, topic_name):
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    kafka.create_topic(topic_name, partitions=PARTITIONS)
    rng = random.Random(7)
    sent: dict[tuple[int, int], tuple] = {}
    errors: list = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
            return
        i = int(msg.key().decode().split("-")[1])  # delivery reports carry no headers: rebuild them
        sent[(msg.partition(), msg.offset())] = (msg.key(), msg.value(), _headers_for(i), msg.timestamp()[1])

    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5,
                         "enable.idempotence": True, "acks": "all"})
    for i in range(N_RECORDS):
        value = b"" if i % 13 == 0 else rng.randbytes(rng.randint(1, 200))
        producer.produce(topic_name, key=f"key-{i}".encode(), value=value, headers=_headers_for(i),
                         on_delivery=on_delivery)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "producer did not deliver everything within 60 s"
    del producer
    assert not errors, errors[:3]
    assert len(sent) == N_RECORDS

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "wm"})
    try:
        high = {p: consumer.get_watermark_offsets(TopicPartition(topic_name, p), timeout=30)[1]
                for p in range(PARTITIONS)}
    except KafkaException as e:  # pragma: no cover
        pytest.fail(f"watermarks: {e}")
    finally:
        consumer.close()
    per_partition = {p: sum(1 for (pp, _) in sent if pp == p) for p in range(PARTITIONS)}
    assert all(per_partition.values()), f"keys did not spread over all partitions: {per_partition}"
    assert high == {p: max(o for (pp, o) in sent if pp == p) + 1 for p in range(PARTITIONS)}

    starting = {topic_name: {str(p): 0 for p in range(PARTITIONS)}}
    ending = {topic_name: {str(p): high[p] for p in range(PARTITIONS)}}
    df = (spark.read.format("kafka")
          .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
          .option("subscribe", topic_name)
          .option("startingOffsets", json.dumps(starting))
          .option("endingOffsets", json.dumps(ending))
          .option("includeHeaders", "true")
          .load()
          .selectExpr("topic", "partition", "offset", "key", "value", "headers",
                      "unix_millis(timestamp) AS ts_ms"))
    rows = df.collect()
    assert len(rows) == N_RECORDS

    got = {}
    for r in rows:
        assert r.topic == topic_name
        headers = [(h.key, None if h.value is None else bytes(h.value)) for h in (r.headers or [])]
        got[(r.partition, r.offset)] = (bytes(r.key), bytes(r.value), headers, r.ts_ms)
    assert got.keys() == sent.keys()
    mismatches = [k for k in sent if got[k] != sent[k]]
    assert not mismatches, f"{len(mismatches)} records differ, e.g. {mismatches[0]}: " \
                           f"sent {sent[mismatches[0]]!r} got {got[mismatches[0]]!r}"


# ------------------------------------------------------------------------------ Delta on S3A
def test_delta_table_on_s3a_with_idempotent_txn_append(spark, s3, bucket):
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    path = f"s3a://{bucket}/tables/events"
    base = spark.range(0, 500).withColumn("name", F.concat(F.lit("n-"), F.col("id").cast("string")))
    base.write.format("delta").save(path)

    back = spark.read.format("delta").load(path)
    assert sorted((r.id, r.name) for r in back.collect()) == [(i, f"n-{i}") for i in range(500)]
    # the same table through s3:// (mapped to S3AFileSystem)
    assert spark.read.format("delta").load(f"s3://{bucket}/tables/events").count() == 500

    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket, Prefix="tables/events/")["Contents"]]
    assert "tables/events/_delta_log/00000000000000000000.json" in keys
    assert any(k.endswith(".parquet") for k in keys)

    extra = spark.range(1000, 1100).withColumn("name", F.lit("x"))
    for _ in range(2):  # the second write carries the same (txnAppId, txnVersion): Delta skips it
        (extra.write.format("delta").mode("append")
         .option("txnAppId", "app").option("txnVersion", 1).save(path))

    assert spark.read.format("delta").load(path).count() == 600
    history = DeltaTable.forPath(spark, path).history().orderBy("version").collect()
    assert [h.version for h in history] == [0, 1]
    appends = [h for h in history if h.operation == "WRITE" and h.operationParameters.get("mode") == "Append"]
    assert len(appends) == 1 and appends[0].version == 1

    log = [o["Key"] for o in s3.client().list_objects_v2(
        Bucket=bucket, Prefix="tables/events/_delta_log/")["Contents"] if o["Key"].endswith(".json")]
    assert sorted(log) == [f"tables/events/_delta_log/{v:020d}.json" for v in (0, 1)]
    commit1 = s3.client().get_object(Bucket=bucket, Key=sorted(log)[1])["Body"].read().decode()
    txns = [json.loads(line)["txn"] for line in commit1.splitlines() if '"txn"' in line]
    assert txns and txns[0]["appId"] == "app" and txns[0]["version"] == 1


# ------------------------------------------------------------------------------ S3 multipart + ranges
def test_s3_multipart_upload_and_ranged_get(s3, bucket):
    client = s3.client()
    rng = random.Random(11)
    parts = [rng.randbytes(5 * MiB) for _ in range(3)] + [rng.randbytes(123_457)]
    data = b"".join(parts)
    key = "big/object.bin"

    mpu = client.create_multipart_upload(Bucket=bucket, Key=key)
    etags = []
    for n, chunk in enumerate(parts, start=1):
        resp = client.upload_part(Bucket=bucket, Key=key, PartNumber=n, UploadId=mpu["UploadId"], Body=chunk)
        etags.append({"PartNumber": n, "ETag": resp["ETag"]})
    done = client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=mpu["UploadId"],
                                            MultipartUpload={"Parts": etags})
    assert done["ETag"].strip('"').endswith("-4")

    head = client.head_object(Bucket=bucket, Key=key)
    assert head["ContentLength"] == len(data)

    for start, end in [(5 * MiB - 1000, 5 * MiB + 999),        # across part 1 / part 2
                       (15 * MiB - 7, 15 * MiB + 100_000),     # across part 3 / tail
                       (len(data) - 10, len(data) - 1)]:       # last bytes
        got = client.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end}")
        body = got["Body"].read()
        assert got["ContentRange"] == f"bytes {start}-{end}/{len(data)}"
        assert body == data[start:end + 1]
    assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == data

# lakesink dev up/status/down (with the Schema Registry): tests/integration/test_cli_commands.py
