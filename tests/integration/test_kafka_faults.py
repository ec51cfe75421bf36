"""Kafka faults (issue #14 item 6): the broker stopped mid-batch and restarted, a partition added mid-run, a topic
deleted and recreated. Each ends with the archive exactly once (every offset once, checked through the manifest
and by reading the objects back) or, for the recreated topic, with a refusal that names the topic id change. A
broker that is down fails ``sink``, ``status`` and ``restore`` in one line at the first refusal (issue #28 item 3).

The module has its own broker (stopping the session's shared one would disturb other tests); it keeps its ports
and data across :meth:`KafkaBroker.halt` / ``start``, so a restart looks to clients like a real broker restart.
"""
from __future__ import annotations

import os
import socket
import sys
import threading
import time
import uuid

import pytest
from support.archive_checks import (archived_values, base_config, check_chains, check_exactly_once, expected_values,
                                    json_payloads, manifest_rows, produce, run_cli, write_config)
from support.faults import CallAt

from lakesink.config import SinkConfig
from lakesink.devstack.kafka import KafkaBroker
from lakesink.driver.sink import SinkJob
from lakesink.errors import BatchFailedError, ResumeGuardError
from lakesink.hooks import Hooks


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A broker of this module only (it is halted and restarted by the tests)."""
    from lakesink.devstack import free_port

    port = free_port()
    controller = free_port()
    while controller == port:
        controller = free_port()
    b = KafkaBroker(port=port, controller_port=controller, data_dir=tmp_path_factory.mktemp("kafka-faults"))
    try:
        b.start()
        yield b
    finally:
        b.stop()


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class HaltBrokerAfterFirstUpload(Hooks):
    """Executor hook: at the first uploaded commit group, ask the test (through a flag file) to halt the broker,
    and return once its port is closed; the task then reads the rest of its range from a broker that is down
    until the test restarts it. Pickled by value (the executors cannot import this test module)."""

    def __init__(self, flag: str, port: int):
        self.flag, self.port = flag, port

    def for_executors(self) -> Hooks:
        return self

    def executor(self, point: str) -> None:
        if point != "after_upload" or os.path.exists(self.flag):
            return
        with open(self.flag, "w") as f:
            f.write(str(os.getpid()))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _port_open(self.port):
            time.sleep(0.1)


def _cfg(broker, s3, bucket, topic, **over) -> SinkConfig:
    return SinkConfig.from_dict(base_config(broker, s3, bucket, topic, **over))


def test_broker_halted_mid_read_and_restarted(spark, broker, s3, bucket, topic_name, tmp_path):
    import cloudpickle
    from pyspark import cloudpickle as spark_cloudpickle

    for pickler in (cloudpickle, spark_cloudpickle):  # Spark's tasks and the local engine's
        pickler.register_pickle_by_value(sys.modules[__name__])
    broker.create_topic(topic_name, partitions=2)
    sent = produce(broker, topic_name, json_payloads(6000), partition_of=lambda i: i % 2)
    # small fetches and a small prefetch queue: the reader needs the broker for most of its range after the first
    # upload (else librdkafka would have the whole partition queued before the broker goes down)
    cfg = _cfg(broker, s3, bucket, topic_name, **{"flush.size": "500", "kafka.max.partition.fetch.bytes": "4096",
                                                  "kafka.queued.max.messages.kbytes": "8"})
    flag = tmp_path / "halt-now"
    job = SinkJob(spark, cfg, run_id="run-halted", hooks=HaltBrokerAfterFirstUpload(str(flag), broker.port))
    outcome: dict[str, object] = {}

    def batch():
        try:
            outcome["result"] = job.run_batch()
        except Exception as e:  # noqa: BLE001 - reported below
            outcome["error"] = e

    t = threading.Thread(target=batch, name="batch")
    t.start()
    # the broker is halted and restarted from this (the main) thread: the devstack ties a child to its thread
    deadline = time.monotonic() + 300
    while not flag.exists() and t.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert flag.exists(), f"no commit group was uploaded: {outcome}"
    broker.halt()
    time.sleep(3)
    broker.start()  # same ports, same log dirs, same cluster id
    t.join(300)
    assert not t.is_alive(), "the batch did not end after the broker came back"
    print("halted-broker batch:", outcome["result"].summary() if "result" in outcome else outcome["error"])
    if "error" in outcome:  # allowed: a batch that gives up commits nothing and says why in one line
        err = outcome["error"]
        assert isinstance(err, BatchFailedError) and "nothing was committed" in str(err), repr(err)
        assert len(str(err).splitlines()) == 1, str(err)
    else:  # the usual case: librdkafka reconnects and the task reads on
        res = outcome["result"]
        assert res.records == 6000, res.summary()
    # either way, a next run leaves every offset archived exactly once
    SinkJob(spark, cfg, run_id="run-after").run_batch(flush_tail=True)
    check_exactly_once(spark, cfg, sent, "json")


@pytest.mark.parametrize("starting", ["earliest", "latest"])
def test_partition_added_mid_run_is_archived_from_its_start(spark, broker, s3, bucket, topic_name, starting):
    """A partition added while a batch runs is planned by the next batch from offset 0, also under
    kafka.starting.offsets=latest (which only skips what the topic held when the job first ran)."""
    broker.create_topic(topic_name, partitions=2)
    before = produce(broker, topic_name, json_payloads(10), partition_of=lambda i: i % 2)
    cfg = _cfg(broker, s3, bucket, topic_name, **{"flush.size": "5", "kafka.starting.offsets": starting})
    job = SinkJob(spark, cfg, run_id="run-a")
    first = job.run_batch()
    if starting == "latest":  # the records that predate the job are recorded as skipped, not archived
        assert first.records == 0 and first.committed_rows == 2, first.summary()
    during: dict = {}

    def grow():
        from confluent_kafka.admin import NewPartitions

        admin = broker.admin()  # kept alive until its futures are done
        admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(30)
        deadline = time.monotonic() + 30
        while len(admin.list_topics(topic_name, timeout=5).topics[topic_name].partitions) < 3:
            assert time.monotonic() < deadline, "partition 2 never appeared"
            time.sleep(0.2)
        during.update(produce(broker, topic_name, json_payloads(15, start=100), partition_of=lambda i: i % 3))

    mid = produce(broker, topic_name, json_payloads(20, start=10), partition_of=lambda i: i % 2)
    job.hooks = CallAt("before_resolve", grow)  # while the batch's executors ran
    second = job.run_batch()
    assert {p.partition for p in second.partitions} == {0, 1}, "the running batch's plan changed"
    job.hooks = Hooks()
    third = job.run_batch(flush_tail=True)
    assert 2 in {p.partition for p in third.partitions} and third.records > 0, third.summary()

    sent = {p: (before.get(p, []) if starting == "earliest" else []) + mid.get(p, []) + during.get(p, [])
            for p in (0, 1, 2)}
    if starting == "earliest":
        check_exactly_once(spark, cfg, sent, "json")
    else:
        rows = manifest_rows(spark, cfg)
        ends = {(topic_name, p): (before.get(p, []) + mid[p] + during[p])[-1][0] + 1 if p < 2 else
                during[p][-1][0] + 1 for p in (0, 1, 2)}
        check_chains(rows, ends)  # 0.. chains for all three, the skipped prefix included
        skipped = sorted((r.kafka_partition, r.range_start, r.range_end) for r in rows if r.kind == "skipped")
        assert skipped == [(0, 0, 4), (1, 0, 4)], skipped
        got, want = archived_values(spark, cfg), expected_values(sent, "json")
        for p in (0, 1, 2):
            assert got[(topic_name, p)] == want[p], f"partition {p}: archived values differ from the produced ones"


def test_topic_deleted_and_recreated_is_refused_naming_the_topic_id_change(spark, broker, s3, bucket, topic_name):
    broker.create_topic(topic_name, partitions=2)
    produce(broker, topic_name, json_payloads(20), partition_of=lambda i: i % 2)
    cfg = _cfg(broker, s3, bucket, topic_name)
    SinkJob(spark, cfg).run_batch()
    rows_before = sorted((r.kafka_partition, r.range_start, r.range_end, r.run_id) for r in manifest_rows(spark, cfg))
    old_id = {r.topic_id for r in manifest_rows(spark, cfg)}
    assert len(old_id) == 1 and None not in old_id

    admin = broker.admin()
    admin.delete_topics([topic_name], operation_timeout=30)[topic_name].result(30)
    deadline = time.monotonic() + 60
    while True:  # the deletion completes asynchronously: create again until the broker takes it
        try:
            broker.create_topic(topic_name, partitions=2)
            break
        except Exception:  # noqa: BLE001 - DevStackError while the old topic is still being deleted
            assert time.monotonic() < deadline, "the topic could not be recreated"
            time.sleep(0.5)
    sent = produce(broker, topic_name, json_payloads(30), partition_of=lambda i: i % 2)

    with pytest.raises(ResumeGuardError) as exc:
        SinkJob(spark, cfg).run_batch(flush_tail=True)
    msg = str(exc.value)
    (old,) = old_id
    assert f"topic {topic_name!r} was deleted and recreated" in msg and old in msg, msg
    assert "new `name`" in msg and "topics.dir" in msg, msg  # says what to do
    after = sorted((r.kafka_partition, r.range_start, r.range_end, r.run_id) for r in manifest_rows(spark, cfg))
    assert after == rows_before, "the refused run committed something"

    # what the message says to do: a new job with its own topics.dir archives the new topic exactly once
    cfg2 = _cfg(broker, s3, bucket, topic_name, name=f"job-{uuid.uuid4().hex[:6]}", **{"topics.dir": "topics-v2"})
    SinkJob(spark, cfg2).run_batch(flush_tail=True)
    check_exactly_once(spark, cfg2, sent, "json")
    new_id = {r.topic_id for r in manifest_rows(spark, cfg2)}
    assert len(new_id) == 1 and old not in new_id


def test_broker_down_is_one_line_exit_5_at_the_first_refusal_on_every_command(broker, s3, bucket, topic_name,
                                                                               tmp_path):
    """Before: ``restore`` exited 1 after 80 s and 1,157 librdkafka lines, ``status`` retried for 60 s."""
    import re

    broker.create_topic(topic_name)
    path = write_config(tmp_path, base_config(broker, s3, bucket, topic_name))
    commands = {"sink": ["sink"], "status": ["status"], "restore": ["restore", "--to-topic", "copy"]}
    outcomes = {}
    broker.halt()
    try:
        for name, args in commands.items():
            logs = tmp_path / f"logs-{name}"
            outcomes[name] = (*run_cli([*args, "--config", path], env_extra={"LAKESINK_LOG_DIR": str(logs)},
                                       timeout=180), logs)
    finally:
        broker.start()
    for name, (rc, out, logs) in outcomes.items():
        errors = [line for line in out.splitlines() if line.startswith("lakesink: error: ")]
        assert rc == 5 and len(errors) == 1, (name, out)
        assert f"connection refused by {broker.bootstrap_servers}" in errors[0], (name, errors[0])
        assert not re.search(r"rdkafka|FAIL", out), (name, out)  # librdkafka's lines: only in the run's log
        logged = "".join(p.read_text(errors="replace") for p in logs.glob("*.log"))
        assert 1 <= logged.count("Connection refused") <= 3, (name, logged)  # the first answer ended it
