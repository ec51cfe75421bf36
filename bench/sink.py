"""Sink throughput on the local stack: lakesink vs plain Spark vs a bare Kafka read, in one run.

    .venv/bin/python bench/sink.py [--records N] [--flush-size F] [--s3-formats avro[,json..]]
                                   [--manifest-rows R] [--skip-manifest] [--profile FORMAT]

What runs (all against one KafkaBroker, one moto S3 endpoint in its own process, one local[2] session):

* two 4-partition topics, N records each (round-robin partitions, null keys, no headers), ~200 B values:
  ``bench-avro``: bare Avro binary (fastavro.schemaless_writer, no wire header) of ``AVRO_SCHEMA``, read by
  the Avro and Parquet rows with ``value.schema`` inline (no Schema Registry here);
  ``bench-json``: compact JSON text of ``JSON_RECORD``, read by the JSON and ByteArray rows.
* per format, every reader sees exactly the same offsets [0, end) of every partition:
  - ``bare read``: ``spark.read.format("kafka")`` (assign + starting/endingOffsets) ``.load().count()``;
  - ``plain Spark``: the same read, value decoded as lakesink decodes it, written with DataFrameWriter
    (``maxRecordsPerFile`` = flush.size, so object counts match; no naming, no manifest):
      avro      ``from_avro(value, schema)`` -> ``.write.format("avro")`` compression=uncompressed
                (lakesink's default avro.codec=null);
      parquet   ``from_avro(value, schema)`` -> ``.write.parquet`` compression=snappy (lakesink default);
      json      ``from_json(CAST(value AS STRING), ddl)`` -> ``.write.json`` ignoreNullFields=false
                (lakesink parses each value with json.loads and re-serialises it);
      bytearray ``CAST(value AS STRING)`` -> ``.write.text`` (value bytes + "\\n", as lakesink's default
                separator; equivalent because the values are UTF-8);
  - ``read floor``: the DataFrame ``SinkJob`` itself reads for that config (only the columns it uses, plus
    the JVM-side Avro check of the columnar path) through ``mapInArrow`` to Python workers that only count:
    no object, no manifest. The ceiling of any sink whose writers run in Python on the executors;
  - ``lakesink``: ``SinkJob(spark, cfg).run_batch(flush_tail=True)`` with a fresh job name on the manifest
    table the warm-up job created and read (as every batch after a job's first finds it); the time is the
    whole batch (plan + archive + Delta commit), the phases are printed too.
  Destinations: a local directory (``store.url=file://``, manifest on a local path: compute-bound) for
  every format, and the moto S3 endpoint for ``--s3-formats`` (objects and plain Spark output over
  ``s3a://``; lakesink's manifest on ``s3a://`` too).
* a Delta manifest with R (default 1,000,000) rows in the manifest's schema, written as
  ``--manifest-appends`` commits, then ``--manifest-commits`` real ``Manifest.commit`` calls of a
  sink-sized batch (rows per batch = objects of the local Avro run) -> per-batch commit latency at R rows,
  and ``Manifest.snapshot(job)`` (the next-offset lookup) cold (DeltaLog cache cleared) and warm.

Before the timed runs a warm-up (5,000 records per partition through every path) loads the JVM classes
and the Python workers. The bare read is best of 3; every other timed path runs once (``--repeat`` for
best-of). records/s and MB/s are over the Kafka values read (MB = 1e6 bytes of value payload);
ratio = lakesink records/s / baseline records/s.
Targets (printed, never asserted): sink >= 1.0x plain Spark per format, >= 0.7x bare read,
lookup <= 2 s at 1M rows. The table is also written to ``bench/results/sink-latest.json``.

Keys and headers (``--keys-headers FORMATS``, default json,avro; ``--side-formats``, default avro,json): per format
a topic ``<topic>-kh`` of the same values with a key (~14 B, :func:`record_key`) and two headers (~45 B,
:func:`record_headers`) per record, archived per reader (warm batch, ``file://``) without side files and with
``store.kafka.keys=true``/``store.kafka.headers=true`` in each side-file format; the process tree's CPU and the
ratio with side files / without are printed (target <= 1.3x, issue #30 item 1) and written to the JSON.

``--profile FORMAT`` instead runs the executor-side archive function (``lakesink.executor.task.archive_partitions``)
in this process under cProfile over one partition (to a local store) and prints the top functions.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import fastavro  # noqa: E402

PARTITIONS = 4
BUCKET = "lakesink-bench"
FORMATS = ("avro", "json", "parquet", "bytearray")
TOPIC_OF = {"avro": "bench-avro", "parquet": "bench-avro", "json": "bench-json", "bytearray": "bench-json"}
RESULTS = Path(__file__).resolve().parent / "results" / "sink-latest.json"

AVRO_SCHEMA = {
    "type": "record", "name": "Order", "namespace": "bench",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "email", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string"},
        {"name": "created_ms", "type": "long"},
        {"name": "status", "type": "string"},
        {"name": "channel", "type": "string"},
        {"name": "shipping_address", "type": "string"},
        {"name": "items", "type": {"type": "array", "items": "string"}},
        {"name": "quantity", "type": "int"},
        {"name": "gift", "type": "boolean"},
        {"name": "note", "type": ["null", "string"]},
    ],
}
# The JSON topic's values: a subset of the same order (so the JSON text is ~200 B too).
JSON_FIELDS = ("order_id", "customer", "email", "amount", "currency", "created_ms", "status", "channel",
               "quantity", "gift", "note")
JSON_DDL = ("order_id BIGINT, customer STRING, email STRING, amount DOUBLE, currency STRING, created_ms BIGINT, "
            "status STRING, channel STRING, quantity INT, gift BOOLEAN, note STRING")

_STATUS = ("NEW", "PAID", "SHIPPED", "CANCELLED")
_CHANNEL = ("web", "mobile-app", "store", "partner-api")


def order(i: int) -> dict:
    return {
        "order_id": 10_000_000 + i, "customer": f"customer-{i % 99991:05d}",
        "email": f"user{i % 99991:05d}@example.com", "amount": round((i % 100000) * 1.37, 2), "currency": "EUR",
        "created_ms": 1_700_000_000_000 + i * 17, "status": _STATUS[i % 4], "channel": _CHANNEL[i % 4],
        "shipping_address": f"{i % 9999} Long Street Name, {10000 + i % 89999} Springfield, Some Country",
        "items": [f"sku-{(i * 7) % 10000:05d}-blue-xl", f"sku-{(i * 13) % 10000:05d}-red-m",
                  f"sku-{(i * 17) % 10000:05d}-green-s", f"sku-{(i * 19) % 10000:05d}-black-l"][: 1 + i % 4],
        "quantity": 1 + i % 5, "gift": i % 7 == 0,
        "note": None if i % 3 else f"deliver after {i % 24}:00, ring twice please",
    }


def avro_value(parsed, i: int) -> bytes:
    b = io.BytesIO()
    fastavro.schemaless_writer(b, parsed, order(i))
    return b.getvalue()


def json_value(i: int) -> bytes:
    o = order(i)
    return json.dumps({k: o[k] for k in JSON_FIELDS}, separators=(",", ":")).encode()


# ---------------------------------------------------------------------------------------------- helpers

def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class CpuMeter:
    """CPU used on this machine during a section, split into this benchmark's process tree (driver, Spark
    JVM, Python workers, Kafka broker, moto) and everything else -- other jobs on a shared box skew the
    numbers, so every row reports the foreign share. Linux /proc only; silently empty elsewhere."""

    def __init__(self):
        self.tck = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.ncpu = os.cpu_count() or 1

    @staticmethod
    def _busy() -> int:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v) - v[3] - v[4]  # minus idle, iowait

    def _tree(self) -> int:
        procs = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    rest = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            procs[int(d)] = (int(rest[1]), sum(int(x) for x in rest[11:15]))  # ppid, utime+stime+cutime+cstime
        mine, frontier = {os.getpid()}, [os.getpid()]
        while frontier:
            parent = frontier.pop()
            for pid, (ppid, _) in procs.items():
                if ppid == parent and pid not in mine:
                    mine.add(pid)
                    frontier.append(pid)
        return sum(procs[p][1] for p in mine if p in procs)

    def snap(self):
        try:
            return time.perf_counter(), self._busy(), self._tree()
        except OSError:
            return time.perf_counter(), 0, 0

    def foreign_pct(self, start, end=None) -> float:
        """Share of the machine's CPU capacity used by OTHER processes between two snaps (0-100)."""
        end = end or self.snap()
        wall = end[0] - start[0]
        other = (end[1] - start[1]) - (end[2] - start[2])
        # approximate: CPU of benchmark processes that exit unreaped between two snaps counts as foreign
        return min(100.0, max(0.0, 100.0 * other / self.tck / (wall * self.ncpu))) if wall > 0 else 0.0


METER = CpuMeter()


def timed(fn, repeat: int = 1):
    """Best wall time of ``repeat`` calls, and the last call's result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


#: the keys+headers variant (issue #30 item 1): topics holding the same values with a key and two headers per
#: record, archived with and without ``store.kafka.keys``/``store.kafka.headers``
KH_SUFFIX = "-kh"


def record_key(i: int) -> bytes:
    """The keys+headers variant's key of record ``i`` (~14 B)."""
    return b"customer-%05d" % (i % 99991)


def record_headers(i: int) -> list[tuple[str, bytes]]:
    """The keys+headers variant's headers of record ``i``: a constant one and a per-record trace id (~45 B)."""
    return [("source", b"bench-producer"), ("trace-id", b"%016x" % (i * 2654435761 % (1 << 64)))]


def produce(servers: str, topic: str, n: int, make, key=None, headers=None) -> int:
    """Produce n values (partition i % PARTITIONS; null key and no headers unless ``key``/``headers``, functions of
    i, give them); return the value bytes."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": servers, "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 500_000, "queue.buffering.max.kbytes": 512 * 1024,
                  "compression.type": "none", "acks": "1", "enable.idempotence": False})
    errors: list = []

    def done(err, _msg):
        if err:
            errors.append(err)

    total = 0
    for i in range(n):
        v = make(i)
        total += len(v)
        while True:
            try:
                if key is None and headers is None:
                    p.produce(topic, value=v, partition=i % PARTITIONS, on_delivery=done)
                else:
                    p.produce(topic, value=v, partition=i % PARTITIONS, on_delivery=done,
                              key=None if key is None else key(i), headers=None if headers is None else headers(i))
                break
            except BufferError:
                p.poll(0.05)
        if i % 20000 == 0:
            p.poll(0)
    if p.flush(120):
        raise RuntimeError(f"producer could not deliver every record to {topic} in 120 s")
    if errors:
        raise RuntimeError(f"produce to {topic}: {errors[:3]}")
    return total


def kafka_df(spark, servers: str, topic: str, ends: dict[int, int], per_partition: int | None = None,
             headers: bool = False):
    """``spark.read.format("kafka")`` over exactly [0, end) (or [0, per_partition)) of every partition."""
    start = {str(p): 0 for p in ends}
    end = {str(p): (min(e, per_partition) if per_partition else e) for p, e in ends.items()}
    return (spark.read.format("kafka").option("kafka.bootstrap.servers", servers)
            .option("assign", json.dumps({topic: sorted(ends)}))
            .option("startingOffsets", json.dumps({topic: start}))
            .option("endingOffsets", json.dumps({topic: end}))
            .option("includeHeaders", str(headers).lower()).option("failOnDataLoss", "true").load())


def plain_write(df, fmt: str, path: str, flush_size: int) -> None:
    """The plain-Spark baseline: decode like lakesink, write the same format with DataFrameWriter."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    w = None
    if fmt in ("avro", "parquet"):
        out = df.select(from_avro("value", json.dumps(AVRO_SCHEMA)).alias("r")).select("r.*")
        w = out.write.format("avro").option("compression", "uncompressed") if fmt == "avro" else \
            out.write.format("parquet").option("compression", "snappy")
    elif fmt == "json":
        out = df.select(F.from_json(F.col("value").cast("string"), JSON_DDL).alias("r")).select("r.*")
        w = out.write.format("json").option("ignoreNullFields", "false")
    elif fmt == "bytearray":
        w = df.select(F.col("value").cast("string").alias("value")).write.format("text")
    w.option("maxRecordsPerFile", flush_size).mode("overwrite").save(path)


def sink_config(fmt: str, name: str, servers: str, store_url: str, manifest: str, flush_size: int,
                extra: dict | None = None) -> dict:
    cfg = {
        "name": name, "topics": TOPIC_OF[fmt], "format.class": fmt, "flush.size": str(flush_size),
        "s3.bucket.name": BUCKET, "s3.region": "us-east-1", "store.url": store_url,
        "manifest.location": manifest, "kafka.bootstrap.servers": servers,
        "topics.dir": f"topics-{name}",  # formats sharing a topic (json, bytearray) must not share keys
    }
    if not store_url.startswith("file:"):
        cfg.update({"aws.access.key.id": "testing", "aws.secret.access.key": "testing"})
    if fmt in ("avro", "parquet"):
        cfg["value.schema"] = json.dumps(AVRO_SCHEMA)
    cfg.update(extra or {})
    return cfg


def floor_read(spark, cfg_dict: dict, n: int) -> float:
    """The read floor of a sink batch: exactly the DataFrame ``SinkJob`` reads (its columns, and the
    JVM-side Avro check of the columnar path) handed through ``mapInArrow`` to Python workers that
    only count the rows. No object, no manifest: what any sink running Python on the executors
    pays before it writes a byte."""
    from lakesink.config import SinkConfig
    from lakesink.driver.sink import SinkJob

    job = SinkJob(spark, SinkConfig.from_dict(cfg_dict))
    plans, _skipped, _ksnap, _batch = job.plan()

    def count(batches):
        import pyarrow as pa

        yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})

    t = time.perf_counter()
    df, _plan = job._read(plans)
    got = sum(r.n for r in df.mapInArrow(count, "n long").collect())
    dt = time.perf_counter() - t
    if got != n:
        raise RuntimeError(f"read floor counted {got} of {n} records")
    return dt


class TreeSampler:
    """CPU-seconds of this benchmark's own process tree (driver, Spark JVM, Python workers; the Kafka
    broker and moto excluded) over a section, and the peak RSS of each Python worker seen, sampled
    with psutil every ``interval`` s in a thread. A process that exits between samples loses its last
    < interval of CPU (the daemon's workers are reused, so this is rare)."""

    def __init__(self, exclude: set[int], interval: float = 0.25):
        import psutil

        self.psutil, self.exclude, self.interval = psutil, exclude, interval
        self.cpu: dict[int, float] = {}
        self.rss: dict[int, int] = {}
        self._stop = None

    def _procs(self):
        ps = self.psutil
        me = ps.Process(os.getpid())
        out = [me]
        for c in me.children():
            if c.pid in self.exclude:
                continue
            out.append(c)
            try:
                out.extend(c.children(recursive=True))
            except ps.Error:
                pass
        return out

    def _sample(self) -> None:
        for pr in self._procs():
            try:
                with pr.oneshot():
                    t = pr.cpu_times()
                    self.cpu[pr.pid] = max(self.cpu.get(pr.pid, 0.0), t.user + t.system)
                    cmd = pr.cmdline()
                    # python -m pyspark.daemon / pyspark.worker; not the JVM, whose classpath names pyspark/jars
                    if (pr.pid != os.getpid() and cmd and "python" in os.path.basename(cmd[0])
                            and any(c.startswith("pyspark.") for c in cmd[1:4])):
                        self.rss[pr.pid] = max(self.rss.get(pr.pid, 0), pr.memory_info().rss)
            except self.psutil.Error:
                pass

    def __enter__(self):
        import threading

        self._base = {}
        self._sample()
        self._base = dict(self.cpu)
        self.rss.clear()
        self._stop = threading.Event()

        def loop():
            while not self._stop.wait(self.interval):
                self._sample()
        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def cpu_s(self) -> float:
        return sum(v - self._base.get(p, 0.0) for p, v in self.cpu.items())

    @property
    def worker_rss_mb(self) -> float:
        """Peak RSS of the largest Python worker (daemon and its forked workers), MB."""
        return max(self.rss.values(), default=0) / 1e6


def ceiling_read(spark, servers: str, topic: str, ends: dict[int, int]) -> float:
    """The librdkafka ceiling: confluent-kafka consuming [0, end) of every partition inside one Spark
    task per partition (``mapInArrow`` over a DataFrame of ranges), touching each value and offset."""
    rows = [(topic, p, 0, e) for p, e in sorted(ends.items())]
    df = spark.sparkContext.parallelize(rows, len(rows)).toDF("topic string, partition int, start long, end long")

    def consume(batches):
        import pyarrow as pa
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        from lakesink.executor.kafka_reader import FETCH_QUEUE_BACKOFF_MS

        n = 0
        for b in batches:
            for t, p, start, end in zip(*(b.column(i).to_pylist() for i in range(4))):
                # the direct reader's fetch.queue.backoff.ms: librdkafka's 1 s default idles a reader this fast
                c = Consumer({"bootstrap.servers": servers, "group.id": "bench-ceiling", "enable.auto.commit": False,
                              "enable.partition.eof": True, "fetch.max.bytes": 64 << 20,
                              "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS})
                c.assign([TopicPartition(t, p, start)])
                off, deadline = start, time.monotonic() + 300
                while off < end and time.monotonic() < deadline:
                    for m in c.consume(10000, 1.0):
                        if m.error():
                            if m.error().code() != KafkaError._PARTITION_EOF:
                                raise RuntimeError(str(m.error()))
                            continue
                        o = m.offset()
                        if o >= end:
                            off = end
                            break
                        n += len(m.value()) > -1
                        off = o + 1
                c.close()
        yield pa.RecordBatch.from_pydict({"n": [n]})

    t = time.perf_counter()
    got = sum(r.n for r in df.mapInArrow(consume, "n long").collect())
    dt = time.perf_counter() - t
    if got != sum(ends.values()):
        raise RuntimeError(f"ceiling read counted {got} of {sum(ends.values())} records of {topic}")
    return dt


def setup_topic(kafka, servers: str, topic: str, n: int) -> tuple[float, int]:
    """Create one benchmark topic and produce its N records: (seconds, value bytes). A new topic row is
    a new entry in ``TOPIC_OF`` plus a branch here; a topic named ``<topic>-kh`` (:data:`KH_SUFFIX`) holds the
    same values with keys and headers (:func:`record_key`, :func:`record_headers`)."""
    kafka.create_topic(topic, partitions=PARTITIONS)
    base = topic[:-len(KH_SUFFIX)] if topic.endswith(KH_SUFFIX) else topic
    kh = {"key": record_key, "headers": record_headers} if base != topic else {}
    if base == "bench-avro":
        parsed = fastavro.parse_schema(AVRO_SCHEMA)
        make = lambda i: avro_value(parsed, i)  # noqa: E731
    elif base == "bench-json":
        make = json_value
    else:
        raise ValueError(f"no producer for topic {topic}")
    return timed(lambda: produce(servers, topic, n, make, **kh))


def run_sink(spark, cfg_dict: dict):
    from lakesink.config import SinkConfig
    from lakesink.driver.sink import SinkJob

    t = time.perf_counter()
    job = SinkJob(spark, SinkConfig.from_dict(cfg_dict))
    setup = time.perf_counter() - t
    t = time.perf_counter()
    res = job.run_batch(flush_tail=True)
    return time.perf_counter() - t, setup, res


# ---------------------------------------------------------------------------------------------- manifest

def build_manifest(spark, path: str, rows: int, appends: int, jobs: int = 10, topics_per_job: int = 2,
                   partitions: int = 8) -> None:
    """``rows`` manifest rows in ``appends`` Delta commits. Like the sink writes it: every commit holds the
    rows of ONE job (appends go round-robin over ``jobs``), each job archives its own ``topics_per_job``
    topics of ``partitions`` partitions, and every (job, topic, partition) is a chain of 50,000-record
    objects ``[k*50000, k*50000+49999]``."""
    from pyspark.sql import functions as F

    from lakesink.manifest import COLUMN_NAMES, Manifest

    Manifest(spark, path).ensure()
    schema = Manifest(spark, path).spark_schema()
    series = topics_per_job * partitions  # chains per job
    per_commit = -(-rows // appends)
    per_commit -= per_commit % series or 0
    per_commit = max(per_commit, series)
    written, seq0 = 0, [0] * jobs  # next chain position per job
    for k in range(appends):
        n = min(per_commit, rows - written)
        if n <= 0:
            break
        j = k % jobs
        i = F.col("id")
        s, seq = i % series, (i / series).cast("long") + F.lit(seq0[j])
        topic, part = F.lit(j * topics_per_job) + (s / partitions).cast("long"), s % partitions
        tname = F.concat(F.lit("topic-"), topic.cast("string"))
        start = seq * 50_000
        key = F.concat(F.lit("topics/"), tname, F.lit("/partition="), part.cast("string"), F.lit("/"), tname,
                       F.lit("+"), part.cast("string"), F.lit("+"), F.lpad(start.cast("string"), 10, "0"),
                       F.lit(".avro"))
        ts = F.timestamp_millis(F.lit(1_700_000_000_000) + seq * 60_000)
        cols = {
            "job": F.lit(f"job-{j}"), "topic": tname, "kafka_partition": part,
            "kind": F.lit("object"), "range_start": start, "range_end": start + 49_999,
            "first_offset": start, "last_offset": start + 49_999, "record_count": F.lit(50_000),
            "encoded_partition": F.concat(F.lit("partition="), part.cast("string")), "object_key": key,
            "object_uri": F.concat(F.lit(f"s3://{BUCKET}/"), key), "keys_key": F.lit(None),
            "headers_key": F.lit(None), "side_files": F.lit(None), "format": F.lit("avro"),
            "compression": F.lit("null"), "size_bytes": F.lit(10_000_000) + seq, "etag": F.md5(key),
            "version_id": F.lit(None), "min_timestamp": ts, "max_timestamp": ts,
            "schema_subject": F.lit(None), "schema_id": F.lit(None), "schema_version": F.lit(None),
            "schema_fingerprint": F.lit("0" * 64), "kafka_cluster_id": F.lit("bench-cluster"),
            "topic_id": F.concat(F.lit("tid-"), topic.cast("string")), "note": F.lit(None),
            "batch_id": F.lit(k // jobs), "run_id": F.lit("bench-run"), "committed_at": ts,
        }
        df = spark.range(n).select(*[cols[c].cast(schema[c].dataType).alias(c) for c in COLUMN_NAMES])
        df.write.format("delta").mode("append").save(path)
        written += n
        seq0[j] += -(-n // series)


def sink_like_rows(n_rows: int, batch: int, topic: str = "bench-commit") -> list:
    """One batch's manifest rows, shaped like the sink's (object rows spread over 4 partitions)."""
    from lakesink.manifest import object_row

    ts_ms = 1_767_225_600_000  # 2026-01-01
    rows = []
    for j in range(n_rows):
        part = j % PARTITIONS
        start = (batch * n_rows // PARTITIONS + j // PARTITIONS) * 50_000
        key = f"topics/{topic}/partition={part}/{topic}+{part}+{start:010d}.avro"
        rows.append(object_row(topic, part, start, start + 49_999, first_offset=start, last_offset=start + 49_999,
                               record_count=50_000, encoded_partition=f"partition={part}", object_key=key,
                               object_uri=f"s3://{BUCKET}/{key}", side_files=(), format="avro", compression="null",
                               size_bytes=10_000_000, etag=uuid.uuid4().hex, version_id=None,
                               min_timestamp_ms=ts_ms, max_timestamp_ms=ts_ms, kafka_cluster_id="bench-cluster",
                               topic_id="tid-commit"))
    return rows


def manifest_bench(spark, path: str, rows: int, appends: int, commits: int, rows_per_commit: int,
                   lookups: int, jobs: int) -> dict:
    from lakesink.manifest import Manifest

    log(f"manifest: writing {rows:,} rows in {appends} appends to {path}")
    t_build, _ = timed(lambda: build_manifest(spark, path, rows, appends, jobs=jobs))
    m = Manifest(spark, path)
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    look = f"job-{min(3, jobs - 1)}"
    out: dict = {"rows": m.df().count(), "build_s": round(t_build, 1), "files": detail.numFiles,
                 "size_mb": round(detail.sizeInBytes / 1e6, 1), "jobs": jobs, "appends": appends,
                 "lookup_job": look, "lookup_job_rows": m.df().where(f"job = '{look}'").count()}
    log(f"manifest: {out['rows']:,} rows, {out['files']} files, {out['size_mb']} MB in {t_build:.0f}s; "
        f"{commits} commits of {rows_per_commit} rows")

    # per-batch commit latency at this size (Manifest.commit = version + createDataFrame + Delta append + history check)
    lat = []
    for b in range(commits):
        batch = sink_like_rows(rows_per_commit, b)
        t, n = timed(lambda: m.commit("bench-commit-job", b, "bench-commit-run", batch))
        assert n == rows_per_commit
        lat.append(t)
    out["commit_s"] = [round(x, 3) for x in lat]
    # anatomy of one commit: the Delta append alone vs the verification alone (as Manifest.commit does them)
    from lakesink.manifest import commit_tag

    batch = sink_like_rows(rows_per_commit, commits, topic="bench-anatomy")
    versions = []

    def append_n(i, txn=True, warm=False):
        stamped = [r.stamped("bench-anatomy-job", i, "r", r.min_timestamp) for r in batch]
        versions.append(m.version())
        if warm:
            m.warm_commit()  # as the sink does while its executors archive: not part of the timed append
        df = spark.createDataFrame([r.as_tuple() for r in stamped], schema=m.spark_schema())
        w = df.coalesce(1).write.format("delta").mode("append")
        if txn:
            w = w.option("txnAppId", "bench-anatomy-job").option("txnVersion", i)
        t = time.perf_counter()
        w.option("userMetadata", commit_tag("bench-anatomy-job", i, "r")).save(path)
        return time.perf_counter() - t

    def verify(i):
        assert m.commits_since(versions[i], commit_tag("bench-anatomy-job", i, "r")) == [rows_per_commit]

    out["commit_append_only_s"] = [round(append_n(i), 3) for i in range(3)]
    out["commit_verify_s"] = [round(timed(lambda: verify(i))[0], 3) for i in range(3)]
    # the same append without txnAppId (no fencing: only to show what Delta's transaction-id lookup costs),
    # and with the ids resolved beforehand by Manifest.warm_commit
    out["commit_append_no_txn_s"] = [round(append_n(3 + i, txn=False), 3) for i in range(3)]
    out["commit_append_warm_s"] = [round(append_n(6 + i, warm=True), 3) for i in range(3)]

    # next-offset lookup: cold (DeltaLog cache dropped: log + checkpoint replay) and warm
    jvm_deltalog = spark._jvm.org.apache.spark.sql.delta.DeltaLog
    cold, warm = [], []
    for _ in range(lookups):
        jvm_deltalog.clearCache()
        t, snap = timed(lambda: Manifest(spark, path).snapshot(look))
        cold.append(t)
        t, snap = timed(lambda: m.snapshot(look))
        warm.append(t)
    out["lookup_parts"] = len(snap.partitions)
    out["lookup_cold_s"] = [round(x, 3) for x in cold]
    out["lookup_warm_s"] = [round(x, 3) for x in warm]
    return out


# ---------------------------------------------------------------------------------------------- profile

def profile(fmt: str, records: int, flush_size: int) -> None:
    """Run the executor-side archive body in this process under cProfile (stack, one partition)."""
    from lakesink.executor.archiver import BatchContext
    from lakesink.config import SinkConfig
    from lakesink.devstack.kafka import KafkaBroker
    from lakesink.executor.task import archive_partitions
    from lakesink.wiring import task_parts
    from lakesink.runtime.spark import get_spark

    work = Path(tempfile.mkdtemp(prefix="lakesink-bench-prof-"))
    with KafkaBroker() as kafka:
        servers = kafka.bootstrap_servers
        topic = TOPIC_OF[fmt]
        kafka.create_topic(topic, partitions=PARTITIONS)
        parsed = fastavro.parse_schema(AVRO_SCHEMA)
        produce(servers, topic, records, (lambda i: avro_value(parsed, i)) if topic == "bench-avro" else json_value)
        spark = get_spark("lakesink-bench-profile", master="local[2]",
                          conf={"spark.ui.showConsoleProgress": "false", "spark.driver.memory": "3g"})
        spark.sparkContext.setLogLevel("ERROR")
        from pyspark.sql import functions as F

        per = records // PARTITIONS
        df = (kafka_df(spark, servers, topic, {0: per}, headers=True)
              .select("key", "value", "topic", "partition", "offset", F.expr("unix_millis(timestamp)").alias("ts"),
                      "headers"))
        batches = df.toArrow().to_batches(max_chunksize=10_000)
        cfg = SinkConfig.from_dict(sink_config(fmt, f"prof-{fmt}", servers, f"file://{work}/store",
                                               str(work / "manifest"), flush_size))
        ctx = BatchContext(job=cfg.name, run_id="prof", batch_id=0, cluster_id=None, topic_ids={}, flush_tail=True)
        prof = cProfile.Profile()
        t = time.perf_counter()
        prof.enable()
        out = list(archive_partitions(iter(batches), task_parts(cfg), ctx, {(topic, 0): (0, per)}))
        prof.disable()
        dt_ = time.perf_counter() - t
        spark.stop()
    rows = out[0].num_rows if out else 0
    print(f"profile {fmt}: {per:,} records of {topic}-0 archived in {dt_:.2f}s under cProfile "
          f"({per / dt_:,.0f} rec/s), {rows - 1} objects")
    st = pstats.Stats(prof)
    st.sort_stats("tottime").print_stats(25)
    st.sort_stats("cumulative").print_stats(30)
    shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- main

# ------------------------------------------------------------------------- wire-format Avro (#11 item 2)
WIRE_TOPIC = "bench-avro-wire"


def wire_avro_row(spark, kafka, work: Path, n: int, flush_size: int, repeat: int = 1) -> dict:
    """The registry-backed wire-format Avro row (``--wire-avro``): a Schema Registry (Apicurio, as the
    devstack runs it) holding ``AVRO_SCHEMA`` under ``bench-avro-wire-value``, N Confluent wire-format values
    (magic byte, schema id, the same datums as ``bench-avro``) in ``bench-avro-wire``; lakesink with
    ``schema.registry.url`` (format avro, local ``file://`` store) vs plain Spark ``from_avro`` on the value
    after the 5-byte prefix (``substring(value, 6)``) written with ``.write.format("avro")``, and the bare read.
    Starts and stops its own registry; returns a result row shaped like the others."""
    from confluent_kafka.schema_registry import Schema
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    from lakesink.devstack.registry import SchemaRegistry
    from lakesink.driver.kafka_admin import KafkaMetadata

    registry = SchemaRegistry()
    registry.start()
    try:
        sid = registry.client().register_schema(f"{WIRE_TOPIC}-value", Schema(json.dumps(AVRO_SCHEMA), "AVRO"))
        prefix = b"\x00" + sid.to_bytes(4, "big")
        parsed = fastavro.parse_schema(AVRO_SCHEMA)
        servers = kafka.bootstrap_servers
        kafka.create_topic(WIRE_TOPIC, partitions=PARTITIONS)
        value_bytes = produce(servers, WIRE_TOPIC, n, lambda i: prefix + avro_value(parsed, i))
        snap = KafkaMetadata({"bootstrap.servers": servers}).snapshot([WIRE_TOPIC])
        ends = {p: snap.bounds[(WIRE_TOPIC, p)].latest for p in range(PARTITIONS)}

        def plain(path: str, per_partition: int | None = None, size: int = flush_size) -> None:
            df = kafka_df(spark, servers, WIRE_TOPIC, ends, per_partition)
            out = df.select(from_avro(F.expr("substring(value, 6)"), json.dumps(AVRO_SCHEMA)).alias("r")).select("r.*")
            out.write.format("avro").option("compression", "uncompressed").option("maxRecordsPerFile", size) \
                .mode("overwrite").save(path)

        def cfg(name: str, size: int = flush_size, extra: dict | None = None) -> dict:
            c = sink_config("avro", name, servers, f"file://{work}/wire-store", f"{work}/wire-manifest", size,
                            {"topics": WIRE_TOPIC, "topics.dir": name, "schema.registry.url": registry.url,
                             **(extra or {})})
            c.pop("value.schema")
            return c

        warm_n = 5000
        plain(f"{work}/wire-warm", warm_n, 2000)
        run_sink(spark, cfg("warm-wire", 2000, {"batch.max.records": str(warm_n)}))
        t_bare, cnt = timed(lambda: kafka_df(spark, servers, WIRE_TOPIC, ends).count(), max(3, repeat))
        assert cnt == n, cnt
        c0 = METER.snap()
        t_plain, _ = timed(lambda: plain(f"{work}/wire-plain"), repeat)
        log(f"plain Spark avro (wire) -> file: {t_plain:.1f}s")
        t_floor = floor_read(spark, cfg("floor-wire"), n)
        c1 = METER.snap()
        t_sink, setup, res = run_sink(spark, cfg("bench-wire"))
        if res.records != n:
            raise RuntimeError(f"lakesink wire avro archived {res.records} of {n} records")
        log(f"lakesink avro (wire) -> file: {t_sink:.1f}s ({res.summary()})")
    finally:
        registry.stop()
    mb = value_bytes / 1e6
    return {
        "format": "avro-wire", "destination": "local file://", "topic": WIRE_TOPIC, "records": n,
        "value_mb": round(mb, 1), "sink_s": round(t_sink, 2),
        "sink_phases_s": {k: round(v, 2) for k, v in res.seconds.items()}, "sink_setup_s": round(setup, 2),
        "sink_objects": res.objects, "sink_out_mb": round(res.bytes / 1e6, 1),
        "sink_rec_s": round(n / t_sink), "sink_mb_s": round(mb / t_sink, 2),
        "plain_s": round(t_plain, 2), "plain_rec_s": round(n / t_plain),
        "bare_read_s": round(t_bare, 2), "bare_rec_s": round(n / t_bare),
        "floor_s": round(t_floor, 2), "floor_rec_s": round(n / t_floor),
        "floor_vs_plain": round(t_plain / t_floor, 3), "floor_vs_bare": round(t_bare / t_floor, 3),
        "ratio_vs_plain": round(t_plain / t_sink, 3), "ratio_vs_bare": round(t_bare / t_sink, 3),
        "commit_s": round(res.seconds.get("commit", 0.0), 3),
        "foreign_cpu_pct": {"bare": 0.0, "plain": round(METER.foreign_pct(c0, c1), 1),
                            "sink": round(METER.foreign_pct(c1), 1)},
    }


def keys_headers_rows(spark, kafka, work: Path, n: int, formats: list[str], side_formats: list[str],
                      readers: list[str], flush_size: int, services: set[int]) -> list[dict]:
    """The keys+headers variant (issue #30 item 1): for each format, a topic of the same values with a key and two
    headers per record (``<topic>-kh``), archived (warm batch, local ``file://`` store) per reader without side files
    and with ``store.kafka.keys``/``store.kafka.headers`` in each of ``side_formats``; the process tree's CPU of each
    batch and the ratio with side files / without (target <= 1.3x)."""
    from lakesink.driver.kafka_admin import KafkaMetadata

    servers = kafka.bootstrap_servers
    out = []
    for topic in sorted({TOPIC_OF[f] + KH_SUFFIX for f in formats}):
        secs, _bytes = setup_topic(kafka, servers, topic, n)
        log(f"produced {n:,} records with keys and headers to {topic} in {secs:.1f}s")
    snap = KafkaMetadata({"bootstrap.servers": servers}).snapshot(sorted({TOPIC_OF[f] + KH_SUFFIX for f in formats}))
    assert all(b.latest - b.earliest for b in snap.bounds.values())
    for fmt in formats:
        topic = TOPIC_OF[fmt] + KH_SUFFIX
        for reader in readers:
            cpu = {}
            for side in ["none"] + side_formats:
                extra = {"topics": topic, "kafka.reader": reader}
                if side != "none":
                    extra.update({"store.kafka.keys": "true", "store.kafka.headers": "true",
                                  "keys.format.class": side, "headers.format.class": side})
                with TreeSampler(services) as tree:
                    t_sink, _setup, res = run_sink(spark, sink_config(
                        fmt, f"bench-kh-{fmt}-{reader}-{side}", servers, f"file://{work}/store",
                        f"{work}/warm/manifest-{fmt}", flush_size, extra))
                if res.records != n:
                    raise RuntimeError(f"lakesink {fmt} keys+headers ({reader}, {side}) archived {res.records} of {n}")
                cpu[side] = tree.cpu_s
                log(f"lakesink {fmt} keys+headers ({reader}, side files {side}): {t_sink:.1f}s, tree CPU "
                    f"{tree.cpu_s:.1f}s ({res.summary()})")
                out.append({"format": fmt, "reader": reader, "side_files": side, "records": n,
                            "sink_s": round(t_sink, 2), "cpu_s_per_m": round(tree.cpu_s * 1e6 / n, 2),
                            "cpu_ratio_vs_none": round(tree.cpu_s / cpu["none"], 3), "objects": res.objects})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="records per topic (default 1,000,000)")
    ap.add_argument("--flush-size", type=int, default=50_000)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--s3-formats", default="avro", help="formats also measured on the S3 endpoint ('' = none)")
    ap.add_argument("--repeat", type=int, default=1, help="best of R for the bare read and plain Spark")
    ap.add_argument("--manifest-rows", type=int, default=1_000_000)
    ap.add_argument("--manifest-appends", type=int, default=50)
    ap.add_argument("--manifest-commits", type=int, default=10)
    ap.add_argument("--manifest-jobs", type=int, default=10, help="jobs sharing the big manifest (1 = worst case)")
    ap.add_argument("--lookups", type=int, default=3)
    ap.add_argument("--skip-manifest", action="store_true")
    ap.add_argument("--readers", default="direct,spark", help="kafka.reader values to run lakesink with")
    ap.add_argument("--rss-flush-size", type=int, default=500_000,
                    help="also run lakesink (first format, first reader, file://) at this flush.size for the "
                         "peak Python-worker RSS (0 = skip)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--profile", metavar="FORMAT", help="profile the archive function for FORMAT and exit")
    ap.add_argument("--wire-avro", action="store_true", help="add the registry-backed wire-format Avro row")
    ap.add_argument("--keys-headers", default="json,avro",
                    help="formats of the keys+headers variant: the same values with keys and headers, archived without "
                         "and with side files; CPU ratio printed ('' = skip)")
    ap.add_argument("--side-formats", default="avro,json", help="side-file formats of the keys+headers variant")
    a = ap.parse_args(argv)
    if a.profile:
        profile(a.profile, a.records, a.flush_size)
        return 0

    from lakesink.devstack.kafka import KafkaBroker
    from lakesink.devstack.s3 import S3Endpoint
    from lakesink.runtime.spark import get_spark

    formats = [f for f in a.formats.split(",") if f]
    s3_formats = [f for f in a.s3_formats.split(",") if f and f in formats]
    readers = [r for r in a.readers.split(",") if r]
    n = a.records
    t_all = time.perf_counter()
    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="lakesink-bench-"))
    kafka = KafkaBroker(heap="1g")
    s3 = S3Endpoint()
    spark = None
    try:
        s3.spawn(work / "s3.log")  # moto in its own process: it must not share the driver's GIL
        kafka.start()
        s3.create_bucket(BUCKET)
        servers = kafka.bootstrap_servers
        log(f"stack: Kafka {servers}, S3 {s3.endpoint_url} (pid {s3.pid}); work dir {work}")

        topics = sorted({TOPIC_OF[f] for f in formats})
        value_bytes, produce_s = {}, {}
        for topic in topics:
            produce_s[topic], value_bytes[topic] = setup_topic(kafka, servers, topic, n)
            log(f"produced {n:,} records to {topic}: {value_bytes[topic] / n:.0f} B/value, "
                f"{produce_s[topic]:.1f}s")

        from lakesink.driver.kafka_admin import KafkaMetadata

        snap = KafkaMetadata({"bootstrap.servers": servers}).snapshot(topics)
        ends = {t: {p: snap.bounds[(t, p)].latest for p in range(PARTITIONS)} for t in topics}
        for t in topics:
            assert sum(ends[t].values()) == n and all(snap.bounds[(t, p)].earliest == 0 for p in range(PARTITIONS))

        spark = get_spark("lakesink-bench", master="local[2]", s3=s3.s3_settings(),
                          conf={"spark.sql.shuffle.partitions": "2", "spark.databricks.delta.snapshotPartitions": "2",
                                "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "3g"})
        spark.sparkContext.setLogLevel("ERROR")

        # -- warm-up: JVM classes, JIT, Python workers with lakesink imported, page cache
        t = time.perf_counter()
        warm_n = 5000
        for fmt in formats:
            topic = TOPIC_OF[fmt]
            kafka_df(spark, servers, topic, ends[topic], warm_n).count()
            plain_write(kafka_df(spark, servers, topic, ends[topic], warm_n), fmt, f"{work}/warm/plain-{fmt}", 2000)
            run_sink(spark, sink_config(fmt, f"warm-{fmt}", servers, f"file://{work}/warm/store",
                                        f"{work}/warm/manifest-{fmt}", 2000, {"batch.max.records": str(warm_n)}))
        for fmt in s3_formats:
            topic = TOPIC_OF[fmt]
            plain_write(kafka_df(spark, servers, topic, ends[topic], warm_n), fmt,
                        f"s3a://{BUCKET}/warm/plain-{fmt}", 2000)
            run_sink(spark, sink_config(fmt, f"warm-s3-{fmt}", servers, s3.endpoint_url,
                                        f"s3a://{BUCKET}/warm/manifest-{fmt}", 2000,
                                        {"batch.max.records": str(warm_n), "topics.dir": f"warm-{fmt}"}))
        log(f"warm-up {time.perf_counter() - t:.0f}s")

        # -- timed runs
        bare: dict[str, float] = {}
        bare_foreign: dict[str, float] = {}
        ceiling: dict[str, float] = {}
        services = {s3.pid, kafka.pid}
        for topic in topics:
            c0 = METER.snap()
            bare[topic], cnt = timed(lambda: kafka_df(spark, servers, topic, ends[topic]).count(), max(3, a.repeat))
            bare_foreign[topic] = METER.foreign_pct(c0)
            assert cnt == n, (topic, cnt)
            log(f"bare read {topic}: {bare[topic]:.1f}s")
            ceiling[topic], _ = timed(lambda: ceiling_read(spark, servers, topic, ends[topic]), max(2, a.repeat))
            log(f"librdkafka ceiling {topic}: {ceiling[topic]:.1f}s")

        results = []
        runs = [(f, "file") for f in formats] + [(f, "s3") for f in s3_formats]
        for fmt, dest in runs:
            topic = TOPIC_OF[fmt]
            if dest == "file":
                plain_path, store_url = f"{work}/plain/{fmt}", f"file://{work}/store"
                manifest = f"{work}/warm/manifest-{fmt}"  # the warm-up job's table: it exists, read before
            else:
                plain_path, store_url = f"s3a://{BUCKET}/plain/{fmt}", s3.endpoint_url
                manifest = f"s3a://{BUCKET}/warm/manifest-{fmt}"
            c0 = METER.snap()
            t_plain, _ = timed(lambda: plain_write(kafka_df(spark, servers, topic, ends[topic]), fmt, plain_path,
                                                   a.flush_size), a.repeat)
            log(f"plain Spark {fmt} -> {dest}: {t_plain:.1f}s")
            t_floor = floor_read(spark, sink_config(fmt, f"floor-{fmt}-{dest}", servers, store_url, manifest,
                                                    a.flush_size), n)
            log(f"read floor {fmt} -> {dest}: {t_floor:.1f}s")
            for reader in readers:
                c1 = METER.snap()
                with TreeSampler(services) as tree:
                    t_sink, setup, res = run_sink(spark, sink_config(
                        fmt, f"bench-{fmt}-{dest}-{reader}", servers, store_url, manifest, a.flush_size,
                        {"kafka.reader": reader}))
                if res.records != n:
                    raise RuntimeError(f"lakesink {fmt}->{dest} ({reader}) archived {res.records} of {n} records")
                log(f"lakesink {fmt} -> {dest} ({reader}): {t_sink:.1f}s, tree CPU {tree.cpu_s:.1f}s, "
                    f"worker RSS {tree.worker_rss_mb:.0f} MB ({res.summary()})")
                mb = value_bytes[topic] / 1e6
                results.append({
                    "format": fmt, "destination": "local file://" if dest == "file" else "S3 (moto)", "topic": topic,
                    "reader": reader, "records": n, "value_mb": round(mb, 1),
                    "sink_s": round(t_sink, 2), "sink_phases_s": {k: round(v, 2) for k, v in res.seconds.items()},
                    "sink_setup_s": round(setup, 2), "sink_objects": res.objects,
                    "sink_out_mb": round(res.bytes / 1e6, 1),
                    "sink_rec_s": round(n / t_sink), "sink_mb_s": round(mb / t_sink, 2),
                    "plain_s": round(t_plain, 2), "plain_rec_s": round(n / t_plain),
                    "bare_read_s": round(bare[topic], 2), "bare_rec_s": round(n / bare[topic]),
                    "ceiling_s": round(ceiling[topic], 2),
                    "floor_s": round(t_floor, 2), "floor_rec_s": round(n / t_floor),
                    "floor_vs_plain": round(t_plain / t_floor, 3), "floor_vs_bare": round(bare[topic] / t_floor, 3),
                    "ratio_vs_plain": round(t_plain / t_sink, 3), "ratio_vs_bare": round(bare[topic] / t_sink, 3),
                    "ratio_vs_ceiling": round(ceiling[topic] / t_sink, 3),
                    "cpu_s_per_m": round(tree.cpu_s * 1e6 / n, 1), "worker_rss_mb": round(tree.worker_rss_mb),
                    "commit_s": round(res.seconds.get("commit", 0.0), 3),
                    "foreign_cpu_pct": {"bare": round(bare_foreign[topic], 1),
                                        "plain": round(METER.foreign_pct(c0, c1), 1),
                                        "sink": round(METER.foreign_pct(c1), 1)},
                })

        rss = None
        if a.rss_flush_size and formats and readers:
            fmt, reader = formats[0], readers[0]
            topic = TOPIC_OF[fmt]
            with TreeSampler(services) as tree:
                _t, _setup, res = run_sink(spark, sink_config(
                    fmt, f"bench-rss-{fmt}", servers, f"file://{work}/store", f"{work}/warm/manifest-{fmt}",
                    a.rss_flush_size, {"kafka.reader": reader}))
            small = next(r["worker_rss_mb"] for r in results if r["format"] == fmt and r["reader"] == reader)
            rss = {"format": fmt, "reader": reader, "flush_size": a.rss_flush_size,
                   "worker_rss_mb": round(tree.worker_rss_mb), "at_flush_size": a.flush_size, "worker_rss_mb_small": small}
            log(f"worker RSS {fmt} ({reader}) flush.size {a.rss_flush_size:,}: {tree.worker_rss_mb:.0f} MB")

        if a.wire_avro:
            results.append(wire_avro_row(spark, kafka, work, n, a.flush_size, a.repeat))

        kh_formats = [f for f in a.keys_headers.split(",") if f and f in formats]
        kh_rows = keys_headers_rows(spark, kafka, work, n, kh_formats,
                                    [f for f in a.side_formats.split(",") if f], readers, a.flush_size,
                                    services) if kh_formats else []

        # what the headers column alone costs the read (store.kafka.headers=true; the records have no headers)
        hdr_floor = None
        if "json" in formats:
            hdr_cfg = sink_config("json", "floor-headers", servers, f"file://{work}/store", f"{work}/warm/manifest-json",
                                  a.flush_size, {"store.kafka.headers": "true", "headers.format.class": "json"})
            hdr_floor = (round(floor_read(spark, hdr_cfg, n), 2),
                         next(r["floor_s"] for r in results if r["format"] == "json"))
            log(f"read floor json with the headers column: {hdr_floor[0]:.1f}s (without: {hdr_floor[1]:.1f}s)")

        man = None
        if not a.skip_manifest and a.manifest_rows > 0:
            per_batch = next((r["sink_objects"] for r in results if r["destination"].startswith("local")), 20) or 20
            c0 = METER.snap()
            man = manifest_bench(spark, f"{work}/manifest-1m", a.manifest_rows, a.manifest_appends,
                                 a.manifest_commits, per_batch, a.lookups, a.manifest_jobs)
            man["foreign_cpu_pct"] = round(METER.foreign_pct(c0), 1)
    finally:
        if spark is not None:
            spark.stop()
        kafka.stop()
        s3.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    total = time.perf_counter() - t_all
    load_end = os.getloadavg()

    # -- report
    print(f"\nlakesink sink benchmark: {n:,} records per topic, {PARTITIONS} partitions, flush.size={a.flush_size:,}, "
          f"Spark local[2], {os.cpu_count()} CPUs, Python {platform.python_version()}")
    for t in topics:
        print(f"  {t}: {value_bytes[t] / n:.0f} B/value, {value_bytes[t] / 1e6:.1f} MB of values; bare read "
              f"(spark.read.format('kafka')...count()) {bare[t]:.2f}s = {n / bare[t]:,.0f} rec/s, "
              f"{value_bytes[t] / 1e6 / bare[t]:.1f} MB/s")
    hdr = (f"{'format':10} {'destination':14} {'reader':6} {'lakesink rec/s':>14} {'MB/s':>6} {'plain rec/s':>12} {'MB/s':>6} "
           f"{'vs plain':>8} {'vs bare':>8} {'vs ceil':>8} {'CPU s/M':>7} {'wRSS MB':>7}  {'floor vs plain':>14} {'floor vs bare':>13}  {'objs':>4}  "
           f"{'other CPU %':>11}  lakesink phases (s)")
    print("\n" + hdr + "\n" + "-" * len(hdr))
    for r in results:
        ph = " ".join(f"{k} {v:.1f}" for k, v in r["sink_phases_s"].items())
        f_ = r["foreign_cpu_pct"]
        fc = f"{f_['bare']:3.0f}/{f_['plain']:3.0f}/{f_['sink']:3.0f}"
        ceil_x = f"{r['ratio_vs_ceiling']:7.2f}x" if r.get("ratio_vs_ceiling") is not None else f"{'-':>8}"
        cpu = f"{r['cpu_s_per_m']:7.1f}" if r.get("cpu_s_per_m") is not None else f"{'-':>7}"
        # the --wire-avro row measures neither the ceiling, CPU nor worker RSS
        print(f"{r['format']:10} {r['destination']:14} {r.get('reader', 'direct'):6} {r['sink_rec_s']:14,} "
              f"{r['sink_mb_s']:6.1f} "
              f"{r['plain_rec_s']:12,} {r['value_mb'] / r['plain_s']:6.1f} {r['ratio_vs_plain']:7.2f}x "
              f"{r['ratio_vs_bare']:7.2f}x {ceil_x} {cpu} {r.get('worker_rss_mb', '-'):>7}  "
              f"{r['floor_vs_plain']:13.2f}x {r['floor_vs_bare']:12.2f}x  "
              f"{r['sink_objects']:4}  {fc}  {ph}")
    print("targets (#9): >= 1.0x bare read and >= 1.5x plain Spark for bytearray and avro; >= 1.0x plain Spark for "
          "json and parquet; >= 0.6x the librdkafka ceiling for bytearray; <= 18 CPU s per million records; "
          "lookup <= 2 s at 1M rows")
    print("ceiling = confluent-kafka consuming the same ranges in one Spark task per partition, touching each value: "
          + ", ".join(f"{t} {ceiling[t]:.2f}s" for t in topics))
    print("CPU s/M = CPU-seconds per million records of this benchmark's process tree (driver, JVM, Python workers; "
          "broker and moto excluded) during the lakesink batch; wRSS = peak RSS of the largest Python worker")
    if rss:
        print(f"peak Python-worker RSS, {rss['format']} ({rss['reader']}): flush.size {rss['at_flush_size']:,} "
              f"{rss['worker_rss_mb_small']} MB, flush.size {rss['flush_size']:,} {rss['worker_rss_mb']} MB")
    print("floor = the sink's own Kafka read handed to Python workers that only count (no write, no manifest): "
          "the ceiling of any sink whose writers run in Python on the executors")
    if hdr_floor:
        print(f"read floor of the json topic with the headers column (store.kafka.headers=true, records without "
              f"headers): {hdr_floor[0]:.2f}s; without it: {hdr_floor[1]:.2f}s")
    print("other CPU % = share of the machine's CPU used by processes outside this benchmark during the bare read /"
          " plain Spark / lakesink runs")
    worst = max([max(r["foreign_cpu_pct"].values()) for r in results] + [man["foreign_cpu_pct"] if man else 0])
    if worst > 10:
        print(f"WARNING: other processes used up to {worst:.0f}% of the CPUs during timed sections: "
              f"the numbers are not clean; rerun on an idle machine")
    if kh_rows:
        print("\nkeys and headers (issue #30): the same values with a key (~14 B) and two headers (~45 B) per record, "
              "warm batch to file://, side files none / in each side-file format; CPU ratio = with / without "
              "(target <= 1.3x)")
        print(f"{'format':10} {'reader':6} {'side files':10} {'lakesink s':>10} {'CPU s/M':>8} {'CPU ratio':>9}")
        for r in kh_rows:
            print(f"{r['format']:10} {r['reader']:6} {r['side_files']:10} {r['sink_s']:10.2f} {r['cpu_s_per_m']:8.2f} "
                  f"{r['cpu_ratio_vs_none']:8.2f}x")
    print("\nmanifest commit latency per sink batch (fresh manifest, one batch each): "
          + ", ".join(f"{r['format']}/{'file' if r['destination'].startswith('local') else 's3a'} {r['commit_s']:.2f}s"
                      for r in results))
    if man:
        c = man["commit_s"]
        print(f"manifest with {man['rows']:,} rows of {man['jobs']} jobs, written as {man['appends']} one-job commits "
              f"({man['files']} files, {man['size_mb']} MB, local path, built in {man['build_s']:.0f}s):")
        print(f"  commit of one {results[0]['sink_objects'] if results else ''}-row batch (Manifest.commit): "
              f"median {statistics.median(c):.2f}s, min {min(c):.2f}s, max {max(c):.2f}s over {len(c)} batches; "
              f"its two halves measured apart: Delta append (createDataFrame + write) median "
              f"{statistics.median(man['commit_append_only_s']):.2f}s, verification (the commit found in the table "
              f"history) median {statistics.median(man['commit_verify_s']):.2f}s")
        print(f"  the Delta append without txnAppId (unfenced, for comparison) median "
              f"{statistics.median(man['commit_append_no_txn_s']):.2f}s; with txnAppId after Manifest.warm_commit "
              f"(as the sink commits) median {statistics.median(man['commit_append_warm_s']):.2f}s")
        print(f"  next-offset lookup Manifest.snapshot({man['lookup_job']!r}) ({man['lookup_job_rows']:,} rows of that job, "
              f"{man['lookup_parts']} partitions): "
              f"cold {statistics.median(man['lookup_cold_s']):.2f}s (median of {len(man['lookup_cold_s'])}, "
              f"DeltaLog cache cleared), warm {statistics.median(man['lookup_warm_s']):.2f}s  (target <= 2 s)")
        print(f"  (other CPU during the manifest section: {man['foreign_cpu_pct']:.0f}%)")
    print(f"\ntotal {total:.0f}s (produce {sum(produce_s.values()):.0f}s); load average at start "
          f"{load_start[0]:.1f}, at end {load_end[0]:.1f} (1 min)")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "records": n, "partitions": PARTITIONS,
        "flush_size": a.flush_size, "cpus": os.cpu_count(), "master": "local[2]",
        "value_bytes": value_bytes, "bare_read_s": {t: round(v, 2) for t, v in bare.items()},
        "rows": results, "manifest": man, "ceiling_s": {t: round(v, 2) for t, v in ceiling.items()},
        "worker_rss": rss, "total_s": round(total),
        "floor_json_with_headers_s": hdr_floor[0] if hdr_floor else None,
        "keys_headers": kh_rows,
        "loadavg_start": load_start[0], "loadavg_end": load_end[0],
    }, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
