"""End-to-end smoke run of the local stack (``make demo`` until ``lakesink demo`` exists).

Starts the S3 endpoint and a Kafka broker, produces keyed records to a 3-partition topic, reads them with
Spark's Kafka source (batch), writes them as a Delta table on ``s3a://``, reads the table back, prints a
summary and stops everything. Exit status 0 only if every record made the round trip.

    python -m lakesink.devstack.smoke [--records N]
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from lakesink.errors import LakesinkError

TOPIC = "demo.orders"
BUCKET = "lakesink-demo"


def run(records: int = 1000) -> int:
    from confluent_kafka import Producer

    from lakesink.devstack.stack import LocalStack
    from lakesink.spark import get_spark

    t0 = time.monotonic()
    with LocalStack() as stack:
        t_stack = time.monotonic() - t0
        print(f"stack up in {t_stack:.1f}s: Kafka {stack.kafka.bootstrap_servers}, S3 {stack.s3.endpoint_url}",
              flush=True)
        stack.kafka.create_topic(TOPIC, partitions=3)
        stack.s3.create_bucket(BUCKET)

        producer = Producer({"bootstrap.servers": stack.kafka.bootstrap_servers, "linger.ms": 5})
        for i in range(records):
            order = {"order_id": i, "customer": f"c{i % 17}", "amount_cents": (i * 7919) % 10_000}
            producer.produce(TOPIC, key=f"c{i % 17}".encode(), value=json.dumps(order).encode(),
                             headers=[("source", b"smoke")])
        if producer.flush(60):
            raise LakesinkError("smoke: producer could not deliver all records in 60 s")
        del producer
        print(f"produced {records} records to {TOPIC}", flush=True)

        t1 = time.monotonic()
        spark = get_spark("lakesink-smoke", master="local[2]", s3=stack.s3.s3_settings(),
                          conf={"spark.sql.shuffle.partitions": "2",
                                "spark.databricks.delta.snapshotPartitions": "2",
                                "spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        try:
            df = (spark.read.format("kafka")
                  .option("kafka.bootstrap.servers", stack.kafka.bootstrap_servers)
                  .option("subscribe", TOPIC)
                  .option("startingOffsets", "earliest").option("endingOffsets", "latest")
                  .option("includeHeaders", "true")
                  .load()
                  .selectExpr("topic", "partition", "offset", "CAST(key AS STRING) AS key",
                              "CAST(value AS STRING) AS value", "timestamp"))
            path = f"s3a://{BUCKET}/tables/demo_orders"
            df.write.format("delta").mode("overwrite").save(path)
            back = spark.read.format("delta").load(path)
            total = back.count()
            per_partition = {r.partition: r["count"] for r in back.groupBy("partition").count().collect()}
            t_spark = time.monotonic() - t1
        finally:
            spark.stop()

        objects = stack.s3.client().list_objects_v2(Bucket=BUCKET, Prefix="tables/demo_orders/")
        keys = [o["Key"] for o in objects.get("Contents", [])]
        print(f"Delta table {path}: {total} rows, per partition {dict(sorted(per_partition.items()))}; "
              f"{sum(k.endswith('.parquet') for k in keys)} parquet file(s), "
              f"{sum('/_delta_log/' in k for k in keys)} log object(s) (Spark part: {t_spark:.1f}s)")
    print(f"stack stopped; total {time.monotonic() - t0:.1f}s")
    if total != records:
        print(f"smoke FAILED: expected {records} rows, got {total}", file=sys.stderr)
        return 1
    print("smoke OK")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lakesink.devstack.smoke", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1000)
    args = ap.parse_args(argv)
    try:
        return run(args.records)
    except LakesinkError as e:
        print(f"lakesink smoke: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
