"""``--once --flush-tail`` with ``batch.max.records`` (issue #14 item 3): the run goes on with capped batches up
to the end offsets seen at its start, not just one capped batch."""
from __future__ import annotations

from support.archive_checks import base_config, check_exactly_once, json_payloads, produce

from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob


def test_once_flush_tail_archives_to_start_end_in_capped_batches(spark, kafka, s3, bucket, topic_name):
    kafka.create_topic(topic_name, partitions=2)
    sent = produce(kafka, topic_name, json_payloads(95), partition_of=lambda i: i % 2)
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{"batch.max.records": "20"}))
    results = SinkJob(spark, cfg).run(once=True, flush_tail=True)
    print("batches:", [r.summary() for r in results])
    # 48 and 47 records per partition, at most 20 per partition per batch: 3 batches
    assert len(results) == 3, [r.summary() for r in results]
    assert sum(r.records for r in results) == 95
    check_exactly_once(spark, cfg, sent, "json")


def test_once_without_flush_tail_is_one_capped_batch(spark, kafka, s3, bucket, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(30))
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{"batch.max.records": "20"}))
    results = SinkJob(spark, cfg).run(once=True)
    assert len(results) == 1 and results[0].records == 20, [r.summary() for r in results]
