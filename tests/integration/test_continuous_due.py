"""A continuous run with ``rotate.interval.ms`` polls when its open file becomes closable, not after a long
``--interval`` (lakesink.driver.poll_schedule): the file is committed by the poll the schedule chose."""
from __future__ import annotations

import logging
import threading
import time

import pytest
from support.archive_checks import base_config, json_payloads, manifest_rows, produce

import lakesink
from lakesink.config import SinkConfig

ROTATE_MS = 5000
INTERVAL_S = 600.0  # far longer than the test may take: a poll on the interval's schedule never comes


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_due_file_is_committed_by_the_poll_scheduled_for_it(request, kafka, s3, bucket, topic_name, engine,
                                                               caplog):
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    kafka.create_topic(topic_name, partitions=1)
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "partitioner.class": "daily", "locale": "en", "timezone": "UTC", "timestamp.extractor": "Record", "rotate.interval.ms": str(ROTATE_MS),
        "flush.size": "1000"}))
    t0 = int(time.time() * 1000)
    produce(kafka, topic_name, json_payloads(1), timestamps=[t0])
    results, stop = [], threading.Event()

    def on_batch(res) -> None:
        results.append(res)
        if len(results) == 1:  # the record that closes record 0's file (a producer writing on, stamped at its due time)
            produce(kafka, topic_name, json_payloads(1, start=1), timestamps=[t0 + ROTATE_MS])
        if res.committed or len(results) >= 4:
            stop.set()

    caplog.set_level(logging.INFO, logger="lakesink.driver.sink")
    run = threading.Thread(target=lakesink.run, args=(spark, cfg),
                           kwargs=dict(engine=engine, once=False, interval_s=INTERVAL_S, stop=stop, on_batch=on_batch),
                           daemon=True)
    run.start()
    run.join(timeout=240)
    waited = run.is_alive()
    stop.set()
    run.join(timeout=60)
    assert not waited, f"the run waited for its {INTERVAL_S:g} s interval after {len(results)} polls"

    first, second = results[0], results[-1]
    assert len(results) == 2, [r.summary() for r in results]
    # poll 1 read record 0 into a file it could not close yet, and knew when it would become closable
    assert not first.committed and first.records_read == 1 and first.due_ms == t0 + ROTATE_MS
    # the next poll, scheduled for that time, read record 1 (stamped then), which closed the file: committed
    assert second.committed and second.records == 1 and second.due_ms == t0 + 2 * ROTATE_MS
    objects = [r for r in manifest_rows(spark, cfg) if r.kind == "object"]
    assert [(r.range_start, r.range_end) for r in objects] == [(0, 0)]
    schedule = [r.getMessage() for r in caplog.records if r.getMessage().startswith("next poll in")]
    assert schedule and schedule[0].endswith(": a file is due"), schedule
