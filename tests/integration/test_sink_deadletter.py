"""Dead letters end to end on the real broker, S3 endpoint, Spark and Delta (issue #11 item 7): with
``errors.tolerance=all`` records that do not decode go to ``errors.deadletterqueue.topic.name`` with Connect's
``__connect.errors.*`` headers, the rest is archived, the manifest notes them in ``deadletter`` rows while its
ranges still chain over every offset, and a rerun sends and archives nothing again; by default the batch fails
naming the record and commits nothing; a missing dead-letter topic fails at preflight in one line."""
from __future__ import annotations

import json

import pytest
from support.archive_checks import (archived_values, base_config, check_chains, consume, manifest_rows, produce,
                                    run_cli, write_config)

from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.driver.sql import run_query
from lakesink.errors import BatchFailedError

N = 40
BAD = {7, 8, 23, 39}  # per partition index: two adjacent, one inside, the last record


def values() -> list[bytes]:
    return [b"{broken %d" % i if i in BAD else json.dumps({"i": i}).encode() for i in range(N)]


@pytest.mark.parametrize("reader", ["direct", "spark"])
def test_bad_records_go_to_the_dead_letter_topic_once_and_the_rest_is_archived(spark, kafka, s3, bucket,
                                                                             topic_name, reader):
    dlq = f"{topic_name}-dlq"
    kafka.create_topic(topic_name, partitions=2)
    kafka.create_topic(dlq, partitions=1)
    sent = produce(kafka, topic_name, values() + values(), partition_of=lambda i: i // N)
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "flush.size": "6", "value.decoder": "json", "kafka.reader": reader, "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq}))

    res = SinkJob(spark, cfg).run_batch(flush_tail=True)
    assert res.dead_lettered == 2 * len(BAD) and res.records == 2 * (N - len(BAD)) and res.records_read == 2 * N
    rows = manifest_rows(spark, cfg)
    assert check_chains(rows) == {(topic_name, 0): N, (topic_name, 1): N}
    good = [json.loads(v) for i, v in enumerate(values()) if i not in BAD]
    assert archived_values(spark, cfg) == {(topic_name, 0): good, (topic_name, 1): good}
    notes = sorted((r.kafka_partition, r.first_offset, r.last_offset, r.record_count, r.note)
                   for r in rows if r.kind == "deadletter")
    assert [n[:4] for n in notes] == [(0, 7, 39, 0), (1, 7, 39, 0)]
    assert all(n[4].startswith(f"4 records sent to dead-letter topic '{dlq}' (offsets 7, 8, 23, 39): record ")
               for n in notes), notes

    letters = consume(kafka, dlq)
    assert sorted(v for _, v, _, _, _ in letters) == sorted([b"{broken %d" % i for i in BAD] * 2)
    by_origin = {}
    for key, value, headers, ts, _ in letters:
        h = dict(headers)
        assert h["__connect.errors.topic"] == topic_name.encode() and h["__connect.errors.stage"] == b"VALUE_CONVERTER"
        assert b"not valid JSON" in h["__connect.errors.exception.message"] or \
               b"record " in h["__connect.errors.exception.message"]
        by_origin[(int(h["__connect.errors.partition"]), int(h["__connect.errors.offset"]))] = (key, value, ts, h)
    assert sorted(by_origin) == sorted((p, o) for p in (0, 1) for o in BAD)
    for p in (0, 1):  # the original key, value, headers and timestamp travel unchanged
        for off, k, v in sent[p]:
            if off in BAD:
                key, value, _ts, h = by_origin[(p, off)]
                assert (key, value, h["i"]) == (k, v, str(p * N + off).encode())

    # the offset proof: every offset is in an object's span or a row of the gaps view
    gaps = run_query(spark, cfg, f"SELECT kafka_partition, start_offset, end_offset, kind FROM gaps "
                                 f"WHERE job = '{cfg.name}'", limit=None).rows
    # flush.size 6: 7, 8 and 23 lie inside objects' spans; 39, after the last object, is a range advanced over
    assert sorted(gaps) == [(p, 39, 39, "advance") for p in (0, 1)]
    for p in (0, 1):
        covered = {o for r in rows if r.kind == "object" and r.kafka_partition == p
                   for o in range(r.first_offset, r.last_offset + 1)}
        covered |= {o for part, a, b, _ in gaps if part == p for o in range(a, b + 1)}
        assert covered == set(range(N)), (p, sorted(set(range(N)) - covered))

    again = SinkJob(spark, cfg).run_batch(flush_tail=True)  # exactly once: nothing re-archived, nothing re-sent
    assert again.committed_rows == 0 and again.dead_lettered == 0
    assert len(consume(kafka, dlq)) == 2 * len(BAD)


def test_by_default_a_bad_record_fails_the_batch_naming_it_and_commits_nothing(spark, kafka, s3, bucket,
                                                                              topic_name):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, values(), partition_of=lambda i: 0)
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{"value.decoder": "json"}))
    with pytest.raises(BatchFailedError, match=rf"record {topic_name}-0@7: ") as e:
        SinkJob(spark, cfg).run_batch(flush_tail=True)
    assert e.value.exit_code == 6 and "nothing was committed" in str(e.value)
    assert manifest_rows(spark, cfg) == []


def test_a_missing_dead_letter_topic_fails_at_preflight_in_one_line(kafka, s3, bucket, topic_name, tmp_path):
    kafka.create_topic(topic_name, partitions=1)
    path = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{
        "value.decoder": "json", "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "no-such-dlq"}))
    rc, out = run_cli(["sink", "--config", path, "--once"], timeout=120)
    errors = [ln for ln in out.splitlines() if ln.startswith("lakesink:")]
    assert rc == 5, out[-3000:]
    assert len(errors) == 1 and "errors.deadletterqueue.topic.name='no-such-dlq': no such topic" in errors[0], out
    assert "Traceback" not in out
