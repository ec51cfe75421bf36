"""The sink on a Spark standalone cluster (master + 2 worker JVMs), driven from separate processes.

Executors upload the objects; each run's driver is a fresh process that knows nothing but the config,
so the second run can only resume from the Delta manifest on s3a:// — no driver-local state.
"""
from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import fastavro
from support.archive_checks import archived_values, base_config, check_chains, manifest_rows, produce

from lakesink.config import load_config

SCHEMA = {"type": "record", "name": "Click", "namespace": "demo",
          "fields": [{"name": "id", "type": "long"}, {"name": "page", "type": "string"}]}
HOUR = 3_600_000
# an hour boundary some hours back: never a fixed date, whose records the broker's 7-day retention deletes once it
# is a week old (from 2026-11-25 this test failed with "offset out of range" as the broker deleted them mid-test),
# and not ahead of now (a broker refuses timestamps too far in the future)
T0 = (int(time.time() * 1000) - 6 * HOUR) // HOUR * HOUR


def _avro(i: int) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(SCHEMA), {"id": i, "page": f"/p/{i % 5}"})
    return buf.getvalue()


def _run_sink(cfg_file, master) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakesink.cli", "sink", "--config", str(cfg_file),
                           "--master", master, "--flush-tail"],
                          capture_output=True, text=True, timeout=420)


def test_sink_on_standalone_cluster_resumes_from_the_manifest(spark_cluster, spark, kafka, s3, bucket, topic_name,
                                                               tmp_path):
    kafka.create_topic(topic_name, partitions=2)
    n = 60
    # record timestamps span two hours: TimeBased(Record) puts them in two hourly directories
    ts = [T0 + (i * 2 * HOUR) // n for i in range(n)]
    sent = produce(kafka, topic_name, [_avro(i) for i in range(n)], partition_of=lambda i: i % 2, timestamps=ts)
    raw = base_config(kafka, s3, bucket, topic_name, **{
        "format.class": "io.confluent.connect.s3.format.avro.AvroFormat", "avro.codec": "deflate",
        "value.schema": json.dumps(SCHEMA), "flush.size": "7",
        "partitioner.class": "io.confluent.connect.storage.partitioner.HourlyPartitioner",
        "locale": "en", "timezone": "UTC", "timestamp.extractor": "Record"})
    cfg_file = tmp_path / "sink.json"
    cfg_file.write_text(json.dumps({"name": raw.pop("name"), "config": raw}))

    first = _run_sink(cfg_file, spark_cluster.master_url)
    assert first.returncode == 0, first.stderr[-3000:]
    # second driver process: more data, resume purely from the manifest
    sent2 = produce(kafka, topic_name, [_avro(i) for i in range(n, n + 10)], partition_of=lambda i: i % 2,
                    timestamps=[T0 + 2 * HOUR + i for i in range(10)])
    second = _run_sink(cfg_file, spark_cluster.master_url)
    assert second.returncode == 0, second.stderr[-3000:]

    cfg = load_config(cfg_file)
    rows = manifest_rows(spark, cfg)
    check_chains(rows, {(topic_name, p): len(sent[p]) + len(sent2[p]) for p in range(2)})
    assert {r.batch_id for r in rows} == {0, 1} and len({r.run_id for r in rows}) == 2
    hours = {r.encoded_partition for r in rows if r.kind == "object"}
    assert len(hours) == 3 and all(h.startswith("year=") and "/hour=" in h for h in hours)
    vals = archived_values(spark, cfg)
    for p in range(2):
        got = sorted(v["id"] for v in vals[(topic_name, p)])
        assert got == sorted(i for i in range(n + 10) if i % 2 == p)
    # objects were uploaded by the executors straight to the S3 endpoint
    listed = {o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket, Prefix="topics/")["Contents"]}
    assert {r.object_key for r in rows if r.kind == "object"} <= listed
