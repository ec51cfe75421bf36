"""`lakesink demo`: the sink end to end on the embedded local stack, explained as it goes.

Starts a real Kafka broker and an S3 endpoint on 127.0.0.1, produces orders to a 3-partition
topic, archives them with a Confluent-style S3 sink config, prints the object keys, the committed
offsets and a SQL query over the Delta manifest, shows that a re-run archives nothing twice,
then stops everything. Exit status 0 only if every produced record is archived exactly once.
"""
from __future__ import annotations

import json
import sys
import time

TOPIC = "orders"
BUCKET = "lakesink-demo"
RECORDS = 1000

CONFIG = """\
# A Confluent S3 sink config, as pasted from Kafka Connect (connector.class/tasks.max are ignored)
name=orders-archive
connector.class=io.confluent.connect.s3.S3SinkConnector
tasks.max=1
topics=orders
topics.dir=topics
format.class=io.confluent.connect.s3.format.json.JsonFormat
partitioner.class=io.confluent.connect.storage.partitioner.DefaultPartitioner
flush.size=100
store.kafka.keys=true
keys.format.class=io.confluent.connect.s3.format.json.JsonFormat
s3.bucket.name={bucket}
s3.region=us-east-1
store.url={endpoint}
aws.access.key.id=testing
aws.secret.access.key=testing
# lakesink's own keys: where Kafka is, where the manifest lives, how keys are decoded
kafka.bootstrap.servers={bootstrap}
manifest.location=s3a://{bucket}/_lakesink/manifest
key.decoder=string
"""


def run(records: int = RECORDS) -> int:
    from confluent_kafka import Producer

    from lakesink.config import SinkConfig, parse_properties
    from lakesink.devstack.stack import LocalStack
    from lakesink.driver.sink import SinkJob
    from lakesink.spark import get_spark, s3_settings_for

    t0 = time.monotonic()
    with LocalStack() as stack:
        print(f"== local stack up in {time.monotonic() - t0:.1f}s: Kafka {stack.kafka.bootstrap_servers}, "
              f"S3 {stack.s3.endpoint_url}", flush=True)
        stack.kafka.create_topic(TOPIC, partitions=3)
        stack.s3.create_bucket(BUCKET)
        p = Producer({"bootstrap.servers": stack.kafka.bootstrap_servers, "linger.ms": 5})
        for i in range(records):
            order = {"order_id": i, "customer": f"c{i % 17}", "amount_cents": (i * 7919) % 10_000}
            p.produce(TOPIC, key=f"c{i % 17}".encode(), value=json.dumps(order).encode())
        if p.flush(30):
            print("demo: the producer could not deliver every record in 30 s", file=sys.stderr)
            return 1
        del p  # a live producer would keep reconnecting (and logging) after the broker stops
        print(f"== produced {records} orders to topic {TOPIC!r} (3 partitions)")

        text = CONFIG.format(bucket=BUCKET, endpoint=stack.s3.endpoint_url, bootstrap=stack.kafka.bootstrap_servers)
        print("== config (.properties)\n" + text)
        cfg = SinkConfig.from_dict(parse_properties(text), source="demo.properties")
        for k, why in cfg.ignored_keys:
            print(f"   ignored: {k} ({why})")

        spark = get_spark(app_name="lakesink-demo", master="local[2]", s3=s3_settings_for(cfg))
        spark.sparkContext.setLogLevel("ERROR")
        res = SinkJob(spark, cfg).run_batch()
        print(f"== batch 1 (flush.size=100; tails below 100 stay uncommitted): {res.summary()}")
        res = SinkJob(spark, cfg).run_batch(flush_tail=True)
        print(f"== batch 2 (--flush-tail closes the tails): {res.summary()}")
        res = SinkJob(spark, cfg).run_batch(flush_tail=True)
        print(f"== batch 3 (nothing new: exactly once, nothing re-archived): {res.committed_rows} rows committed")

        keys = sorted(o["Key"] for o in stack.s3.client().list_objects_v2(Bucket=BUCKET, Prefix="topics/")["Contents"])
        print(f"== {len(keys)} objects under s3://{BUCKET}/topics/, e.g.:")
        for k in keys[:4] + ["..."] + keys[-2:]:
            print(f"   {k}")

        spark.read.format("delta").load(cfg.manifest_location).createOrReplaceTempView("manifest")
        query = """SELECT topic, kafka_partition, count_if(kind = 'object') AS objects,
                          sum(record_count) AS records, min(range_start) AS first_offset,
                          max(range_end) AS last_offset, max(range_end) + 1 AS next_offset
                   FROM manifest GROUP BY topic, kafka_partition ORDER BY kafka_partition"""
        print("== manifest query:\n   " + " ".join(query.split()))
        rows = spark.sql(query).collect()
        spark.sql(query).show(truncate=False)
        first = spark.sql("SELECT object_key, etag FROM manifest WHERE kind='object' "
                          "ORDER BY kafka_partition, first_offset LIMIT 1").first()
        body = stack.s3.client().get_object(Bucket=BUCKET, Key=first.object_key)["Body"].read()
        print(f"== first lines of {first.object_key} (etag {first.etag}):")
        for line in body.splitlines()[:2]:
            print(f"   {line.decode()}")
        archived = sum(r.records for r in rows)
        spark.stop()
        ok = archived == records and all(r.first_offset == 0 for r in rows)
        print(f"== {'OK' if ok else 'MISMATCH'}: {archived} of {records} records archived exactly once "
              f"in {time.monotonic() - t0:.0f}s", file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 1


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="run the sink end to end on the embedded local stack")
    p.add_argument("--records", type=int, default=RECORDS)
    p.set_defaults(func=lambda args: run(args.records))
