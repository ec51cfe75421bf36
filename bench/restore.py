"""Restore and read_archive throughput on the local stack, each against a plain-Spark baseline in the same run.

    .venv/bin/python bench/restore.py [--records N] [--format json|avro|bytearray] [--flush-size F]

What runs (one KafkaBroker, one local[2] session; objects on a local directory, ``store.url=file://``, and the
manifest on a local path, so the numbers are compute-bound, not moto-bound):

* a 4-partition source topic with N records (round-robin partitions, a key and one header each, ~200 B values),
  archived once by ``SinkJob.run_batch(flush_tail=True)`` with ``store.kafka.keys`` / ``store.kafka.headers``;
* **restore**: ``lakesink.restore(spark, cfg, to_topic=...)`` (transactional, progress in each transaction, one
  Spark task per destination partition) into a fresh 4-partition topic, vs **plain Spark**: the same records
  read from the source topic with ``spark.read.format("kafka")`` and written with ``df.write.format("kafka")``
  (key, value, headers, partition; not transactional, no resume) into another fresh topic;
* **read**: ``lakesink.read_archive(spark, cfg).count()`` (one task per object: ETag check, keys, headers,
  metadata) vs Spark's own reader over the same value objects (``spark.read.json`` / ``.format("avro")`` /
  ``.text``) ``.count()`` (values only).

* **disaster recovery**, each against the plain restore of the same records in the same run:
  ``restore(..., latest_per_key=True)`` (``--versions`` records per key, default 10: one in ten produced) and
  ``restore(..., groups=[GROUP])`` (a consumer group committed at half of each source partition before the
  archive, recorded by the sink's ``consumer.groups``, placed on the restored topic in the restore's transactions;
  checked: the group resumes at the record it had not consumed).

A warm-up (a small restore and the baselines on a small topic) loads the JVM classes and Python workers first.
Ratios = lakesink records/s / baseline records/s. Targets (printed, never asserted): restore >= 1.0x,
read_archive >= 0.8x. Each timed path runs once (``--repeat`` for best-of).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

PARTITIONS = 4
#: the consumer group the DR variant places on the restored topic (committed at half of each partition)
GROUP = "bench-consumers"
SCHEMA = {"type": "record", "name": "Order", "namespace": "bench",
          "fields": [{"name": "order_id", "type": "long"}, {"name": "customer", "type": "string"},
                     {"name": "note", "type": "string"}]}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def value_maker(fmt: str):
    import fastavro

    parsed = fastavro.parse_schema(SCHEMA)

    def make(i: int) -> bytes:
        rec = {"order_id": i, "customer": f"customer-{i % 9973}", "note": "x" * 150}
        if fmt == "avro":
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, parsed, rec)
            return buf.getvalue()
        return json.dumps(rec, separators=(",", ":")).encode()
    return make


def produce(servers: str, topic: str, n: int, make, versions: int = 1) -> None:
    """``n`` records, partition ``i % 4``, key ``k<i // versions>``... spread so each key stays in one partition:
    ``versions`` records per key (the latest-per-key restore keeps one of them)."""
    from confluent_kafka import Producer

    distinct = max(PARTITIONS, n // versions // PARTITIONS * PARTITIONS)

    p = Producer({"bootstrap.servers": servers, "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 500_000, "enable.idempotence": False, "acks": "1"})
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=make(i), key=b"k%d" % (i % distinct), headers=[("i", b"%d" % i)],
                          partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
        if i % 20000 == 0:
            p.poll(0)
    if p.flush(120):
        raise RuntimeError(f"could not deliver every record to {topic}")


def config(fmt: str, name: str, topic: str, servers: str, work: Path, flush_size: int) -> dict:
    cfg = {"name": name, "topics": topic, "format.class": fmt, "flush.size": str(flush_size),
           "consumer.groups": GROUP,
           "s3.bucket.name": "bench", "store.url": f"file://{work}/store", "manifest.location": f"{work}/manifest",
           "kafka.bootstrap.servers": servers, "store.kafka.keys": "true", "store.kafka.headers": "true"}
    if fmt == "avro":
        cfg["value.schema"] = json.dumps(SCHEMA)
    return cfg


def commit_group(servers: str, topic: str, offsets: dict[int, int]) -> None:
    """Consumer group :data:`GROUP` at ``offsets`` of ``topic`` (what the sink's ``consumer.groups`` records)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": servers, "group.id": GROUP, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def committed(servers: str, topic: str) -> dict[int, int]:
    """:data:`GROUP`'s committed offsets on ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": servers, "group.id": GROUP, "enable.auto.commit": False})
    got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    c.close()
    return {tp.partition: tp.offset for tp in got}


def first_headers(servers: str, topic: str, offsets: dict[int, int]) -> dict[int, bytes]:
    """The ``i`` header of the record at each partition's offset (where a consumer of the group starts)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": servers, "group.id": f"bench-peek-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    out = {}
    for p, o in offsets.items():
        c.assign([TopicPartition(topic, p, o)])
        while p not in out:
            m = c.poll(10)
            if m is not None and m.error() is None:
                out[p] = dict(m.headers())["i"]
    c.close()
    return out


def plain_copy(spark, servers: str, src: str, dest: str, n: int) -> None:
    """Plain Spark: read the records from Kafka, write them to another topic (same partitions)."""
    per = {str(p): -1 for p in range(PARTITIONS)}
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", servers)
          .option("assign", json.dumps({src: list(range(PARTITIONS))}))
          .option("startingOffsets", json.dumps({src: {str(p): 0 for p in range(PARTITIONS)}}))
          .option("endingOffsets", json.dumps({src: per})).option("includeHeaders", "true").load())
    (df.selectExpr("key", "value", "headers", "partition").write.format("kafka")
     .option("kafka.bootstrap.servers", servers).option("topic", dest).save())


def spark_read_count(spark, fmt: str, paths: list[str]) -> int:
    if fmt == "json":
        return spark.read.json(paths).count()
    if fmt == "avro":
        return spark.read.format("avro").load(paths).count()
    return spark.read.text(paths).count()


def timed(fn, repeat: int = 1):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--format", default="json", choices=("json", "avro", "bytearray"))
    ap.add_argument("--flush-size", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--versions", type=int, default=10,
                    help="records per key (default 10): what --latest-per-key leaves out")
    a = ap.parse_args(argv)

    import lakesink
    from lakesink.config import SinkConfig
    from lakesink.devstack.kafka import KafkaBroker
    from lakesink.driver.archive import select_objects
    from lakesink.driver.sink import SinkJob
    from lakesink.runtime.spark import get_spark
    from lakesink import wiring

    work = Path(tempfile.mkdtemp(prefix="lakesink-bench-restore-"))
    kafka = KafkaBroker(heap="1g")
    spark = None
    try:
        kafka.start()
        servers = kafka.bootstrap_servers
        spark = get_spark("lakesink-bench-restore", master="local[2]",
                          conf={"spark.ui.showConsoleProgress": "false", "spark.driver.memory": "3g"})
        spark.sparkContext.setLogLevel("ERROR")
        make = value_maker(a.format)
        results = {}
        for phase, n in (("warm-up", min(5000, a.records)), ("timed", a.records)):
            src = f"bench-src-{phase}-{uuid.uuid4().hex[:6]}"
            kafka.create_topic(src, partitions=PARTITIONS)
            t = time.perf_counter()
            produce(servers, src, n, make, a.versions)
            commit_group(servers, src, {p: n // PARTITIONS // 2 for p in range(PARTITIONS)})
            log(f"{phase}: produced {n:,} records to {src} in {time.perf_counter() - t:.1f}s")
            cfg = SinkConfig.from_dict(config(a.format, f"bench-{phase}-{uuid.uuid4().hex[:6]}", src, servers, work,
                                              a.flush_size))
            t = time.perf_counter()
            res = SinkJob(spark, cfg).run_batch(flush_tail=True)
            assert res.records == n, res.summary()
            log(f"{phase}: archived in {time.perf_counter() - t:.1f}s ({res.objects} objects)")

            def restore_once():
                dest = f"bench-restore-{uuid.uuid4().hex[:6]}"
                kafka.create_topic(dest, partitions=PARTITIONS)
                rep = lakesink.restore(spark, cfg, to_topic=dest)
                assert rep.produced == n, (rep.produced, n)

            def plain_once():
                dest = f"bench-plain-{uuid.uuid4().hex[:6]}"
                kafka.create_topic(dest, partitions=PARTITIONS)
                plain_copy(spark, servers, src, dest, n)

            store_root = work / "store" / "bench"
            objects = select_objects(spark, cfg, wiring.manifest(cfg, spark))
            paths = [str(store_root / o.object_key) for o in objects]
            t_restore, _ = timed(restore_once, a.repeat)
            t_plain, _ = timed(plain_once, a.repeat)
            t_read, c1 = timed(lambda: lakesink.read_archive(spark, cfg).count(), a.repeat)
            t_sread, c2 = timed(lambda: spark_read_count(spark, a.format, paths), a.repeat)
            assert c1 == n and c2 == n, (c1, c2, n)

            def latest_once():
                dest = f"bench-latest-{uuid.uuid4().hex[:6]}"
                kafka.create_topic(dest, partitions=PARTITIONS)
                rep = lakesink.restore(spark, cfg, to_topic=dest, latest_per_key=True)
                assert rep.produced == max(PARTITIONS, n // a.versions // PARTITIONS * PARTITIONS), rep.produced

            def groups_once():
                dest = f"bench-groups-{uuid.uuid4().hex[:6]}"
                kafka.create_topic(dest, partitions=PARTITIONS)
                rep = lakesink.restore(spark, cfg, to_topic=dest, groups=[GROUP])
                assert rep.produced == n, (rep.produced, n)
                half = n // PARTITIONS // 2  # the group's source offset in each partition: record i = half*4 + p
                assert first_headers(servers, dest, committed(servers, dest)) == {
                    p: b"%d" % (half * PARTITIONS + p) for p in range(PARTITIONS)}

            t_latest, _ = timed(latest_once, a.repeat)
            t_groups, _ = timed(groups_once, a.repeat)
            log(f"{phase}: restore {t_restore:.1f}s, plain Spark copy {t_plain:.1f}s, read_archive().count() "
                f"{t_read:.1f}s, spark.read {t_sread:.1f}s, --latest-per-key {t_latest:.1f}s, --groups {t_groups:.1f}s")
            results = {"records": n, "format": a.format, "objects": len(objects), "restore_s": t_restore,
                       "latest_s": t_latest, "groups_s": t_groups,
                       "plain_kafka_write_s": t_plain, "read_archive_count_s": t_read, "spark_read_count_s": t_sread}
        n = results["records"]
        print(f"\nrestore of {n:,} {a.format} records ({results['objects']} objects, 4 partitions, local[2], "
              f"file:// store)")
        print(f"{'path':<44}{'seconds':>9}{'records/s':>12}")
        for label, key in (("lakesink.restore (exactly-once)", "restore_s"),
                           ("plain Spark df.write.format('kafka')", "plain_kafka_write_s"),
                           ("read_archive(...).count()", "read_archive_count_s"),
                           (f"spark.read ({a.format}) .count()", "spark_read_count_s")):
            print(f"{label:<44}{results[key]:>9.1f}{n / results[key]:>12,.0f}")
        print(f"restore / plain Spark write: {results['plain_kafka_write_s'] / results['restore_s']:.2f}x "
              f"(target >= 1.0x)")
        print(f"read_archive / spark.read:   {results['spark_read_count_s'] / results['read_archive_count_s']:.2f}x "
              f"(target >= 0.8x)")
        print(f"restore --latest-per-key ({a.versions} versions per key) / plain restore: "
              f"{results['latest_s'] / results['restore_s']:.2f}x the time, "
              f"{n // a.versions:,} of {n:,} records produced")
        print(f"restore --groups ({GROUP}, at half of each partition) / plain restore: "
              f"{results['groups_s'] / results['restore_s']:.2f}x the time")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        kafka.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
