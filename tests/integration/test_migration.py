"""Migrating from another connector (issue #31 item 4), on the local engine (no Spark: nothing here is engine
specific; the sink's engines are covered elsewhere): the translated job starts where the old connector's Kafka
Connect group stopped (`manifest handover`), and `manifest import` adopts objects in the old connectors' own
naming, built here from their specs (Aiven's README, DeviantArt's block-gzip README, Zooz's README), so
`read_archive`, `restore` and `gaps` cover the history."""
from __future__ import annotations

import json
import uuid

from support.archive_checks import archived_values, check_chains, manifest_rows, produce, run_cli

from lakesink.config import load_config


def _translate(tmp_path, old: dict, extra: dict) -> tuple[str, str]:
    """``lakesink check --translate`` of the old connector's Connect JSON, plus the keys a user adds (the
    bootstrap servers, the withheld secrets); returns (the translated .properties path, the translation text)."""
    src = tmp_path / "old.json"
    src.write_text(json.dumps(old))
    rc, out = run_cli(["check", "--translate", str(src)], timeout=60)
    assert rc == 0, out[-3000:]
    dst = tmp_path / "lakesink.properties"
    dst.write_text(out + "".join(f"{k}={v}\n" for k, v in extra.items()))
    return str(dst), out


def _group_commit(kafka, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for ``group`` as a Kafka Connect sink task does (a plain offset commit)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def test_handover_starts_the_translated_job_at_the_connect_group(kafka, s3, tmp_path):
    topic = f"handover_{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=2)
    bucket = s3.create_bucket(f"handover-{uuid.uuid4().hex[:8]}")
    sent = produce(kafka, topic, [json.dumps({"i": i}).encode() for i in range(30)], partition_of=lambda i: i % 2)
    assert [len(sent[p]) for p in (0, 1)] == [15, 15]
    name = f"old-{uuid.uuid4().hex[:6]}"
    _group_commit(kafka, f"connect-{name}", {(topic, 0): 10, (topic, 1): 4})
    old = {"name": name, "config": {
        "connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector", "topics": topic,
        "aws.s3.bucket.name": bucket, "aws.s3.endpoint": s3.endpoint_url, "aws.s3.region": "us-east-1",
        "aws.access.key.id": "testing", "aws.secret.access.key": "testing", "format.output.type": "jsonl",
        "file.max.records": "4", "file.compression.type": "none", "tasks.max": "2"}}
    path, text = _translate(tmp_path, old, {"kafka.bootstrap.servers": kafka.bootstrap_servers,
                                            "aws.access.key.id": "testing", "aws.secret.access.key": "testing",
                                            "manifest.engine": "delta-rs"})
    assert f"--from-group connect-{name}" in text and "flush.size=4 carried over from file.max.records" in text

    rc, out = run_cli(["--format", "json", "manifest", "handover", "--config", path, "--from-group",
                       f"connect-{name}"], timeout=120)
    assert rc == 0, out[-3000:]
    doc = json.loads(out.strip().splitlines()[-1])
    assert [(a["partition"], a["range_start"], a["range_end"]) for a in doc["advanced"]] == [(0, 0, 9), (1, 0, 3)]
    rc, out = run_cli(["sink", "--config", path, "--once", "--flush-tail", "--engine", "local"], timeout=240)
    assert rc == 0, out[-3000:]

    cfg = load_config(path)
    rows = manifest_rows(None, cfg)
    assert check_chains(rows) == {(topic, 0): 15, (topic, 1): 15}
    firsts = {p: min(r.first_offset for r in rows if r.kind == "object" and r.kafka_partition == p) for p in (0, 1)}
    assert firsts == {0: 10, 1: 4}  # exactly at the group's offsets: nothing the old connector had is archived again
    values = archived_values(None, cfg)
    assert values[(topic, 0)] == [json.loads(v) for _o, _k, v in sent[0][10:]]
    assert values[(topic, 1)] == [json.loads(v) for _o, _k, v in sent[1][4:]]

    rc, out = run_cli(["--format", "json", "sql", "--engine", "duckdb", "--config", path,
                       "SELECT kafka_partition, start_offset, end_offset, kind, reason FROM gaps "
                       "ORDER BY kafka_partition"], timeout=120)
    assert rc == 0, out[-3000:]
    gaps = json.loads(out.strip().splitlines()[-1])["rows"]
    assert [(g["kafka_partition"], g["start_offset"], g["end_offset"], g["kind"]) for g in gaps] == \
        [(0, 0, 9, "advance"), (1, 0, 3, "advance")]
    assert all(f"Kafka Connect consumer group connect-{name}" in g["reason"] and "handed over" in g["reason"]
               for g in gaps)

    # run again: the manifest already starts there, nothing is committed twice
    rc, out = run_cli(["manifest", "handover", "--config", path, "--from-group", f"connect-{name}"], timeout=120)
    assert rc == 0 and "0 partition(s) advanced" in out and f"left as it is: {topic}-0" in out, out[-3000:]
