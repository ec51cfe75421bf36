"""A restore is exactly once whatever its spelling (issue #26 item 0): real Kafka, moto S3, Spark.

Progress is keyed by what is restored where (source offsets in a destination partition), so `--to-topic X`
followed by `--topic-map '(.*)=X'`, an equivalent `--where`, a time window inside an earlier restore, or an
overlapping selection never puts a record into the destination twice; a `--where` that chose part of the objects
whose offsets interleave makes a later overlapping restore refuse, naming the earlier one, unless `--again`.
"""
from __future__ import annotations

import datetime as dt
import uuid

import pytest
from support.archive_checks import base_config, consume, run_cli, write_config

import lakesink
from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.errors import RestoreRefusedError

N = 14  # 7 per partition; flush.size 3: objects [0-2] [3-5] [6] per partition


def produce(kafka, topic: str, now_ms: int) -> dict[int, list[tuple]]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": True})
    want: dict[int, list[tuple]] = {0: [], 1: []}
    for i in range(N):
        value = b'{"id":%d,"kind":"%s"}' % (i, b"ab"[i % 3 % 2:][:1])
        ts = now_ms - 3_600_000 + 60_000 * i
        p.produce(topic, value=value, key=b"k%d" % i, partition=i % 2, timestamp=ts)
        want[i % 2].append((b"k%d" % i, value, ts))
    assert p.flush(60) == 0
    return want


def archived(spark, kafka, s3, prefix: str, **over: str) -> tuple[SinkConfig, str, dict[int, list[tuple]]]:
    """A JSON job over a new two-partition topic of N records, sunk once: (config, topic, records per partition)."""
    bucket = s3.create_bucket(f"{prefix.replace('_', '-')}-{uuid.uuid4().hex[:10]}")
    topic = f"{prefix}_{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, partitions=2)
    want = produce(kafka, topic, int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000))
    raw = base_config(kafka, s3, bucket, topic)
    raw.update({"format.class": "json", "flush.size": "3", "store.kafka.keys": "true",
                "manifest.location": f"s3a://{bucket}/_lakesink/manifest", **over})
    cfg = SinkConfig.from_dict(raw)
    assert SinkJob(spark, cfg).run_batch(flush_tail=True).records == N
    return cfg, topic, want


@pytest.fixture(scope="module")
def job(spark, kafka, s3):
    return archived(spark, kafka, s3, "s3_topic")


def copy_holds(kafka, copy: str, want: dict[int, list[tuple]]) -> None:
    for part, records in want.items():
        got = [(k, v, ts) for k, v, _h, ts, _t in consume(kafka, copy, part)]
        assert sorted(got) == sorted(records) and len(got) == len(records), part


def test_a_respelled_restore_produces_nothing_more(spark, kafka, job, tmp_path):
    cfg, topic, want = job
    copy = f"copy_of_{topic}"
    kafka.create_topic(copy, partitions=2)
    first = lakesink.restore(spark, cfg, to_topic=copy)
    assert first.produced == N
    path = write_config(tmp_path, cfg.as_dict(redact=False))
    rc, out = run_cli(["restore", "--config", path, "--topic-map", r"(.*)=copy_of_\1", "--master", "local[1]"])
    assert rc == 0, out[-3000:]
    assert f"0 record(s) produced, {N} already restored" in out, out[-3000:]
    same = lakesink.restore(spark, cfg, f"topic = '{topic}'", to_topic=copy)
    assert (same.produced, same.skipped) == (0, N)
    copy_holds(kafka, copy, want)


def test_an_overlapping_where_and_a_time_window_produce_only_what_is_missing(spark, kafka, job):
    cfg, topic, want = job
    copy = f"overlap_{uuid.uuid4().hex[:6]}"
    kafka.create_topic(copy, partitions=2)
    part0 = lakesink.restore(spark, cfg, "kafka_partition = 0 AND first_offset <= 2", to_topic=copy)
    assert part0.produced == 3
    overlapping = lakesink.restore(spark, cfg, "first_offset <= 3", to_topic=copy)  # [0-2] [3-5] of both partitions
    assert (overlapping.produced, overlapping.skipped) == (9, 3)
    window = want[1][1][2], want[1][2][2]  # inside what was restored: nothing more
    inside = lakesink.restore(spark, cfg, to_topic=copy, from_time=window[0], to_time=window[1])
    assert (inside.produced, inside.skipped) == (0, 3)  # partition 1 offsets 1-2, partition 0 offset 2
    rest = lakesink.restore(spark, cfg, to_topic=copy)
    assert (rest.produced, rest.skipped) == (2, N - 2)
    copy_holds(kafka, copy, want)


def test_a_where_that_chose_part_of_interleaved_objects_refuses_a_later_overlap(spark, kafka, s3, tmp_path):
    """FieldPartitioner objects of one commit group interleave in offsets: after a restore of one field value,
    a restore of everything cannot tell which records are there, so it refuses (naming the group) until --again;
    a restore of everything elsewhere keeps the source order."""
    cfg, _topic, want = archived(spark, kafka, s3, "field", **{
        "flush.size": "100", "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
        "partition.field.name": "kind"})
    ordered = f"ordered_{uuid.uuid4().hex[:6]}"
    kafka.create_topic(ordered, partitions=2)
    assert lakesink.restore(spark, cfg, to_topic=ordered).produced == N
    for part, records in want.items():  # merged across the interleaved objects: the source order
        assert [(k, v, ts) for k, v, _h, ts, _t in consume(kafka, ordered, part)] == records
    copy = f"part_{uuid.uuid4().hex[:6]}"
    kafka.create_topic(copy, partitions=2)
    some = lakesink.restore(spark, cfg, "encoded_partition = 'kind=a'", to_topic=copy)
    n_a = sum(1 for recs in want.values() for _k, v, _t in recs if b'"kind":"a"' in v)
    assert some.produced == n_a
    with pytest.raises(RestoreRefusedError, match=r"may already be in .* group 'lakesink-restore'.*--again"):
        lakesink.restore(spark, cfg, to_topic=copy)
    assert sum(len(consume(kafka, copy, p)) for p in (0, 1)) == n_a
    dup = lakesink.restore(spark, cfg, to_topic=copy, again=True)
    assert dup.produced == N and sum(len(consume(kafka, copy, p)) for p in (0, 1)) == N + n_a
