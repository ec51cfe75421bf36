"""Consumer groups resume where they were after a restore (issue #29 item 1), on the local engine (no JVM).

The module fixture produces 60 records into each of two partitions (the first 20 of each an hour older than the
rest), lets consumer groups consume part of the topic and commit (``g-half``: 35 records of partition 0 and 10 of
partition 1; ``g-done``: all of partition 0), archives the topic with ``consumer.groups`` set (local workers,
delta-rs manifest) and checks the groups table. Restores with ``--topic-map`` and ``--from-time`` (the 20 older
records of each partition left out), and with ``--to-topic``, then a consumer in each restored group reads, from
its committed offset on the destination, exactly the records it had not read: none skipped, none twice. A worker
SIGKILLed inside or right after the transaction that places the group, then run again, gives the same. The
dry-run plan and the refusal when the destination group has members are checked too.

Local engine only: the translation is the restore worker's (the same code in a Spark task or a local worker
process); the groups table of a path manifest is written by delta-rs on either engine.
"""
from __future__ import annotations

import datetime as dt
import json
import time
import uuid

import pytest
from support.restore_jobs import object_spec_rows, run_restore_job
from support.archive_checks import base_config, consume, produce, run_cli, write_config

import lakesink
from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.errors import RestoreGroupActiveError, RestoreRefusedError

N, OLD = 60, 20  # records per partition; the first OLD of each are an hour older
HALF = {0: 35, 1: 10}  # g-half's committed offsets (partition 1's is before the --from-time cut)


def no_spark():
    raise AssertionError("the local engine must not start Spark")


def value(part: int, i: int) -> bytes:
    return b"v-%d-%02d" % (part, i)


def consume_committed(kafka, group: str, topic: str, partitions=(0, 1), commit: int | None = None) -> dict:
    """{partition: [value]} a consumer in ``group`` reads from its committed offsets to the end (it must have one:
    ``auto.offset.reset=error``); with ``commit``, it stops after that many records per partition and commits."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": "read_committed", "auto.offset.reset": "error"
                  if commit is None else "earliest"})
    out: dict[int, list] = {p: [] for p in partitions}
    try:
        for p in partitions:
            c.assign([TopicPartition(topic, p)])  # OFFSET_STORED: the group's committed offset
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                m = c.poll(1.0)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                            KafkaError.COORDINATOR_NOT_AVAILABLE):
                        time.sleep(0.5)  # a fresh broker's group coordinator is still loading: fetch again
                        c.assign([TopicPartition(topic, p)])
                        continue
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error().str()
                    break
                out[p].append(m.value())
                if commit is not None and len(out[p]) == commit[p]:
                    c.commit(message=m, asynchronous=False)
                    break
            else:
                raise AssertionError(f"{group} on {topic}-{p}: no end within 60 s")
            c.unassign()
    finally:
        c.close()
    return out


@pytest.fixture(scope="module")
def local_runner():
    from lakesink.runners.local import LocalRunner

    with LocalRunner(2) as runner:
        yield runner


@pytest.fixture(scope="module")
def archive(kafka, s3, local_runner):
    """(config, source topic, the cut between old and new records as ISO time)."""
    topic = f"groups-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=2)
    now = int(time.time() * 1000)
    old, new = now - 2 * 3_600_000, now - 3_600_000
    values, parts, stamps = [], [], []
    for p in (0, 1):
        for i in range(N):
            values.append(value(p, i))
            parts.append(p)
            stamps.append(old + i if i < OLD else new + i)
    produce(kafka, topic, values, partition_of=lambda i: parts[i], timestamps=stamps, headers=False)
    half = consume_committed(kafka, "g-half", topic, commit=HALF)
    assert half == {p: [value(p, i) for i in range(HALF[p])] for p in (0, 1)}
    consume_committed(kafka, "g-done", topic, partitions=(0,), commit={0: N})
    bucket = s3.create_bucket(f"groups-{uuid.uuid4().hex[:10]}")
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic, **{
        "format.class": "bytearray", "flush.size": "8", "store.kafka.keys": "true", "consumer.groups": "g-half",
        "consumer.groups.regex": "g-d.*"}))
    res = SinkJob(no_spark, cfg, runner=local_runner).run_batch(flush_tail=True)
    assert res.records == 2 * N
    cut = dt.datetime.fromtimestamp(new / 1000, dt.timezone.utc).isoformat()
    return cfg, topic, cut


def test_the_sink_records_the_groups_offsets(s3, archive):
    from lakesink.manifest.groups import GroupsTable, groups_location, latest_offsets

    cfg, topic, _cut = archive
    table = GroupsTable(groups_location(cfg.manifest_location), s3.s3_settings()).arrow()
    got = {k: v["committed_offset"] for k, v in latest_offsets(table, cfg.name).items()}
    assert got == {("g-half", topic, 0): 35, ("g-half", topic, 1): 10, ("g-done", topic, 0): N}


def test_groups_resume_exactly_where_they_were_with_topic_map_and_from_time(kafka, archive, local_runner):
    cfg, topic, cut = archive
    suffix = uuid.uuid4().hex[:6]
    dest = f"{topic}-copy-{suffix}"
    kafka.create_topic(dest, partitions=2)
    rep = lakesink.restore(no_spark, cfg, topic_map=(r"(.*)", rf"\1-copy-{suffix}"), from_time=cut,
                           groups="g-half,g-done", records_per_txn=7, runner=local_runner)
    assert rep.produced == 2 * (N - OLD)
    # g-half had read 0..34 of partition 0: it reads 35..59; on partition 1 it was at 10, before the cut at 20:
    # records 10..19 were not restored, so it reads every restored record, 20..59
    assert consume_committed(kafka, "g-half", dest) == {0: [value(0, i) for i in range(35, N)],
                                                        1: [value(1, i) for i in range(OLD, N)]}
    assert consume_committed(kafka, "g-done", dest, partitions=(0,)) == {0: []}  # it had read everything
    # source offset 35 is the 16th restored record of partition 0: its destination offset is the broker's
    # (transaction markers between the restore's transactions), which the report names
    lines = [ln for ln in rep.groups if ln.startswith("g-half: " + topic + "-0 ")]
    assert len(lines) == 1 and "source offset 35 -> " in lines[0] and "(committed with the restore)" in lines[0]
    assert any(ln.startswith(f"g-done: {topic}-0 -> {dest}-0: source offset {N} -> ") for ln in rep.groups)
    again = lakesink.restore(no_spark, cfg, topic_map=(r"(.*)", rf"\1-copy-{suffix}"), from_time=cut,
                             groups="g-half", runner=local_runner)  # a rerun moves no group
    assert again.produced == 0 and all("placed by an earlier run" in ln for ln in again.groups), again.groups
    assert consume_committed(kafka, "g-half", dest)[0] == [value(0, i) for i in range(35, N)]


def test_dry_run_plan_and_cli(kafka, archive, tmp_path):
    cfg, topic, _cut = archive
    rep = lakesink.restore(no_spark, cfg, to_topic="never-created", groups=["g-half"], groups_regex="g-d.*",
                           dry_run=True)
    assert sorted(rep.groups) == sorted([
        f"g-done: {topic}-0 -> never-created-0: source offset {N} -> after the restore's last record",
        f"g-half: {topic}-0 -> never-created-0: source offset 35 -> the destination offset of the first restored "
        f"record at or after source offset 35",
        f"g-half: {topic}-1 -> never-created-1: source offset 10 -> the destination offset of the first restored "
        f"record at or after source offset 10"])
    path = write_config(tmp_path, cfg.as_dict(redact=False))
    rc, out = run_cli(["restore", "--config", path, "--to-topic", "never-created", "--groups", "g-half",
                       "--dry-run"])
    assert rc == 0, out[-3000:]
    assert f"  consumer group g-half: {topic}-0 -> never-created-0: source offset 35 -> " in out
    rc, out = run_cli(["restore", "--config", path, "--to-topic", "never-created", "--groups", "g-unknown",
                       "--dry-run"])
    errors = [ln for ln in out.splitlines() if ln.startswith("lakesink:")]
    assert rc == 1 and len(errors) == 1 and "consumer group 'g-unknown' has no archived offsets" in errors[0], out
    assert "Traceback" not in out


def test_refused_while_the_destination_group_has_members(kafka, archive, local_runner):
    from confluent_kafka import Consumer

    cfg, topic, _cut = archive
    dest = f"{topic}-busy-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(dest, partitions=2)
    member = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "g-half",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        member.subscribe([dest])
        deadline = time.monotonic() + 30
        while not member.assignment():
            assert time.monotonic() < deadline, "the member never joined"
            member.poll(0.5)
        with pytest.raises(RestoreGroupActiveError, match=r"consumer group 'g-half' has 1 member\(s\) .* on the "
                                                          r"destination cluster: its offsets can only be set while"):
            lakesink.restore(no_spark, cfg, to_topic=dest, groups="g-half", runner=local_runner)
    finally:
        member.close()
    assert consume(kafka, dest, 0) == [] and consume(kafka, dest, 1) == []  # nothing produced


def test_routed_restores_place_groups_on_every_partition_a_source_partition_reaches(kafka, archive, local_runner):
    """--partition-map swapping the partitions, and --partitioner default fanning one source partition out to three:
    on each destination partition the group resumes at its own first record it had not read; a routing where two
    source partitions meet is refused (no one offset there is where the group stopped in both)."""
    from lakesink.errors import InvalidArgumentError
    from lakesink.executor.partitioning import default_partition

    cfg, topic, _cut = archive
    swap = f"{topic}-swap-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(swap, partitions=2)
    rep = lakesink.restore(no_spark, cfg, to_topic=swap, partition_map="0=1,1=0", groups="g-half", records_per_txn=9,
                           runner=local_runner)
    assert rep.produced == 2 * N
    assert consume_committed(kafka, "g-half", swap) == {1: [value(0, i) for i in range(35, N)],
                                                        0: [value(1, i) for i in range(10, N)]}
    assert any(ln.startswith(f"g-half: {topic}-0 -> {swap}-1: source offset 35 -> ") for ln in rep.groups), rep.groups

    fan = f"{topic}-fan-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(fan, partitions=3)
    plan = lakesink.restore(no_spark, cfg, to_topic=fan, where="kafka_partition = 0", partitioner="default",
                            groups="g-half", dry_run=True)
    assert [ln for ln in plan.groups if ln.startswith("g-half")] == [
        f"g-half: {topic}-0 -> {fan}-0,1,2: source offset 35 -> on each, the destination offset of the first "
        f"restored record at or after source offset 35 there"]
    rep = lakesink.restore(no_spark, cfg, to_topic=fan, where="kafka_partition = 0", partitioner="default",
                           groups="g-half", records_per_txn=4, runner=local_runner)
    assert rep.produced == N
    dest_of = {i: default_partition(b"k%d" % i, 3) for i in range(N)}  # produce() keys partition 0's records k0..
    assert consume_committed(kafka, "g-half", fan, partitions=(0, 1, 2)) == {
        d: [value(0, i) for i in range(35, N) if dest_of[i] == d] for d in (0, 1, 2)}

    merged = f"{topic}-merged-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(merged, partitions=2)
    with pytest.raises(InvalidArgumentError, match=rf"--groups with this routing: {topic}-0 and {topic}-1 both reach "
                                                   rf"{merged}-0, where their records interleave"):
        lakesink.restore(no_spark, cfg, to_topic=merged, partition_map="0=0,1=0", groups="g-half", dry_run=True)


def test_an_unknown_group_is_refused_before_anything_is_produced(kafka, archive, local_runner):
    cfg, topic, _cut = archive
    with pytest.raises(RestoreRefusedError, match="consumer group 'nobody' has no archived offsets"):
        lakesink.restore(no_spark, cfg, to_topic="never-created", groups="g-half,nobody", runner=local_runner)


@pytest.mark.parametrize("fault", ["mid:8", "between:8", "between:7"])
def test_sigkill_then_rerun_places_the_group_once(s3, kafka, archive, tmp_path, fault):
    """records_per_txn=5: source records 35..39 (g-half's next record first) go in the 8th transaction, with the
    group's offset. mid:8 dies inside it (records 35, 36 on the broker, uncommitted), between:8 right after it
    committed, between:7 right before it began: after a rerun the group reads 35..59, once each."""
    from lakesink.manifest.deltars import DeltaRsManifest

    cfg, topic, _cut = archive
    from lakesink.executor.readback import ArchivedObject

    objs = [ArchivedObject.from_row(r) for r in DeltaRsManifest(cfg.manifest_location, s3.s3_settings())
            .scan(job=cfg.name).to_pylist() if r["kind"] == "object" and r["kafka_partition"] == 0]
    rows = object_spec_rows(objs)
    dest, name = f"{topic}-kill-{uuid.uuid4().hex[:6]}", f"k-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(dest, partitions=1)

    def run(f: str):
        return run_restore_job(kafka, tmp_path, cfg, rows, name, dest, f, records_per_txn=5,
                               groups=[["g-half", topic, 0, 35]])

    killed = run(fault)
    assert killed.returncode == -9, killed.stderr[-2000:]
    placed = fault == "between:8"
    done = run("none")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert [g["state"] for g in result["groups"]] == ["already" if placed else "committed"]
    assert [v for _k, v, *_ in consume(kafka, dest, 0)] == [value(0, i) for i in range(N)]  # each once
    assert consume_committed(kafka, "g-half", dest, partitions=(0,)) == {0: [value(0, i) for i in range(35, N)]}


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_sql_view_consumer_groups_on_both_engines(request, archive, engine):
    from lakesink.driver.sql import run_queries

    cfg, topic, _cut = archive
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    (res,) = run_queries(cfg, "SELECT consumer_group, topic, `partition`, committed_offset FROM consumer_groups "
                              "ORDER BY consumer_group, `partition`", engine=engine, spark=spark, limit=None)
    assert res.columns == ["consumer_group", "topic", "partition", "committed_offset"]
    assert [tuple(r) for r in res.rows] == [("g-done", topic, 0, N), ("g-half", topic, 0, 35),
                                            ("g-half", topic, 1, 10)]


def test_cli_run_with_to_topic_prints_where_each_group_went(kafka, archive, tmp_path):
    cfg, topic, _cut = archive
    dest = f"{topic}-cli-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(dest, partitions=2)
    path = write_config(tmp_path, cfg.as_dict(redact=False))
    rc, out = run_cli(["restore", "--config", path, "--to-topic", dest, "--groups", "g-half", "--engine", "local",
                       "--master", "local[1]"])
    assert rc == 0, out[-3000:]
    assert f"  consumer group g-half: {topic}-1 -> {dest}-1: source offset 10 -> 10 (committed with the restore)" \
        in out, out[-3000:]
    assert "CONFWARN" not in out and "%4|" not in out, out[-3000:]  # no librdkafka line (a producer-only key)
    assert consume_committed(kafka, "g-half", dest) == {0: [value(0, i) for i in range(35, N)],
                                                        1: [value(1, i) for i in range(10, N)]}


def test_groups_on_the_spark_runner(spark, kafka, archive):
    """The same placement in Spark tasks (the GroupTargets travel in the task closure)."""
    from lakesink.runners.spark import SparkRunner

    cfg, topic, cut = archive
    dest = f"{topic}-spark-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(dest, partitions=2)
    rep = lakesink.restore(spark, cfg, to_topic=dest, from_time=cut, groups="g-half", records_per_txn=7,
                           runner=SparkRunner(spark))
    assert rep.produced == 2 * (N - OLD)
    assert consume_committed(kafka, "g-half", dest) == {0: [value(0, i) for i in range(35, N)],
                                                        1: [value(1, i) for i in range(OLD, N)]}


def test_group_capture_takes_the_batchs_partitions_without_asking_for_topics_again(kafka, s3, archive, local_runner,
                                                                                   monkeypatch):
    """A batch lists the cluster's topics once, to plan (``KafkaMetadata.resolve_topics``); the capture of the
    groups' offsets after it reads the partitions of that batch's snapshot, and asks the broker for no topic
    metadata of its own. The real broker and endpoint, calls counted; the offsets recorded are the groups'."""
    from confluent_kafka.admin import AdminClient

    from lakesink.manifest.groups import GroupsTable, groups_location, latest_offsets

    cfg, topic, _cut = archive
    before = GroupsTable(groups_location(cfg.manifest_location), s3.s3_settings()).arrow().num_rows
    asked: list = []
    real = AdminClient.list_topics
    monkeypatch.setattr(AdminClient, "list_topics", lambda self, *a, **kw: asked.append(a[:1]) or real(self, *a, **kw))
    job = SinkJob(no_spark, cfg, runner=local_runner)  # a new run: it records the groups once even with no records
    assert job.run_batch(flush_tail=True).records == 0
    assert asked == [()]  # the batch's own listing, no other
    table = GroupsTable(groups_location(cfg.manifest_location), s3.s3_settings()).arrow()
    assert table.num_rows == before + 3  # this run's observation of the three (group, partition) offsets
    got = {k: v["committed_offset"] for k, v in latest_offsets(table, cfg.name).items()}
    assert got == {("g-half", topic, 0): 35, ("g-half", topic, 1): 10, ("g-done", topic, 0): N}
