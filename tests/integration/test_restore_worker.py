"""The restore worker (lakesink.executor.restore) against the real broker, without Spark: objects archived by
the real writers to a ``file://`` store are restored into a new topic and read back with
``isolation.level=read_committed``; each record exactly once, in order, with its key, value, headers and
CreateTime timestamp, also when the restoring process is SIGKILLed mid-transaction or between transactions;
a second producer with the same transactional.id fences the first; a progress group with members is refused;
a timestamp the broker would refuse fails with one line."""
from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from support.restore_jobs import run_restore_job
from support.archive_checks import consume

from lakesink.wiring import task_parts
from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.errors import (RestoreFencedError, RestoreGroupActiveError, RestoreProduceError, RestoreRefusedError,
                             RestoreTimestampError)
from lakesink.executor.archiver import ArchivedRow, BatchContext
from lakesink.executor.coverage import Coverage
from lakesink.executor.readback import ArchivedObject, Cut
from lakesink.executor.restore import progress_group, read_progress, restore_partition, transactional_id
from lakesink.executor.task import archive_partitions, decode_result
from lakesink.store import open_store

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
N = 40
SOURCE_PARTITION = 3


def expected_records(now_ms: int) -> list[tuple]:
    """(offset, key, value, headers, timestamp) of the archived records; offsets have a gap (a compacted or
    transaction-marker range), timestamps are CreateTime, not monotonic, all in the past."""
    out = []
    for i in range(N):
        offset = 100 + i + (5 if i >= 17 else 0)
        headers = [("h", b"%d" % i), ("h", b"dup"), ("empty", b""), ("null", None)]
        ts = now_ms - 3_600_000 + 1000 * i - (120_000 if i % 9 == 4 else 0)
        out.append((offset, b"key-%d" % i, json.dumps({"i": i, "s": "é" * (i % 4)},
                                                        separators=(",", ":"), ensure_ascii=False).encode(),
                    headers, ts))
    return out


def archive(tmp_path: Path, records: list[tuple]) -> tuple[SinkConfig, list]:
    """Archive ``records`` (one source partition) with the sink's executor code; (config, manifest rows)."""
    cfg = SinkConfig.from_dict({
        "name": "src", "topics": "src", "format.class": "json", "flush.size": "6", "s3.bucket.name": "bkt",
        "store.url": f"file://{tmp_path}/store", "manifest.location": str(tmp_path / "m"),
        "kafka.bootstrap.servers": "localhost:9", "store.kafka.keys": "true", "store.kafka.headers": "true"})
    m = len(records)
    batch = pa.RecordBatch.from_pydict({
        "value": pa.array([r[2] for r in records], pa.binary()),
        "partition": pa.array([SOURCE_PARTITION] * m, pa.int32()),
        "offset": pa.array([r[0] for r in records], pa.int64()),
        "ts": pa.array([r[4] for r in records], pa.int64()),
        "key": pa.array([r[1] for r in records], pa.binary()),
        "headers": pa.array([[{"key": k, "value": v} for k, v in r[3]] for r in records], HEADERS),
        "ts_type": pa.array([0] * m, pa.int32()),
    })
    ctx = BatchContext(job="src", run_id="r", batch_id=0, cluster_id=None, topic_ids={}, flush_tail=True)
    out = list(archive_partitions(iter([batch]), task_parts(cfg), ctx, {("src", SOURCE_PARTITION): (records[0][0],
                                                                                          records[-1][0] + 1)}))
    rows = [d.row for d in map(decode_result, out[0].column("row").to_pylist())
            if isinstance(d, ArchivedRow) and d.row.kind == "object"]
    assert sum(r.record_count for r in rows) == m and all(any(s.view == "metadata" for s in r.side_files) for r in rows)
    return cfg, rows


def create_topic(kafka, partitions: int = 1) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"restored-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def wanted(records: list[tuple]) -> list[tuple]:
    from confluent_kafka import TIMESTAMP_CREATE_TIME

    return [(k, v, h, ts, TIMESTAMP_CREATE_TIME) for _o, k, v, h, ts in records]


def restore(kafka, cfg, rows, name, topic, **kw):
    return restore_partition(
        name, topic, 0, [ArchivedObject.from_row(r) for r in rows], open_store(wiring.store_settings(cfg)),
        wiring.value_format(cfg), {"bootstrap.servers": kafka.bootstrap_servers},
        keys_format=wiring.keys_format(cfg), headers_format=wiring.headers_format(cfg), **kw)


def test_restore_exactly_once_in_order_and_rerun_produces_nothing(kafka, tmp_path):
    records = expected_records(int(time.time() * 1000))
    cfg, rows = archive(tmp_path, records)
    topic, name = create_topic(kafka), f"r-{uuid.uuid4().hex[:6]}"
    res = restore(kafka, cfg, rows, name, topic, records_per_txn=7)
    assert res.produced == N and res.resumed_from is None and res.next_offset == records[-1][0] + 1
    assert res.transactions == 6  # 40 records, 7 per transaction
    assert consume(kafka, topic) == wanted(records)
    progress, meta = read_progress({"bootstrap.servers": kafka.bootstrap_servers}, progress_group(name), topic, 0)
    assert progress == records[-1][0] + 1
    # the metadata says which source offsets are in the destination: all of them, whatever the time
    cov = Coverage.decode(progress, meta).source("src", SOURCE_PARTITION)
    assert cov.exact == [(0, records[-1][0], None, None)] and cov.dirty == []
    again = restore(kafka, cfg, rows, name, topic, records_per_txn=7)
    assert (again.produced, again.transactions, again.resumed_from) == (0, 0, records[-1][0] + 1)
    # a finished restore run again costs a plan, not a read: every object is already there, none is read
    assert (again.objects_read, again.skipped) == (0, N)
    assert consume(kafka, topic) == wanted(records)


def test_restore_a_cut(kafka, tmp_path):
    from lakesink.executor.readback import Cut

    records = expected_records(int(time.time() * 1000))
    cfg, rows = archive(tmp_path, records)
    topic, name = create_topic(kafka), f"r-{uuid.uuid4().hex[:6]}"
    lo, hi = records[5][0], records[30][0]
    ts_lo = records[10][4]
    res = restore(kafka, cfg, rows, name, topic, cut=Cut(from_offset=lo, to_offset=hi, from_ts=ts_lo))
    want = [r for r in records if lo <= r[0] <= hi and r[4] >= ts_lo]
    assert res.produced == len(want) and res.next_offset == hi + 1
    assert consume(kafka, topic) == wanted(want)


def run_job(kafka, tmp_path, cfg, rows, name, topic, fault: str) -> subprocess.CompletedProcess:
    return run_restore_job(kafka, tmp_path, cfg, [r.to_json() for r in rows], name, topic, fault, records_per_txn=6)


@pytest.mark.parametrize("fault", ["mid:1", "mid:3", "between:1", "between:4"])
def test_sigkill_then_rerun_gives_no_duplicate_and_no_gap(kafka, tmp_path, fault):
    records = expected_records(int(time.time() * 1000))
    cfg, rows = archive(tmp_path, records)
    topic, name = create_topic(kafka), f"r-{uuid.uuid4().hex[:6]}"
    killed = run_job(kafka, tmp_path, cfg, rows, name, topic, fault)
    assert killed.returncode == -9, killed.stderr[-2000:]
    committed = 6 * (int(fault.split(":")[1]) - (1 if fault.startswith("mid") else 0))
    assert consume(kafka, topic) == wanted(records[:committed])
    if fault.startswith("mid"):  # the killed transaction's records are in the log, never visible as committed
        assert len(consume(kafka, topic, isolation="read_uncommitted")) == committed + 2
    done = run_job(kafka, tmp_path, cfg, rows, name, topic, "none")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["produced"] == N - committed
    assert result["resumed_from"] == (records[committed][0] if committed else None)
    assert consume(kafka, topic) == wanted(records)


@pytest.mark.parametrize("flush_zombie", [False, True], ids=["at-commit", "before-next-produce"])
def test_a_second_producer_with_the_same_transactional_id_fences_the_first(kafka, tmp_path, flush_zombie):
    """A newer producer of the same transactional id fences the running worker: it stops with RestoreFencedError
    (exit 4), also when the fencing reaches it before its next produce(), which librdkafka fails with "Local:
    Fatal error" (``flush_zombie``: the worker names the fatal error's cause); a rerun resumes."""
    from confluent_kafka import Producer

    records = expected_records(int(time.time() * 1000))
    cfg, rows = archive(tmp_path, records)
    topic, name = create_topic(kafka), f"r-{uuid.uuid4().hex[:6]}"
    zombie_killer = {}

    def on_event(point, info):
        if point == "produced" and info["offset"] == records[9][0] and not zombie_killer:
            p = Producer({"bootstrap.servers": kafka.bootstrap_servers,
                          "transactional.id": transactional_id(name, topic, 0)})
            p.init_transactions(30)  # bumps the epoch: the running worker is now a zombie
            zombie_killer["p"] = p
            if flush_zombie:  # the zombie's records meet the new epoch: its fatal error is raised now
                info["producer"].flush(10)

    with pytest.raises(RestoreFencedError, match="fenced by a newer producer") as e:
        restore(kafka, cfg, rows, name, topic, records_per_txn=6, on_event=on_event)
    assert e.value.exit_code == 4
    assert consume(kafka, topic) == wanted(records[:6])  # the first transaction committed, the second did not
    res = restore(kafka, cfg, rows, name, topic, records_per_txn=6)
    assert res.resumed_from == records[6][0] and res.produced == N - 6
    assert consume(kafka, topic) == wanted(records)


def test_any_selection_into_the_same_destination_skips_what_is_there(kafka, tmp_path):
    """Progress is keyed by source offsets in the destination: a cut inside an earlier restore produces nothing,
    an overlapping one only what is missing, and each record is in the destination once."""
    records = expected_records(int(time.time() * 1000))
    cfg, rows = archive(tmp_path, records)
    topic = create_topic(kafka)
    first = restore(kafka, cfg, rows, None, topic, cut=Cut(from_offset=records[10][0], to_offset=records[20][0]))
    assert first.produced == 11
    inside = restore(kafka, cfg, rows, None, topic, cut=Cut(from_offset=records[12][0], to_offset=records[14][0],
                                                            from_ts=records[0][4] - 10**6))
    assert (inside.produced, inside.skipped, inside.transactions) == (0, 3, 0)
    wider = restore(kafka, cfg, rows, None, topic, cut=Cut(to_offset=records[25][0]))
    assert (wider.produced, wider.skipped) == (15, 11)
    rest = restore(kafka, cfg, rows, None, topic)
    assert (rest.produced, rest.skipped) == (N - 26, 26)
    got = consume(kafka, topic)
    assert sorted(got) == sorted(wanted(records)) and len(got) == N
    # --again: produced again on purpose
    again = restore(kafka, cfg, rows, None, topic, cut=Cut(to_offset=records[1][0]), again=True)
    assert again.produced == 2 and len(consume(kafka, topic)) == N + 2


def test_a_time_window_then_everything_produces_each_record_once(kafka, tmp_path):
    records = expected_records(int(time.time() * 1000))
    cfg, rows = archive(tmp_path, records)
    topic = create_topic(kafka)
    lo, hi = records[5][4], records[25][4]
    window = restore(kafka, cfg, rows, None, topic, cut=Cut(from_ts=lo, to_ts=hi))
    inside = [r for r in records if lo <= r[4] <= hi]
    assert window.produced == len(inside) and consume(kafka, topic) == wanted(inside)
    full = restore(kafka, cfg, rows, None, topic)
    assert (full.produced, full.skipped) == (N - len(inside), len(inside))
    assert sorted(consume(kafka, topic)) == sorted(wanted(records))


def test_objects_whose_offsets_interleave_are_restored_in_offset_order(kafka, tmp_path):
    """Objects of one commit group (a FieldPartitioner's) interleave in offsets: the worker merges them, so the
    destination holds the source order, and progress committed mid-object never skips an earlier offset."""
    records = expected_records(int(time.time() * 1000))
    evens = [r for i, r in enumerate(records) if i % 2 == 0]
    odds = [r for i, r in enumerate(records) if i % 2 == 1]
    cfg, even_rows = archive(tmp_path, evens)  # one store: keys differ by their first offsets
    _cfg, odd_rows = archive(tmp_path, odds)
    objects = [ArchivedObject.from_row(r) for r in even_rows + odd_rows]
    assert any(a.first_offset < b.first_offset <= a.last_offset for a in objects for b in objects if a is not b)
    topic = create_topic(kafka)
    res = restore(kafka, cfg, even_rows + odd_rows, None, topic, records_per_txn=5)
    assert res.produced == N and consume(kafka, topic) == wanted(records)
    # what a --where that chose only the even objects leaves: the odd objects' spans are holes, claimed by nobody
    part = create_topic(kafka)
    holes = tuple((r.first_offset, r.last_offset) for r in odd_rows)
    res = restore(kafka, cfg, even_rows, None, part, holes=holes)
    assert res.produced == len(evens)
    cov = Coverage.decode(*read_progress({"bootstrap.servers": kafka.bootstrap_servers}, progress_group(None), part, 0)).source("src", SOURCE_PARTITION)
    assert not any(cov.covers(r[0], r[4]) for r in odds) and cov.dirty
    # the worker itself refuses to restore into what it cannot vouch for (a restore may have committed after the
    # driver's check), until told to produce again
    with pytest.raises(RestoreRefusedError, match="may already be there"):
        restore(kafka, cfg, even_rows + odd_rows, None, part)
    assert restore(kafka, cfg, even_rows + odd_rows, None, part, again=True).produced == N
    assert len(consume(kafka, part)) == N + len(evens)


def test_refuses_while_the_progress_group_has_members(kafka, tmp_path):
    from confluent_kafka import Consumer

    records = expected_records(int(time.time() * 1000))
    cfg, rows = archive(tmp_path, records)
    topic, name = create_topic(kafka), f"r-{uuid.uuid4().hex[:6]}"
    member = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": progress_group(name),
                       "enable.auto.commit": False})
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 60
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.5)
        assert member.assignment()
        with pytest.raises(RestoreGroupActiveError, match="member"):
            restore(kafka, cfg, rows, name, topic)
    finally:
        member.close()
    assert consume(kafka, topic) == []


def test_a_timestamp_too_far_in_the_future_fails_with_one_line(kafka, tmp_path):
    now = int(time.time() * 1000)
    records = expected_records(now)
    records[20] = records[20][:4] + (now + 2 * 3_600_000,)
    cfg, rows = archive(tmp_path, records)
    topic, name = create_topic(kafka), f"r-{uuid.uuid4().hex[:6]}"
    with pytest.raises(RestoreTimestampError, match=rf"src-3@{records[20][0]} has timestamp .* in the future") as e:
        restore(kafka, cfg, rows, name, topic, records_per_txn=6)
    assert "\n" not in str(e.value)
    assert consume(kafka, topic) == wanted(records[:18])  # three whole transactions


def test_a_timestamp_the_broker_refuses_fails_with_one_line_and_nothing_visible(kafka, tmp_path):
    """A failed delivery still reaches the worker with only error reports asked for (delivery.report.only.error):
    the broker refuses records older than the topic's message.timestamp.before.max.ms; the restore stops with one
    line, and its transaction is aborted, so a read_committed consumer sees nothing."""
    records = expected_records(int(time.time() * 1000))  # CreateTimes from one hour ago to now
    cfg, rows = archive(tmp_path, records)
    topic, name = f"restored-{uuid.uuid4().hex[:8]}", f"r-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, config={"message.timestamp.before.max.ms": 30 * 60_000})
    refused = r"refused 6 record\(s\) as invalid: .*message.timestamp.before.max.ms"
    with pytest.raises(RestoreProduceError, match=refused) as e:
        restore(kafka, cfg, rows, name, topic, records_per_txn=6)
    assert "\n" not in str(e.value)
    assert consume(kafka, topic) == []
    assert read_progress({"bootstrap.servers": kafka.bootstrap_servers}, progress_group(name), topic, 0)[0] is None


def test_a_task_restores_several_partitions_with_one_admin_client_and_one_progress_consumer(kafka, tmp_path,
                                                                                            monkeypatch):
    """``restore_task`` given three destination partitions (the driver's task_groups): each gets every record
    once, through its own transactional producer (its own transactional.id: the fence), while the admin client
    and the progress group's consumer are made once for the task and closed at its end, and the task checks once
    that the progress group is idle and what the topic is; the next partition's
    producer runs its init_transactions while the partition before it is restored (ProducerStarts), and the
    partition's progress is read only after it. Real clients on the real broker, only counted and logged."""
    import confluent_kafka
    import confluent_kafka.admin

    from lakesink.executor.archive_tasks import PartitionJob, restore_task
    from lakesink.executor.readback import NO_CUT

    records = expected_records(int(time.time() * 1000))
    cfg, rows = archive(tmp_path, records)
    topic, name = create_topic(kafka, partitions=3), f"r-{uuid.uuid4().hex[:6]}"
    objs = tuple(ArchivedObject.from_row(r) for r in rows)
    jobs = [PartitionJob("src", SOURCE_PARTITION, topic, p, objs) for p in range(3)]
    made: dict[str, list] = {"Consumer": [], "AdminClient": [], "Producer": []}
    calls: list[tuple[int, str, str]] = []

    class Logged:
        def __init__(self, real, partition: int):
            self._real, self._partition = real, partition

        def __getattr__(self, attr):
            method = getattr(self._real, attr)
            if attr not in ("init_transactions", "commit_transaction"):
                return method

            def logged(*a, **kw):
                calls.append((self._partition, attr, "start"))
                try:
                    return method(*a, **kw)
                finally:
                    calls.append((self._partition, attr, "end"))
            return logged

    def counting(module, cls_name):
        base = getattr(module, cls_name)

        def make(*a, **kw):
            client = base(*a, **kw)
            if cls_name == "Producer":  # init and commit calls logged in order, by destination partition
                client = Logged(client, int(a[0]["transactional.id"].rsplit("-", 1)[1]))
            made[cls_name].append(client)
            return client

        monkeypatch.setattr(module, cls_name, make)

    counting(confluent_kafka, "Consumer")
    counting(confluent_kafka, "Producer")
    admin_init = confluent_kafka.admin.AdminClient.__init__

    def counted_admin(self, *a, **kw):  # (AdminClient's __init__ names its class through its module)
        admin_init(self, *a, **kw)
        made["AdminClient"].append(self)

    monkeypatch.setattr(confluent_kafka.admin.AdminClient, "__init__", counted_admin)
    asked: list[str] = []
    for method in ("list_consumer_groups", "list_topics"):  # the group's idle check, the topic's metadata
        real = getattr(confluent_kafka.admin.AdminClient, method)
        monkeypatch.setattr(confluent_kafka.admin.AdminClient, method,
                            lambda self, *a, _m=method, _r=real, **kw: asked.append(_m) or _r(self, *a, **kw))
    out = [json.loads(b.column(0)[0].as_py()) for b in restore_task(
        [0, 1, 2], jobs, task_parts(cfg), name, {"bootstrap.servers": kafka.bootstrap_servers}, NO_CUT,
        {"timeout_s": 30.0, "again": False})]
    assert [(r["id"], r["produced"]) for r in out] == [(0, N), (1, N), (2, N)]
    assert [len(made[k]) for k in ("AdminClient", "Consumer", "Producer")] == [1, 1, 3]
    assert sorted(asked) == ["list_consumer_groups", "list_topics"]  # once for the task, not per partition
    for p in (1, 2):  # started while the partition before it was restored: before that one's last commit ended
        last_commit = max(i for i, c in enumerate(calls) if c == (p - 1, "commit_transaction", "end"))
        assert calls.index((p, "init_transactions", "start")) < last_commit, calls
        # and each partition's first commit after its own init_transactions returned
        assert calls.index((p, "init_transactions", "end")) < calls.index((p, "commit_transaction", "start"))
    with pytest.raises(RuntimeError):  # closed when the task ended
        made["Consumer"][0].committed([confluent_kafka.TopicPartition(topic, 0)], timeout=1)
    for p in range(3):
        assert consume(kafka, topic, p) == wanted(records)
        progress, _meta = read_progress({"bootstrap.servers": kafka.bootstrap_servers}, progress_group(name), topic, p)
        assert progress == records[-1][0] + 1
