"""Concurrency (issue #14 item 7): three runs of one job started together, repeated; and a zombie executor.

* Three separate processes (``race_job.py``), each running the real ``lakesink sink --once --flush-tail`` command
  in-process with a warm Spark session, are released together round after round (new records each round): in
  every round exactly one run commits the batch, the other two exit 4 (fenced) with one ``lakesink: error:`` line
  that says another run committed and this one committed nothing; over all rounds every offset is archived once
  and every batch id has exactly one run. The first round also races the manifest table's creation.
* A zombie executor -- a task of a run that was fenced, still uploading after another run committed the batch --
  never replaces a committed object: its uploads meet the committed keys (conditional create: HTTP 412) and stay
  staged, invisible; the manifest and the stored bytes are unchanged.
"""
from __future__ import annotations

import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from support.archive_checks import (base_config, check_exactly_once, json_payloads, manifest_rows, produce, run_cli,
                                    write_config)

from lakesink.wiring import task_parts
from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.errors import EXIT_FENCED
from lakesink.store import open_store

HERE = Path(__file__).parent
RUNS = ("a", "b", "c")
ROUNDS = 3
FENCED_LINE = re.compile(r"^lakesink: error: .*(nothing was committed|committed nothing)")


def _wait_for(paths: list[Path], timeout: float, procs) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        dead = [f for f in procs if f.done()]
        assert not dead, f"a racing run exited early: {dead[0].result()}"
        assert time.monotonic() < deadline, f"not there after {timeout:.0f}s: {[p.name for p in paths if not p.exists()]}"
        time.sleep(0.05)


def test_three_runs_started_together_commit_each_batch_once(spark, kafka, s3, bucket, topic_name, tmp_path):
    kafka.create_topic(topic_name, partitions=2)
    cfg_dict = base_config(kafka, s3, bucket, topic_name, **{"flush.size": "5"})
    cfg_file = write_config(tmp_path, cfg_dict)
    d = tmp_path / "race"
    d.mkdir()
    pool = ThreadPoolExecutor(max_workers=len(RUNS))
    procs = [pool.submit(run_cli, [str(d), cfg_file, name], None, 600, tmp_path / f"run-{name}.log",
                         None, [sys.executable, str(HERE / "race_job.py")]) for name in RUNS]
    sent: dict[int, list] = {0: [], 1: []}
    try:
        _wait_for([d / f"ready-{n}" for n in RUNS], 300, procs)
        for k in range(ROUNDS):
            new = produce(kafka, topic_name, json_payloads(20, start=20 * k), partition_of=lambda i: i % 2)
            for p, recs in new.items():
                sent[p] += recs
            (d / f"go-{k}").touch()  # all three start the same command at once
            _wait_for([d / f"result-{k}-{n}.json" for n in RUNS], 240, procs)
            res = {n: json.loads((d / f"result-{k}-{n}.json").read_text()) for n in RUNS}
            won = [n for n, r in res.items() if r["rc"] == 0]
            lost = [n for n, r in res.items() if r["rc"] != 0]
            assert len(won) == 1, f"round {k}: {res}"
            assert f"batch {k}: 4 objects, 20 records" in res[won[0]]["out"], res[won[0]]
            for n in lost:
                r = res[n]
                assert r["rc"] == EXIT_FENCED, f"round {k}, run {n}: exit {r['rc']}: {r['err']}"
                lines = r["err"].strip().splitlines()
                assert len(lines) == 1 and FENCED_LINE.match(lines[0]), f"round {k}, run {n}: {r['err']!r}"
                assert f"job {cfg_dict['name']!r}" in lines[0] or cfg_dict["name"] in lines[0], lines[0]
                assert "another run" in lines[0], lines[0]
    finally:
        (d / "stop").touch()
        outs = [f.result(timeout=120) for f in procs]
        pool.shutdown()
    assert all(rc == 0 for rc, _out in outs), outs
    cfg = SinkConfig.from_dict(cfg_dict)
    rows = manifest_rows(spark, cfg)
    runs_per_batch: dict[int, set] = {}
    for r in rows:
        runs_per_batch.setdefault(r.batch_id, set()).add(r.run_id)
    assert sorted(runs_per_batch) == list(range(ROUNDS)), sorted(runs_per_batch)
    assert all(len(v) == 1 for v in runs_per_batch.values()), runs_per_batch
    check_exactly_once(spark, cfg, sent, "json")


def test_zombie_executor_writing_after_its_batch_was_fenced_replaces_nothing(spark, kafka, s3, bucket, topic_name):
    """The zombie runs the executor code itself (``archive_partitions`` over a librdkafka read of the stale plan's
    ranges), as a task of the fenced run would, with other bytes for the same keys (another gzip level)."""
    from lakesink.driver.kafka_admin import KafkaMetadata
    from lakesink.executor.archiver import ArchivedRow, BatchContext
    from lakesink.executor.kafka_reader import consumer_config, read_range
    from lakesink.executor.task import archive_partitions, decode_result
    from lakesink.store import PendingWrite

    kafka.create_topic(topic_name, partitions=2)
    sent = produce(kafka, topic_name, json_payloads(20), partition_of=lambda i: i % 2)
    over = {"flush.size": "5", "s3.compression.type": "gzip"}
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **over, **{"s3.compression.level": "1"}))
    zombie_cfg = SinkConfig.from_dict({**cfg.as_dict(redact=False), "s3.compression.level": "9"})

    # the zombie's run planned batch 0 ...
    snap = KafkaMetadata(cfg.kafka_options).snapshot([topic_name])
    plans = {(t, p): (0, b.latest) for (t, p), b in snap.bounds.items()}
    ctx = BatchContext(job=cfg.name, run_id="run-zombie", batch_id=0, cluster_id=snap.cluster_id,
                       topic_ids=snap.topic_ids, flush_tail=True)
    # ... and was fenced: another run committed batch 0 meanwhile
    SinkJob(spark, cfg, run_id="run-winner").run_batch(flush_tail=True)
    store = open_store(wiring.store_settings(cfg))
    committed = {r.object_key: r.etag for r in manifest_rows(spark, cfg) if r.kind == "object"}
    stored = {k: s3.client().get_object(Bucket=bucket, Key=k)["Body"].read() for k in committed}
    assert len(committed) == 4

    # the zombie's tasks still run: read their ranges and upload what they archive
    conf = consumer_config(zombie_cfg.kafka_options, "lakesink-zombie")
    results = []
    for (t, p), (start, end) in sorted(plans.items()):
        batches = read_range(conf, t, p, start, end, ts_type=zombie_cfg.store_kafka_metadata)
        results += [decode_result(r) for b in archive_partitions(batches, task_parts(zombie_cfg), ctx, {(t, p): (start, end)})
                    for r in b.column(0).to_pylist()]
    rows = [r for r in results if isinstance(r, ArchivedRow)]
    assert len(rows) == 4, results
    pendings = [pw for r in rows for pw in r.pending]
    # every upload met a committed object and stayed staged (a multipart upload nobody completes)
    assert {pw.key for pw in pendings} >= set(committed), (sorted(committed), [pw.key for pw in pendings])
    assert all(isinstance(pw, PendingWrite) and not pw.same_content for pw in pendings
               if pw.key in committed), "the zombie's bytes were expected to differ (another gzip level)"
    for key, etag in committed.items():
        head = store.head(key)
        assert head is not None and head.etag == etag, f"{key} was replaced by the zombie"
        assert s3.client().get_object(Bucket=bucket, Key=key)["Body"].read() == stored[key]
    assert {r.object_key: r.etag for r in manifest_rows(spark, cfg) if r.kind == "object"} == committed
    assert {r.run_id for r in manifest_rows(spark, cfg)} == {"run-winner"}
    check_exactly_once(spark, cfg, sent, "json")
    # what the zombie leaves is open uploads only: vacuum's to abort (done here directly)
    uploads = list(store.list_uploads(cfg.topics_dir + "/"))
    assert {k for k, _u, _t in uploads} == {pw.key for pw in pendings}, uploads
    for key, upload_id, _t in uploads:
        store.abort_upload(key, upload_id)
    assert not list(store.list_uploads(cfg.topics_dir + "/"))
