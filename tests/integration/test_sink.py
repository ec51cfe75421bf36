"""The sink job end to end: real Kafka → objects on the S3 endpoint → Delta manifest on s3a://."""
from __future__ import annotations

import json

import pytest
from support.archive_checks import archived_values, base_config, check_chains, manifest_rows, produce

from lakesink.config import SinkConfig
from lakesink.objects.formats.base import RecordView
from lakesink.driver.sink import SinkJob
from lakesink.errors import BatchFailedError


def _values(n, start=0):
    return [json.dumps({"id": i, "pad": "x" * 50}).encode() for i in range(start, start + n)]


def test_json_default_partitioner_exactly_once_with_keys_and_headers(spark, kafka, s3, bucket, topic_name):
    kafka.create_topic(topic_name, partitions=3)
    sent = produce(kafka, topic_name, _values(95), partition_of=lambda i: i % 3)  # 32/32/31 per partition
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "store.kafka.keys": "true", "store.kafka.headers": "true", "keys.format.class": "json", "key.decoder": "string",
        "headers.format.class": "json"}))
    job = SinkJob(spark, cfg)
    res = job.run_batch()
    assert res.batch_id == 0
    # flush.size=10: 30 records per partition are committed; the tails (2, 2, 1) stay open, uncommitted
    nxt = check_chains(manifest_rows(spark, cfg), {(topic_name, p): 30 for p in range(3)})
    keys = sorted(r.object_key for r in manifest_rows(spark, cfg))
    assert keys[:3] == [f"topics/{topic_name}/partition=0/{topic_name}+0+{o:010d}.json" for o in (0, 10, 20)]
    vals = archived_values(spark, cfg)
    for p in range(3):
        assert vals[(topic_name, p)] == [json.loads(v) for _o, _k, v in sent[p][:30]]
    assert archived_values(spark, cfg, RecordView.KEYS)[(topic_name, 0)][:2] == ["k0", "k3"]
    assert archived_values(spark, cfg, RecordView.HEADERS)[(topic_name, 1)][0] == [("i", "1")]
    first = min((r for r in manifest_rows(spark, cfg) if r.kafka_partition == 1), key=lambda r: r.first_offset)
    assert first.headers_key == first.object_key[: -len(".json")] + ".headers.json"
    raw = s3.client().get_object(Bucket=bucket, Key=first.headers_key)["Body"].read()
    assert raw.split(b"\n")[0] == b'{"headers":[{"key":"i","value":"1"}]}'

    # nothing new: a second batch commits nothing and duplicates nothing
    res2 = SinkJob(spark, cfg).run_batch()
    assert res2.committed_rows == 0
    assert len(manifest_rows(spark, cfg)) == 9

    # more data, then --flush-tail: everything archived exactly once, in order
    sent2 = produce(kafka, topic_name, _values(30, 95), partition_of=lambda i: i % 3)
    SinkJob(spark, cfg).run_batch(flush_tail=True)
    rows = manifest_rows(spark, cfg)
    ends = {(topic_name, p): len(sent[p]) + len(sent2[p]) for p in range(3)}
    check_chains(rows, ends)
    vals = archived_values(spark, cfg)
    for p in range(3):
        assert vals[(topic_name, p)] == [json.loads(v) for _o, _k, v in sent[p] + sent2[p]]
    assert len({r.batch_id for r in rows}) == 2 and nxt


def test_tombstones_ignored_still_advance_offsets(spark, kafka, s3, bucket, topic_name):
    from confluent_kafka import Producer

    kafka.create_topic(topic_name, partitions=1)
    p = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for i in range(5):
        p.produce(topic_name, key=b"k", value=json.dumps({"i": i}).encode(), partition=0)
    for _ in range(4):
        p.produce(topic_name, key=b"k", value=None, partition=0)
    p.flush(30)
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "flush.size": "5", "behavior.on.null.values": "ignore"}))
    SinkJob(spark, cfg).run_batch()
    rows = manifest_rows(spark, cfg)
    check_chains(rows, {(topic_name, 0): 9})
    assert sorted(r.kind for r in rows) == ["advance", "object"]


def test_bad_record_fails_the_batch_and_commits_nothing(spark, kafka, s3, bucket, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, [b'{"ok": 1}', b"not json", b'{"ok": 2}'])
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{"flush.size": "1"}))
    with pytest.raises(BatchFailedError, match=rf"nothing was committed: DecodeError: record {topic_name}-0@1"):
        SinkJob(spark, cfg).run_batch()
    assert manifest_rows(spark, cfg) == []


def test_missing_topic_and_unreachable_broker_are_clear_errors(spark, kafka, s3, bucket, topic_name):
    from lakesink.errors import KafkaMetadataError

    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name))
    with pytest.raises(KafkaMetadataError, match=rf"topic\(s\) {topic_name} do not exist"):
        SinkJob(spark, cfg).run_batch()
