"""``lakesink expire`` against the real services (Kafka, moto S3; local engine: expire runs no task, so neither
runner is involved; the archive is written by local workers), on a bucket with versioning off and on.

One archive per bucket kind: a 2-partition topic, partition 0's records two years old, partition 1's new, with keys
and headers side files (4 objects of 10 records). The test walks the life of one expire: the dry run changes
nothing; a run killed between its manifest commit and its deletions leaves every live row pointing at a stored
object (the expired objects are superseded, not missing); the next run finishes the deletions; the views, verify,
vacuum, the restore/read_archive selection and the offset proof all agree afterwards."""
from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest
from support.archive_checks import (base_config, json_payloads, produce, run_cli, sql_rows, stored_versions,
                                    write_config)

import lakesink
from lakesink.config import SinkConfig
from lakesink.driver.archive import split_objects
from lakesink.driver.expire import expire
from lakesink.driver.vacuum import vacuum
from lakesink.driver.verify import verify
from lakesink.hooks import Hooks
from lakesink import wiring
from lakesink.store import open_store, strip_etag

HERE = Path(__file__).parent
#: expire_job.py imports the KillAt hook as support.faults
CRASH_ENV = {"PYTHONPATH": os.pathsep.join(p for p in (str(HERE.parent), os.environ.get("PYTHONPATH", "")) if p)}

RECORDS, FLUSH = 40, 10
TWO_YEARS_AGO_MS = int((time.time() - 2 * 365 * 86400) * 1000)


class Killed(Exception):
    pass


class KillAfterCommit(Hooks):
    """Stands for a kill -9 between the manifest commit and the first deletion."""

    def driver(self, point: str) -> None:
        if point == "after_commit":
            raise Killed(point)


@pytest.fixture(scope="module", params=["unversioned", "versioned"])
def archive(request, kafka, s3, tmp_path_factory):
    bucket = s3.create_bucket(f"test-{uuid.uuid4().hex[:12]}")
    if request.param == "versioned":
        s3.client().put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    topic = f"t-{uuid.uuid4().hex[:10]}"
    kafka.create_topic(topic, partitions=2, config={"retention.ms": "-1"})  # the broker keeps the old records
    now_ms = int(time.time() * 1000)
    produce(kafka, topic, json_payloads(RECORDS), partition_of=lambda i: i % 2,
            timestamps=[TWO_YEARS_AGO_MS + i if i % 2 == 0 else now_ms for i in range(RECORDS)])
    raw = base_config(kafka, s3, bucket, topic, **{
        "flush.size": str(FLUSH), "store.kafka.keys": "true", "store.kafka.headers": "true",
        "keys.format.class": "json", "headers.format.class": "json"})
    assert [r.records for r in lakesink.run(None, raw, engine="local")] == [RECORDS]
    return {"raw": raw, "bucket": bucket, "topic": topic, "versioned": request.param == "versioned",
            "path": write_config(tmp_path_factory.mktemp("expire"), raw)}


def test_expire_dry_run_killed_run_and_rerun(archive, s3, tmp_path):
    cfg = SinkConfig.from_dict(archive["raw"])
    path, bucket = archive["path"], archive["bucket"]
    before = stored_versions(s3, bucket)
    old = {k for k in before if "+0+" in k.rsplit("/", 1)[-1]}
    assert len(old) == 8 and len(before) == 16  # 2 objects per partition, each with keys, headers, metadata files

    rc, out = run_cli(["expire", "--config", path, "--older-than", "400d"])  # dry run
    assert rc == 0, out
    assert "would expire 2 object(s), 20 record(s) whose newest record is older than 400d" in out
    assert "dry run: nothing changed" in out
    keyed = write_config(tmp_path, {**archive["raw"], "archive.retention.ms": str(400 * 86400 * 1000)})
    rc, out = run_cli(["expire", "--config", keyed])  # the config key's limit, dry run
    assert rc == 0 and "would expire 2 object(s), 20 record(s) whose newest record is older than " \
                      "archive.retention.ms=34560000000" in out, out
    assert stored_versions(s3, bucket) == before and sql_rows(path, "SELECT * FROM erasures") == []

    with pytest.raises(Killed):  # the manifest is committed, nothing is deleted yet
        expire(cfg, 400 * 86400, "400d", execute=True, hooks=KillAfterCommit())
    assert stored_versions(s3, bucket) == before
    live, _ = split_objects(None, cfg, wiring.manifest(cfg))  # what restore and read_archive would read
    assert sorted((o.kafka_partition, o.first_offset) for o in live) == [(1, 0), (1, 10)]
    # without a predicate the live-object rule runs in Python, with one in DuckDB's SQL: the very same objects
    assert split_objects(None, cfg, wiring.manifest(cfg), where="true") == (live, [])
    assert split_objects(None, cfg, wiring.manifest(cfg), where="kafka_partition = 1 AND first_offset = 10") == (
        [o for o in live if o.first_offset == 10], [o for o in live if o.first_offset != 10])

    rc, out = run_cli(["expire", "--config", path, "--older-than", "400d", "--execute"])
    assert rc == 0, out
    assert "expired 0 object(s)" in out and "finished deleting 2 object(s) an earlier expire committed" in out
    after = stored_versions(s3, bucket)
    assert set(after) == set(before) - old  # value objects and side files, every version of them
    assert all(n == 1 for n in after.values())

    # the audit: one expire, its criterion, 2 objects of 20 records; gaps explain the offsets the objects held
    (erasure,) = sql_rows(path, "SELECT * FROM erasures")
    assert (erasure["action"], erasure["objects"], erasure["records"]) == ("expired", 2, 20)
    assert erasure["predicate"].startswith("newest record older than 400d (before ")
    gaps = sql_rows(path, "SELECT kafka_partition, start_offset, end_offset, kind, reason FROM gaps ORDER BY 1, 2")
    assert [(g["kafka_partition"], g["start_offset"], g["end_offset"], g["kind"]) for g in gaps] == [
        (0, 0, 9, "expired"), (0, 10, 19, "expired")]
    assert all(g["reason"].startswith("expired: newest record older than 400d") for g in gaps)
    objects = sql_rows(path, "SELECT kafka_partition, first_offset FROM objects ORDER BY 1, 2")
    assert [(o["kafka_partition"], o["first_offset"]) for o in objects] == [(1, 0), (1, 10)]
    proof = sql_rows(path, """WITH spans AS (
        SELECT job, topic, kafka_partition, first_offset AS s, last_offset AS e FROM objects
        UNION ALL SELECT job, topic, kafka_partition, start_offset, end_offset FROM gaps WHERE kind <> 'filtered')
      SELECT c.kafka_partition, c.next_offset - min(spans.s) AS expected, sum(spans.e - spans.s + 1) AS accounted
      FROM committed_offsets c JOIN spans ON spans.job = c.job AND spans.topic = c.topic
        AND spans.kafka_partition = c.kafka_partition
      GROUP BY c.kafka_partition, c.next_offset ORDER BY 1""")
    assert [(p["expected"], p["accounted"]) for p in proof] == [(20, 20), (20, 20)]

    # verify reads the live objects only: no fault for the expired ones
    from lakesink.runners.local import LocalRunner

    with LocalRunner(1) as runner:
        rep = verify(cfg, runner=runner)
    assert rep.ok and rep.objects == 2 and rep.records_counted == 20, rep.faults
    # vacuum: nothing to delete and nothing unknown (the expired keys are gone, the rest referenced)
    vac = vacuum(None, cfg, retention_s=0)
    assert (vac.orphans, vac.unknown) == ([], [])
    # a second run finds nothing due and changes nothing
    rc, out = run_cli(["expire", "--config", path, "--older-than", "400d", "--execute"])
    assert rc == 0 and "expired 0 object(s)" in out and "finished deleting" not in out, out
    assert stored_versions(s3, bucket) == after and len(sql_rows(path, "SELECT * FROM erasures")) == 1


def test_a_bad_age_is_one_line_with_exit_2(archive):
    rc, out = run_cli(["expire", "--config", archive["path"], "--older-than", "soon"])
    assert rc == 2, out
    assert "lakesink: error: --older-than 'soon': expected an age like 400d" in out and "Traceback" not in out


def _live_filesstored_versions(cfg) -> int:
    """Assert every live object's value and side files are stored with the recorded ETag; their number."""
    store = open_store(wiring.store_settings(cfg))
    live, _ = split_objects(None, cfg, wiring.manifest(cfg))
    n = 0
    for o in live:
        for key, etag in [(o.object_key, o.etag)] + [(s["key"], s["etag"]) for s in o.side_files or ()]:
            head = store.head(key)
            assert head is not None and strip_etag(head.etag) == strip_etag(etag), f"{key}: live but not stored"
            n += 1
    return n


def test_sigkill_at_every_point_of_an_expire_then_a_rerun_finishes_it(kafka, s3, tmp_path):
    """A real kill -9 of an expire process at each point, one after the other on one archive (versioning on):
    after each, every live manifest row's files are stored; the rerun deletes what was committed, once."""
    bucket = s3.create_bucket(f"test-{uuid.uuid4().hex[:12]}")
    s3.client().put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    topic = f"t-{uuid.uuid4().hex[:10]}"
    kafka.create_topic(topic, partitions=2, config={"retention.ms": "-1"})
    now_ms = int(time.time() * 1000)
    produce(kafka, topic, json_payloads(RECORDS), partition_of=lambda i: i % 2,
            timestamps=[TWO_YEARS_AGO_MS + i if i % 2 == 0 else now_ms for i in range(RECORDS)])
    raw = base_config(kafka, s3, bucket, topic, **{"flush.size": str(FLUSH), "store.kafka.keys": "true"})
    assert [r.records for r in lakesink.run(None, raw, engine="local")] == [RECORDS]
    path, cfg = write_config(tmp_path, raw), SinkConfig.from_dict(raw)
    before = stored_versions(s3, bucket)
    old = {k for k in before if "+0+" in k.rsplit("/", 1)[-1]}
    assert _live_filesstored_versions(cfg) == len(before) == 12  # 4 objects with keys and metadata side files

    for fault in ("before_commit", "during_commit:20", "after_commit", "after_delete"):
        rc, out = run_cli([fault, path, "400d"], CRASH_ENV, command=[sys.executable, str(HERE / "expire_job.py")])
        assert rc == -signal.SIGKILL, f"{fault}: not killed (rc {rc}):\n{out[-2000:]}"
        _live_filesstored_versions(cfg)  # nothing live points at a missing object
        assert {k for k in stored_versions(s3, bucket) if k not in old} == set(before) - old  # partition 1 untouched
    rc, out = run_cli(["expire", "--config", path, "--older-than", "400d", "--execute"])
    assert rc == 0, out
    assert set(stored_versions(s3, bucket)) == set(before) - old and _live_filesstored_versions(cfg) == 6
    (erasure,) = sql_rows(path, "SELECT * FROM erasures")  # one commit of 2 tombstones, never a duplicate
    assert (erasure["objects"], erasure["records"]) == (2, 20)
