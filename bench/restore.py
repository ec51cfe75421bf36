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

``--cold`` (issue #30 item 2) measures instead what a user's ``lakesink restore`` costs: CPU, the process tree's
user+system time (``bench/cold.py``), per million records, every path a fresh process. One KafkaBroker and one
moto S3 endpoint; N JSON records (key, one header, CreateTime ``base + i`` ms) archived by a cold
``lakesink sink --once --flush-tail`` (local engine; keys, headers and the metadata side file stored), then, each
``--runs`` times: ``lakesink restore --to-topic`` of everything; ``restore --from-time/--to-time`` of the middle
quarter of the records (its JSON line's ``objects_read`` / ``blocks_skipped`` printed) and that window's
``--dry-run`` (its record count checked to be exact); and the **restore floor** of ``bench/floor.py`` (one
transactional librdkafka producer, the same values from a local file, no keys or headers). Target (printed, never
asserted): <= 10 CPU-s per million records for the full restore.

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


def produce_timed(servers: str, topic: str, n: int, base_ms: int) -> None:
    """``n`` JSON records like :func:`produce` (one version per key), record i timestamped ``base_ms + i``."""
    from confluent_kafka import Producer

    make = value_maker("json")
    p = Producer({"bootstrap.servers": servers, "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 500_000, "enable.idempotence": False, "acks": "1"})
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=make(i), key=b"k%d" % i, headers=[("i", b"%d" % i)],
                          partition=i % PARTITIONS, timestamp=base_ms + i)
                break
            except BufferError:
                p.poll(0.05)
        if i % 20000 == 0:
            p.poll(0)
    if p.flush(120):
        raise RuntimeError(f"could not deliver every record to {topic}")


def cold_main(a) -> int:
    """``--cold``: cold CLI processes, process-tree CPU (see the module docstring)."""
    import datetime as dt
    import statistics

    sys.path.insert(0, os.path.dirname(__file__))
    import cold  # bench/cold.py: process-tree CPU

    from confluent_kafka import Consumer, TopicPartition

    from lakesink.devstack.kafka import KafkaBroker
    from lakesink.devstack.s3 import S3Endpoint

    import compileall

    import lakesink

    # bytecode as an installed wheel has it (this machine sets PYTHONDONTWRITEBYTECODE: without it, every cold
    # process would compile the modules changed since the last write, ~0.3 CPU-s each)
    compileall.compile_dir(os.path.dirname(lakesink.__file__), quiet=1)
    n = a.records
    work = Path(tempfile.mkdtemp(prefix="lakesink-bench-restore-cold-"))
    kafka, s3 = KafkaBroker(heap="1g"), S3Endpoint()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    floor = os.path.join(os.path.dirname(__file__), "floor.py")

    def cli(*args: str) -> tuple[float, float, dict]:
        wall, cpu, out = cold.run_measured([sys.executable, "-m", "lakesink.cli", "--format", "json", *args], env)
        return wall, cpu, json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])

    def iso(ms: int) -> str:
        return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")

    load0 = tuple(round(x, 2) for x in os.getloadavg())  # the machine is shared: say how busy it was
    try:
        kafka.start()
        s3.spawn(work / "s3.log")
        s3.create_bucket("bench")
        servers = kafka.bootstrap_servers
        src = "bench-restore-cold"
        kafka.create_topic(src, partitions=PARTITIONS)
        base = int(time.time() * 1000) - n - 600_000
        produce_timed(servers, src, n, base)
        c = Consumer({"bootstrap.servers": servers, "group.id": "bench-dump", "enable.auto.commit": False})
        c.assign([TopicPartition(src, p, 0) for p in range(PARTITIONS)])
        dump: list[bytes] = []
        while len(dump) < n:
            dump += [m.value() for m in c.consume(num_messages=10_000, timeout=1.0) if m.error() is None]
        c.close()
        values_file = work / "values.jsonl"
        values_file.write_bytes(b"\n".join(dump) + b"\n")
        del dump
        cfg = {**config("json", "bench-cold", src, servers, work, a.flush_size),
               "store.url": s3.endpoint_url, "manifest.location": "s3a://bench/_lakesink/bench-cold",
               "aws.access.key.id": "testing", "aws.secret.access.key": "testing", "s3.region": "us-east-1"}
        cfg.pop("consumer.groups")
        cfg_file = work / "cfg.json"
        cfg_file.write_text(json.dumps(cfg))
        wall, cpu, doc = cli("sink", "--config", str(cfg_file), "--once", "--flush-tail")
        assert doc["records"] == n, doc
        log(f"archived {n:,} records: {wall:.1f} s, {cpu:.1f} CPU-s")
        lo, hi = base + n * 3 // 8, base + n * 5 // 8 - 1  # the middle quarter: n/4 records
        window = ("--from-time", iso(lo), "--to-time", iso(hi))
        rows = []
        for run in range(a.runs):
            row = {}
            dest = f"bench-cold-{run}-{uuid.uuid4().hex[:6]}"
            kafka.create_topic(dest, partitions=PARTITIONS)
            wall, cpu, doc = cli("restore", "--config", str(cfg_file), "--to-topic", dest)
            assert doc["produced"] == n, doc
            row["restore"] = (wall, cpu)
            wall, cpu, doc = cli("restore", "--config", str(cfg_file), "--to-topic", dest + "-w", *window,
                                 "--dry-run")
            row["window dry run"] = (wall, cpu)
            row["dry run says"] = (doc["records"], doc.get("records_exact"))
            kafka.create_topic(dest + "-w", partitions=PARTITIONS)
            wall, cpu, doc = cli("restore", "--config", str(cfg_file), "--to-topic", dest + "-w", *window)
            assert doc["produced"] == n // 4, doc
            row["window"] = (wall, cpu)
            row["window reads"] = {k: doc.get(k) for k in ("objects", "objects_read", "blocks_read",
                                                             "blocks_skipped")}
            kafka.create_topic(dest + "-f", partitions=PARTITIONS)
            wall, cpu, out = cold.run_measured([sys.executable, floor, "--restore-floor", "--servers", servers,
                                                "--values", str(values_file), "--topic", dest + "-f"], env)
            assert json.loads(out.splitlines()[-1])["records"] == n
            row["floor"] = (wall, cpu)
            log(f"run {run}: {row}")
            rows.append(row)
        per_m = 1e6 / n
        print(f"\nload average (1, 5, 15 min) at the start: {load0}, at the end: "
              f"{tuple(round(x, 2) for x in os.getloadavg())}")
        print(f"\ncold restore of {n:,} JSON records (key + one header each, ~230 B), 4 partitions, moto S3, "
              f"flush.size {a.flush_size:,}; process-tree CPU")
        print("| run | path | records | s | CPU-s | CPU-s per M records | vs floor (CPU) |")
        print("|---|---|---|---|---|---|---|")
        for i, row in enumerate(rows):
            fc = row["floor"][1]
            for path, key, k in (("restore", "restore", n), ("window restore (middle quarter)", "window", n // 4),
                                 ("window dry run", "window dry run", 0),
                                 ("restore floor (values only)", "floor", n)):
                w, c = row[key]
                print(f"| {i} | {path} | {k:,} | {w:.1f} | {c:.1f} | {c * 1e6 / k if k else 0:.1f} | "
                      f"{c / fc:.2f}x |")
            print(f"| {i} | window dry run says | {row['dry run says'][0]:,} (exact: {row['dry run says'][1]}) "
                  f"| | | | |")
            print(f"| {i} | window restore read | {row['window reads']} | | | | |")
        med = statistics.median(r["restore"][1] * per_m for r in rows)
        print(f"\nrestore: median {med:.1f} CPU-s per million records (target <= 10)")
        return 0
    finally:
        s3.stop()
        kafka.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cold", action="store_true", help="cold CLI processes, process-tree CPU (issue #30 item 2)")
    ap.add_argument("--runs", type=int, default=2, help="with --cold: runs of each path")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--format", default="json", choices=("json", "avro", "bytearray"))
    ap.add_argument("--flush-size", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--versions", type=int, default=10,
                    help="records per key (default 10): what --latest-per-key leaves out")
    a = ap.parse_args(argv)
    if a.cold:
        return cold_main(a)

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
