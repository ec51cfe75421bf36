"""A local worker's kept Kafka consumer on the real broker (lakesink.executor.kept_consumer): one consumer reads
range after range, of several partitions and the same partition again, each exactly; local worker processes keep
theirs between tasks."""
from __future__ import annotations

import time

from support.archive_checks import json_payloads, produce

from lakesink.executor import kept_consumer
from lakesink.executor.kafka_reader import consumer_config, read_range


def test_one_kept_consumer_reads_range_after_range_exactly(kafka, topic_name):
    from confluent_kafka import Consumer

    kafka.create_topic(topic_name, partitions=3)
    produced = produce(kafka, topic_name, json_payloads(300), partition_of=lambda i: i % 3)
    # the broker holds a fetch at the end of the log 10 ms (librdkafka's default: 500): the reads below, 0.1 s apart,
    # each find the consumer ready again
    conf = consumer_config({"bootstrap.servers": kafka.bootstrap_servers, "fetch.max.wait.ms": "10"}, "lakesink-test")
    made = []

    def factory(settings):
        made.append(settings)
        return Consumer(settings)

    kept_consumer.keep_consumers()
    try:
        # partition 0 in two ranges, with the other partitions between them: each read only its own records
        for part, start, end in [(0, 0, 60), (1, 0, 100), (2, 10, 100), (0, 60, 100), (1, 99, 100)]:
            time.sleep(0.1)
            batches = list(read_range(conf, topic_name, part, start, end, consumer_factory=factory))
            got = [(p, o, v) for b in batches for p, o, v in zip(b.column("partition").to_pylist(),
                                                                 b.column("offset").to_pylist(),
                                                                 b.column("value").to_pylist())]
            assert got == [(part, o, v) for o, _k, v in produced[part] if start <= o < end], (part, start, end)
            assert kept_consumer.kept() == 1
        assert len(made) == 1
    finally:
        kept_consumer.keep_consumers(False)
    assert kept_consumer.kept() == 0


def test_local_workers_keep_their_consumer_between_tasks(kafka, topic_name):
    from lakesink.runners.local import LocalRunner

    kafka.create_topic(topic_name, partitions=2)
    produce(kafka, topic_name, json_payloads(40), partition_of=lambda i: i % 2)
    conf = consumer_config({"bootstrap.servers": kafka.bootstrap_servers}, "lakesink-test")

    def task(i):
        rows = sum(b.num_rows for b in read_range(conf, topic_name, i, 0, 20))
        return [(i, rows, kept_consumer.keeping(), kept_consumer.kept())]

    with LocalRunner(1) as runner:
        results = runner.tasks.run(task, 2)
    assert [r[:3] for r in results] == [(0, 20, True), (1, 20, True)]
    assert all(r[3] >= 1 for r in results)  # each task's read left its consumer kept
    assert not kept_consumer.keeping()  # this process (the driver) keeps none
