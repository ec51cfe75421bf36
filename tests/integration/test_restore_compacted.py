"""restore --latest-per-key (issue #29 item 3) on a REAL compacted topic whose log the broker has partly compacted.

The module fixture creates a topic with ``cleanup.policy=compact`` (segments rolled every 100 ms,
``min.cleanable.dirty.ratio=0.01``), produces several versions of each key in rounds, tombstones for some keys and
values after a tombstone for one, waits for the log cleaner to compact the rolled segments (the newest versions
stay in the active segment, next to the older versions the cleaner kept), and archives the topic: the archive
itself has the holes compaction made. The expected result of a latest-per-key restore is computed from the
source log as the broker holds it; restores go through the Spark runner, the local runner, the CLI and a
SIGKILLed worker run again, each read back with ``isolation.level=read_committed``.

The archive holds the tombstones too (``behavior.on.null.values=write``: as Confluent's sink, their keys and
metadata go to side files under ``<topic>/tombstone/`` with no value object), so a deleted key comes back as its
tombstone, or not at all with ``--drop-tombstones``.
"""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from support.restore_jobs import object_spec_rows, run_restore_job
from support.archive_checks import base_config, consume, manifest_rows, run_cli, write_config

import lakesink
from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.errors import InvalidArgumentError
from lakesink.executor.latest import latest_per_key
from lakesink.executor.readback import ArchivedObject

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
KEYS = 12
PARTITIONS = 2
DELETED = (0, 2)  # tombstoned in round 3 and never set again
REVIVED = 1  # tombstoned in round 3, set again in round 4
LATE = (9, 10, 11)  # set again in round 5, which stays in the active (never cleaned) segment


def key(i: int) -> bytes:
    return b"key-%02d" % i


def produce_rounds(kafka, topic: str) -> int:
    """Rounds of versions per key and partition, each round in a segment of its own (segment.ms=100 rolls the
    segment at the next append); returns the number of records produced."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": True, "linger.ms": 5})
    n = 0
    for rnd in range(6):
        for part in range(PARTITIONS):
            for i in range(KEYS):
                if rnd == 3 and i in DELETED + (REVIVED,):
                    value = None
                elif rnd == 4 and i not in (REVIVED, 6, 7):
                    continue
                elif rnd == 5 and i not in LATE:
                    continue
                else:
                    value = b"p%d-%s-r%d" % (part, key(i), rnd)
                p.produce(topic, key=key(i), value=value, partition=part)
                n += 1
        assert p.flush(30) == 0
        time.sleep(0.3)  # > segment.ms: the next round's first append rolls the segment
    return n


def source_log(kafka, topic: str) -> dict[int, list[tuple[int, bytes, bytes | None]]]:
    """{partition: [(offset, key, value)]} as the broker holds the log now."""
    from support.archive_checks import consume

    return {part: [(o, k, v) for o, k, v, *_ in consume(kafka, topic, part, "read_uncommitted", offsets=True)]
            for part in range(PARTITIONS)}


def compacted(log: dict[int, list]) -> bool:
    """The cleaner has run over every rolled segment: no value of a deleted key is left (only its tombstone), and
    every partition's log has a hole between records it kept (a pass over the first rounds' segments alone removes
    a prefix, and leaves the rest of the log contiguous)."""
    holes = all(any(b - a > 1 for (a, *_), (b, *_) in zip(recs, recs[1:])) for recs in log.values())
    return holes and all(v is None for recs in log.values() for _o, k, v in recs if k in {key(i) for i in DELETED})


def freeze(kafka, topic: str, log: dict[int, list]) -> dict[int, list]:
    """Stop the cleaner (``cleanup.policy=delete``, nothing old enough to delete) so the log the archive is compared
    with is the log the sink reads (a cleaning pass after the check removed records between the two), and return
    it once two reads a second apart agree (a pass already running finishes first)."""
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    entry = ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    for f in admin.incremental_alter_configs([res]).values():
        f.result()
    deadline = time.monotonic() + 60
    while True:
        time.sleep(1)
        again = source_log(kafka, topic)
        if again == log:
            return log
        assert time.monotonic() < deadline, "the compacted topic's log kept changing for 60 s"
        log = again


@pytest.fixture(scope="module")
def archive(spark, kafka, s3):
    """(config, {partition: expected [(key, value)] of a latest-per-key restore}, the same with --drop-tombstones,
    produced, the source log)."""
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=PARTITIONS, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "86400000"})
    produced = produce_rounds(kafka, topic)
    deadline = time.monotonic() + 120  # the cleaner looks for dirty logs every log.cleaner.backoff.ms (15 s)
    log = source_log(kafka, topic)
    while not compacted(log):
        assert time.monotonic() < deadline, "the log cleaner did not compact the topic within 120 s"
        time.sleep(1)
        log = source_log(kafka, topic)
    log = freeze(kafka, topic, log)
    bucket = s3.create_bucket(f"compacted-{uuid.uuid4().hex[:10]}")
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic, **{
        "format.class": "bytearray", "flush.size": "4", "store.kafka.keys": "true",
        "behavior.on.null.values": "write"}))
    res = SinkJob(spark, cfg).run_batch(flush_tail=True)
    assert res.records == sum(len(v) for v in log.values())  # tombstones included
    expected = {p: [(k, v) for _o, k, v in latest_per_key(recs)] for p, recs in log.items()}
    live = {p: [(k, v) for _o, k, v in latest_per_key(recs, drop_tombstones=True)] for p, recs in log.items()}
    return cfg, expected, live, produced, log


def restored(kafka, topic: str) -> dict[int, list[tuple[bytes, bytes | None]]]:
    return {p: [(k, v) for k, v, *_rest in consume(kafka, topic, p)] for p in range(PARTITIONS)}


def test_the_archive_is_of_a_partly_compacted_log(spark, archive):
    cfg, expected, live, produced, log = archive
    objs = [ArchivedObject.from_row(r) for r in manifest_rows(spark, cfg) if r.kind == "object"]
    for part, recs in log.items():
        offsets = [o for o, _k, _v in recs]
        mine = [o for o in objs if o.kafka_partition == part]
        # the cleaner removed offsets: the archive's objects have holes (and the gaps view names them)
        assert len(offsets) < offsets[-1] + 1 and not all(o.contiguous for o in mine)
        assert sum(o.record_count for o in mine) == len(recs)
        # tombstones are archived as keys and metadata only (no value object), under the tombstone directory
        tombs = [o for o in mine if o.value_omitted]
        assert sum(o.record_count for o in tombs) == len([r for r in recs if r[2] is None]) > 0
        assert all("/tombstone/" in o.object_key and o.side("keys") for o in tombs)
        # and left several versions of some keys (the newest in the active segment): work for --latest-per-key
        assert len({k for _o, k, _v in recs}) < len(recs)
        # the source's final state: deleted keys absent, the revived and late keys at their newest value
        assert dict(live[part]) == {key(i): b"p%d-%s-r%d" % (part, key(i), 5 if i in LATE else 4
                                                              if i in (REVIVED, 6, 7) else 3)
                                    for i in range(KEYS) if i not in DELETED}
        assert dict(expected[part]) == {**dict(live[part]), **{key(i): None for i in DELETED}}
    assert sum(len(v) for v in log.values()) < produced


def test_latest_per_key_on_each_runner_then_a_rerun_produces_nothing(spark, kafka, archive, runner):
    cfg, expected, _live, _produced, log = archive
    dest = f"latest-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=PARTITIONS)
    rep = lakesink.restore(spark, cfg, to_topic=dest, latest_per_key=True, records_per_txn=3, runner=runner)
    assert restored(kafka, dest) == expected  # key -> value (deleted keys: their tombstone), source-offset order
    archived = sum(len(recs) for recs in log.values())
    assert rep.produced == sum(len(v) for v in expected.values())
    assert rep.superseded == archived - rep.produced and rep.superseded > 0 and rep.mode == "latest per key"
    again = lakesink.restore(spark, cfg, to_topic=dest, latest_per_key=True, runner=runner)
    assert (again.produced, again.superseded) == (0, 0) and again.skipped == archived  # covered, read no more
    plain = lakesink.restore(spark, cfg, to_topic=dest, runner=runner)  # superseded records count as covered
    assert plain.produced == 0
    assert restored(kafka, dest) == expected


def test_drop_tombstones_and_a_cut(spark, kafka, archive, runner):
    cfg, _expected, _live, _produced, log = archive
    dest = f"latest-cut-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=PARTITIONS)
    cut = 20  # as of the selection's end: the last record per key at or below offset 20
    rep = lakesink.restore(spark, cfg, to_topic=dest, to_offset=cut, latest_per_key=True, drop_tombstones=True,
                           runner=runner)
    want = {p: [(k, v) for o, k, v in latest_per_key([r for r in recs if r[0] <= cut], drop_tombstones=True)]
            for p, recs in log.items()}
    assert restored(kafka, dest) == want and rep.mode == "latest per key, no tombstones"
    assert rep.tombstones_dropped == 0  # every tombstone is after offset 20
    # the rest of the log later: each key's newer record goes after it, nothing twice
    lakesink.restore(spark, cfg, to_topic=dest, latest_per_key=True, runner=runner)
    full = {p: [(k, v) for o, k, v in latest_per_key(recs)] for p, recs in log.items()}
    got = restored(kafka, dest)
    for p in range(PARTITIONS):
        assert got[p][:len(want[p])] == want[p]
        assert {k: v for k, v in got[p]} == dict(full[p])  # a compacting consumer's view: the final state
        assert {k for k, v in got[p] if v is None} == {key(i) for i in DELETED}  # their tombstones, this time
        assert len(got[p]) == len(set(got[p]))


def test_cli_latest_per_key_dry_run_run_and_usage_errors(kafka, archive, tmp_path):
    cfg, _expected, live, _produced, _log = archive
    path = write_config(tmp_path, cfg.as_dict(redact=False))
    dest = f"latest-cli-{uuid.uuid4().hex[:8]}"
    rc, out = run_cli(["restore", "--config", path, "--to-topic", dest, "--latest-per-key", "--dry-run",
                       "--master", "local[1]"])
    assert rc == 0, out[-3000:]
    assert "(latest per key: it produces at most the records it reads)" in out
    kafka.create_topic(dest, partitions=PARTITIONS)
    rc, out = run_cli(["--format", "json", "restore", "--config", path, "--to-topic", dest, "--latest-per-key",
                       "--drop-tombstones", "--master", "local[1]"])
    assert rc == 0, out[-3000:]
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["mode"] == "latest per key, no tombstones" and doc["produced"] == sum(map(len, live.values()))
    assert doc["tombstones_dropped"] == len(DELETED) * PARTITIONS
    assert restored(kafka, dest) == live
    rc, out = run_cli(["restore", "--config", path, "--to-topic", dest, "--drop-tombstones", "--dry-run"])
    errors = [ln for ln in out.splitlines() if ln.startswith("lakesink:")]
    assert rc == 2 and errors == ["lakesink: error: --drop-tombstones needs --latest-per-key (a restore of every "
                                  "record keeps its tombstones)"], out[-3000:]


def test_an_archive_without_keys_is_refused_naming_why(spark, kafka, s3, archive, tmp_path):
    cfg, *_ = archive
    bucket = s3.create_bucket(f"nokeys-{uuid.uuid4().hex[:10]}")
    topic = cfg.topics[0]
    nokeys = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic, **{
        "format.class": "bytearray", "flush.size": "4", "behavior.on.null.values": "ignore"}))
    SinkJob(spark, nokeys).run_batch(flush_tail=True)
    for dry in (True, False):
        with pytest.raises(InvalidArgumentError, match=r"--latest-per-key needs each record's key, and \d+ selected "
                                                       r"object\(s\) were archived without a keys side file"):
            lakesink.restore(spark, nokeys, to_topic="never-created", latest_per_key=True, dry_run=dry)
    rc, out = run_cli(["restore", "--config", write_config(tmp_path, nokeys.as_dict(redact=False)), "--to-topic",
                       "never-created", "--latest-per-key", "--dry-run", "--master", "local[1]"])
    errors = [ln for ln in out.splitlines() if ln.startswith("lakesink:")]
    assert rc == 2 and len(errors) == 1 and "store.kafka.keys=false" in errors[0] and "Traceback" not in out, out


@pytest.mark.parametrize("fault", ["mid:2", "between:2"])
def test_sigkill_then_rerun_produces_each_kept_record_once(spark, kafka, archive, tmp_path, fault):
    cfg, expected, _live, _produced, _log = archive
    objs = [ArchivedObject.from_row(r) for r in manifest_rows(spark, cfg) if r.kind == "object"
            and r.kafka_partition == 0]
    rows = object_spec_rows(objs)
    dest, name = f"latest-kill-{uuid.uuid4().hex[:8]}", f"k-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(dest, partitions=1)

    def run(f: str):
        return run_restore_job(kafka, tmp_path, cfg, rows, name, dest, f, records_per_txn=2,
                               options={"latest_per_key": True})

    killed = run(fault)
    assert killed.returncode == -9, killed.stderr[-2000:]
    committed = 4 if fault == "between:2" else 2  # two kept records a transaction; mid:2 dies inside the second
    first = [(k, v) for k, v, *_ in consume(kafka, dest, 0)]
    assert first == expected[0][:committed]
    done = run("none")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["produced"] == len(expected[0]) - committed
    assert [(k, v) for k, v, *_ in consume(kafka, dest, 0)] == expected[0]
