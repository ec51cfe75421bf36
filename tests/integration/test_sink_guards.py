"""Resume guards: the sink refuses to continue when the manifest's offsets no longer describe the
Kafka data (recreated topic, other cluster, data lost to retention) and fails cleanly, committing
nothing, when the object store is unusable; after the fix, everything is archived exactly once."""
from __future__ import annotations

import dataclasses
import time

import pytest
from support.archive_checks import (archived_values, base_config, check_chains, check_exactly_once, expected_values,
                                    json_payloads, manifest_rows, produce)

from lakesink.config import SinkConfig
from lakesink.manifest import Manifest, advance_row
from lakesink.driver.sink import SinkJob
from lakesink.errors import BatchFailedError, DataLossError, ManifestError, ResumeGuardError


def _cfg(kafka, s3, bucket, topic, **over) -> SinkConfig:
    return SinkConfig.from_dict(base_config(kafka, s3, bucket, topic, **{"flush.size": "5", **over}))


def _recreate(kafka, topic: str, partitions: int = 1, timeout: float = 60.0) -> None:
    admin = kafka.admin()
    for f in admin.delete_topics([topic], operation_timeout=30).values():
        f.result(30)
    deadline = time.monotonic() + timeout
    while True:  # deletion is asynchronous: retry the create until the old topic is gone
        try:
            kafka.create_topic(topic, partitions=partitions)
            return
        except Exception:  # noqa: BLE001 - TopicExistsException / marked for deletion
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_recreated_topic_is_refused(spark, kafka, s3, bucket, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(10))
    cfg = _cfg(kafka, s3, bucket, topic_name)
    SinkJob(spark, cfg).run_batch()
    before = manifest_rows(spark, cfg)
    check_chains(before, {(topic_name, 0): 10})

    _recreate(kafka, topic_name)
    produce(kafka, topic_name, json_payloads(12))  # more records than before: offsets look plausible
    with pytest.raises(ResumeGuardError, match=rf"topic '{topic_name}' was deleted and recreated \(topic id"):
        SinkJob(spark, cfg).run_batch()
    assert len(manifest_rows(spark, cfg)) == len(before)


def test_retention_loss_fails_or_is_skipped_and_recorded(spark, kafka, s3, bucket, topic_name):
    from confluent_kafka import TopicPartition

    kafka.create_topic(topic_name, partitions=1)
    sent = produce(kafka, topic_name, json_payloads(10))
    cfg = _cfg(kafka, s3, bucket, topic_name)
    SinkJob(spark, cfg).run_batch()  # archives [0, 9]
    sent2 = produce(kafka, topic_name, json_payloads(10, 10))  # offsets 10..19
    # retention deletes 10..14 before they were archived: the log now starts at 15
    admin = kafka.admin()  # keep the client alive until its futures complete
    for f in admin.delete_records([TopicPartition(topic_name, 0, 15)], request_timeout=30).values():
        assert f.result(60).low_watermark == 15

    with pytest.raises(DataLossError, match=rf"{topic_name}-0 offsets \[10, 14\] were deleted by Kafka retention"):
        SinkJob(spark, cfg).run_batch()
    assert len(manifest_rows(spark, cfg)) == 2  # nothing committed

    skip = _cfg(kafka, s3, bucket, topic_name, **{"offsets.on.data.loss": "skip"})
    res = SinkJob(spark, skip).run_batch()
    assert res.batch_id == 1
    rows = manifest_rows(spark, cfg)
    skipped = [r for r in rows if r.kind == "skipped"]
    assert [(r.range_start, r.range_end, r.record_count, r.batch_id) for r in skipped] == [(10, 14, 0, 1)]
    assert "retention" in skipped[0].note
    check_chains(rows, {(topic_name, 0): 20})  # the skipped range is part of the chain: no gap, no overlap
    # through the manifest: 0..9 and 15..19 are archived once; 10..14 are accounted for by the skipped row
    objects = sorted((r for r in rows if r.kind == "object"), key=lambda r: r.first_offset)
    assert [(r.first_offset, r.last_offset) for r in objects] == [(0, 4), (5, 9), (15, 19)]
    want = expected_values({0: sent[0] + sent2[0][5:]}, "json")[0]
    assert archived_values(spark, cfg)[(topic_name, 0)] == want


def test_store_unusable_fails_cleanly_then_archives_exactly_once(spark, kafka, s3, bucket, topic_name):
    """Unreachable endpoint, then a missing bucket: each batch fails naming the cause and commits
    nothing; once the bucket exists the next run archives everything exactly once."""
    import socket

    kafka.create_topic(topic_name, partitions=2)
    sent = produce(kafka, topic_name, json_payloads(20), partition_of=lambda i: i % 2)
    archive_bucket = f"{bucket}-archive"  # the manifest stays in `bucket`, objects go to archive_bucket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    unreachable = _cfg(kafka, s3, bucket, topic_name, **{
        "s3.bucket.name": archive_bucket, "store.url": f"http://127.0.0.1:{dead_port}",
        "s3.part.retries": "0"})
    # the s3a:// manifest uses the store's endpoint too: the run stops at the manifest, naming it and the cause
    with pytest.raises(ManifestError, match=rf"cannot read manifest s3a://{bucket}/.*Connection refused"):
        SinkJob(spark, unreachable).run_batch()
    # the Spark engine reaches the manifest through the session's S3A settings: the upload fails instead
    with pytest.raises(BatchFailedError, match=rf"s3://{archive_bucket}/topics/{topic_name}/.*(Could not connect|connect)"):
        SinkJob(spark, dataclasses.replace(unreachable, manifest_engine="spark")).run_batch()
    # read back through the session's (working) S3A settings: the job's own endpoint is the dead one
    assert manifest_rows(spark, dataclasses.replace(unreachable, manifest_engine="spark")) == []

    cfg = _cfg(kafka, s3, bucket, topic_name, **{"s3.bucket.name": archive_bucket})
    assert cfg.name == unreachable.name
    with pytest.raises(BatchFailedError, match=r"NoSuchBucket.*the bucket does not exist: check s3.bucket.name"):
        SinkJob(spark, cfg).run_batch()
    assert manifest_rows(spark, cfg) == []
    assert Manifest(spark, cfg.manifest_location).snapshot(cfg.name).next_batch_id == 0

    s3.create_bucket(archive_bucket)
    res = SinkJob(spark, cfg).run_batch(flush_tail=True)
    assert res.batch_id == 0 and res.records == 20
    check_exactly_once(spark, cfg, sent, "json")


def test_other_kafka_cluster_is_refused(spark, kafka, s3, bucket, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(12))
    cfg = _cfg(kafka, s3, bucket, topic_name)
    SinkJob(spark, cfg).run_batch()  # archives [0, 9]; 10, 11 stay in the open tail
    manifest = Manifest(spark, cfg.manifest_location)
    snap = manifest.snapshot(cfg.name)
    assert snap.partitions[(topic_name, 0)].next_offset == 10
    # a batch written from another cluster (e.g. the manifest was copied, or the job re-pointed)
    manifest.commit(cfg.name, snap.next_batch_id, "run-elsewhere", [advance_row(
        topic_name, 0, 10, 10, "written elsewhere", kafka_cluster_id="other-cluster-id",
        topic_id=snap.partitions[(topic_name, 0)].topic_id)])
    n = len(manifest_rows(spark, cfg))
    with pytest.raises(ResumeGuardError, match=r"written from Kafka cluster other-cluster-id.*refusing to resume"):
        SinkJob(spark, cfg).run_batch(flush_tail=True)
    assert len(manifest_rows(spark, cfg)) == n
