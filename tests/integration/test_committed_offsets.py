"""Reading consumer groups' committed offsets (lakesink.executor.committed) against real brokers.

librdkafka's ``AdminClient.list_consumer_group_offsets`` kills the process with SIGSEGV when the coordinator
answers ``NOT_COORDINATOR`` (librdkafka #5040): on a broker that has just started, about one run in two here.
Every offset read of restore, ``--groups``, ``consumer.groups`` and ``manifest handover`` goes through
``read_committed`` instead, which must survive that broker, wait for offsets a transaction is still settling,
and never join the group it reads."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import psutil
import pytest

from lakesink.devstack.kafka import KafkaBroker
from lakesink.errors import KafkaMetadataError
from lakesink.executor.committed import read_committed

ROOT = Path(__file__).resolve().parents[2]


def test_a_broker_that_has_just_started_never_crashes_the_reader():
    """Fresh groups read the moment a fresh broker is up (the coordinator still loading: NOT_COORDINATOR and
    COORDINATOR_LOAD_IN_PROGRESS answers): every read returns 'no offset', in a process that exits 0."""
    broker = KafkaBroker()
    broker.start()
    try:
        code = textwrap.dedent(f"""
            from confluent_kafka.admin import AdminClient, NewTopic
            from lakesink.executor.committed import read_committed
            conf = {{"bootstrap.servers": "{broker.bootstrap_servers}", "log_level": 0}}
            admin = AdminClient(conf)
            admin.create_topics([NewTopic("t", 2, 1)])["t"].result()
            got = [read_committed(conf, "fresh-%d" % i, [("t", 0), ("t", 1)], 60.0) for i in range(12)]
            assert all(v == (None, None) for r in got for v in r.values()), got
            print("read", len(got))
        """)
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, cwd=ROOT)
        jvm = psutil.Process(broker.pid).cmdline()  # the suite's brokers run C1 only (tests/conftest.py)
    finally:
        broker.stop()
    assert "-XX:TieredStopAtLevel=1" in jvm and "-XX:+UseSerialGC" in jvm, jvm
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert run.stdout.strip() == "read 12"


def test_offsets_come_back_stable_with_their_metadata_and_the_reader_never_joins(kafka):
    """A transaction's offsets are not taken while it is open (the read times out naming the group), are read
    with their metadata once it commits; the reading consumer never becomes a member of the group."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = {"bootstrap.servers": kafka.bootstrap_servers}
    topic, group = f"committed-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result()
    assert read_committed(conf, group, [(topic, 0), (topic, 1)]) == {(topic, 0): (None, None), (topic, 1): (None, None)}

    producer = Producer({**conf, "transactional.id": f"tx-{group}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"v", partition=0)
    meta = _group_metadata(conf, group)
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 7, metadata="cov:1")], meta, 30)
    with pytest.raises(KafkaMetadataError, match=group):
        read_committed(conf, group, [(topic, 0)], timeout_s=3.0)
    producer.commit_transaction(30)

    got = read_committed(conf, group, [(topic, 0), (topic, 1)])
    assert got == {(topic, 0): (7, "cov:1"), (topic, 1): (None, None)}
    described = admin.describe_consumer_groups([group])[group].result()
    assert described.members == []


def _group_metadata(conf: dict, group: str):
    from confluent_kafka import Consumer

    c = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        return c.consumer_group_metadata()
    finally:
        c.close()
