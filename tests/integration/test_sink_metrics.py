"""Progress and metrics of real sink batches (broker, S3 endpoint, Spark, Delta): `lakesink sink` prints progress
lines on stderr and one JSON document per batch, every committed batch appends a row to the metrics table next to
the manifest, and `lakesink sql` queries it as the view `metrics`."""
from __future__ import annotations

import json

from support.archive_checks import base_config, json_payloads, produce, write_config

from lakesink.cli.main import main
from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.manifest.metrics import metrics_location


def test_sink_progress_and_metrics_rows_queried_by_sql(spark, kafka, s3, bucket, topic_name, tmp_path, capsys):
    kafka.create_topic(topic_name, partitions=2)
    produce(kafka, topic_name, json_payloads(30), partition_of=lambda i: i % 2, headers=False)
    raw = base_config(kafka, s3, bucket, topic_name, **{"flush.size": "5"})
    cfg = SinkConfig.from_dict(raw)
    f = write_config(tmp_path, raw)

    # batch 0: the CLI in process (the session's Spark), plain progress lines at every poll
    assert main(["--format", "json", "sink", "--config", f, "--once", "--flush-tail", "--progress", "lines",
                 "--progress-every", "0s"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out.splitlines()[-1])
    assert (doc["batch_id"], doc["partitions"], doc["records_read"], doc["records"], doc["objects"]) == \
        (0, 2, 30, 30, 6), doc
    assert doc["metrics_warning"] is None
    lines = [ln for ln in out.err.splitlines() if ln.startswith("batch 0: ")]
    assert lines and all("/2 partitions" in ln and "/30 records" in ln for ln in lines), out.err  # of the plan's
    assert "aws" not in out.err.lower() and "testing" not in out.err  # no credentials in what it prints

    # batch 1: the API with a listener; the last report is the batch's own numbers
    produce(kafka, topic_name, json_payloads(10, start=30), partition_of=lambda i: 0, headers=False)
    job = SinkJob(spark, cfg)
    seen = []
    job.on_progress = seen.append
    res = job.run_batch(flush_tail=True)
    last = seen[-1]
    assert last.done and (last.batch_id, last.partitions_total, last.partitions_done) == (1, 1, 1)
    assert all(p.records_total == 10 for p in seen)  # the plan's records, from the first report on
    assert (last.records_read, last.records, last.bytes, last.objects) == (10, res.records, res.bytes, res.objects)
    assert all(a.records <= b.records for a, b in zip(seen, seen[1:]))

    # batch 2: the CLI in process with --engine local: local worker processes run the tasks beside the session;
    # their counts reach the progress lines when each task completes
    produce(kafka, topic_name, json_payloads(12, start=40), partition_of=lambda i: i % 2, headers=False)
    assert main(["--format", "json", "sink", "--config", f, "--once", "--flush-tail", "--progress", "lines",
                 "--progress-every", "0s", "--engine", "local", "--master", "local[2]"]) == 0
    out = capsys.readouterr()
    local = json.loads(out.out.splitlines()[-1])
    assert (local["batch_id"], local["partitions"], local["records_read"], local["records"]) == (2, 2, 12, 12), local
    assert "session" not in local["seconds"]
    lines = [ln for ln in out.err.splitlines() if ln.startswith("batch 2: ")]
    assert lines and all("/2 partitions" in ln for ln in lines), out.err
    assert "2/2 partitions" in lines[-1] and "12/12 records" in lines[-1] and "done" in lines[-1], lines[-1]

    # lakesink sql: the metrics view
    assert metrics_location(cfg) == f"s3a://{bucket}/_lakesink/manifest_metrics"
    assert main(["--format", "json", "sql", "--config", f, "SELECT job, batch_id, partitions, records_read, records, "
                 "objects, bytes, seconds_archive > 0 AS timed FROM metrics ORDER BY batch_id"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows == [
        {"job": cfg.name, "batch_id": 0, "partitions": 2, "records_read": 30, "records": 30, "objects": 6,
         "bytes": doc["bytes"], "timed": True},
        {"job": cfg.name, "batch_id": 1, "partitions": 1, "records_read": 10, "records": 10, "objects": res.objects,
         "bytes": res.bytes, "timed": True},
        {"job": cfg.name, "batch_id": 2, "partitions": 2, "records_read": 12, "records": 12,
         "objects": local["objects"], "bytes": local["bytes"], "timed": True}]
