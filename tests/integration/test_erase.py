"""``lakesink erase --where`` against the real services (Kafka, moto S3), on buckets with versioning off and on.

The plan (which records the predicate selects) runs as tasks of the job's runner: ``lakesink erase`` (the CLI runs
here) on local workers, ``erase()`` without a runner on the driver, and one test compares both with Spark's tasks
(the route; the matching itself is unit-tested, tests/unit/test_erase_plan.py). The rewrite and the commits run on
the driver; the archives are written by local workers.

One JSON archive per bucket kind (2 partitions, 40 records, objects of 10, keys and headers side files) walks an
erase's life: the dry run changes nothing; the execute rewrites the matched objects under the same keys; the views
(objects, gaps, erasures, the offset proof), verify, the readers and Delta time travel agree afterwards. A module
archive per format checks every format's rewrite (value object and side files, Block-GZIP index) reads back whole.
A kill -9 at each point of the protocol, and a sink batch committed between an erase's plan and its commit, leave
the archive consistent; a rerun finishes the erase."""
from __future__ import annotations

import io
import json
import os
import signal
import sys
import uuid
from pathlib import Path

import fastavro
import pytest
from support.archive_checks import (base_config, json_payloads, produce, run_cli, sql_rows, stored_versions,
                                    write_config)

import lakesink
from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.driver.archive import split_objects
from lakesink.driver.erase import erase
from lakesink.driver.verify import verify
from lakesink.errors import ArchiveQueryError, StoreError
from lakesink.executor.archive_tasks import ObjectReader
from lakesink.executor.readback import ArchivedObject
from lakesink.hooks import Hooks
from lakesink.store import open_store, strip_etag

HERE = Path(__file__).parent
#: erase_job.py imports the KillAt hook as support.faults
CRASH_ENV = {"PYTHONPATH": os.pathsep.join(p for p in (str(HERE.parent), os.environ.get("PYTHONPATH", "")) if p)}

RECORDS, FLUSH = 40, 10
#: the docs' offset proof (docs/sql.md query 8), per partition
PROOF = """WITH spans AS (
    SELECT job, topic, kafka_partition, first_offset AS s, last_offset AS e FROM objects
    UNION ALL SELECT job, topic, kafka_partition, start_offset, end_offset FROM gaps
    WHERE kind NOT IN ('filtered', 'erased'))
  SELECT c.kafka_partition, c.next_offset - min(spans.s) AS expected, sum(spans.e - spans.s + 1) AS accounted
  FROM committed_offsets c JOIN spans ON spans.job = c.job AND spans.topic = c.topic
    AND spans.kafka_partition = c.kafka_partition
  GROUP BY c.kafka_partition, c.next_offset ORDER BY 1"""


def _bucket(s3, versioned: bool) -> str:
    bucket = s3.create_bucket(f"test-{uuid.uuid4().hex[:12]}")
    if versioned:
        s3.client().put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return bucket


def _json_archive(kafka, s3, versioned: bool, tmp_dir) -> dict:
    bucket = _bucket(s3, versioned)
    topic = f"t-{uuid.uuid4().hex[:10]}"
    kafka.create_topic(topic, partitions=2)
    produce(kafka, topic, json_payloads(RECORDS), partition_of=lambda i: i % 2)  # key k{i}, header i={i}
    raw = base_config(kafka, s3, bucket, topic, **{
        "flush.size": str(FLUSH), "store.kafka.keys": "true", "store.kafka.headers": "true",
        "keys.format.class": "json", "headers.format.class": "json"})
    assert [r.records for r in lakesink.run(None, raw, engine="local")] == [RECORDS]
    return {"raw": raw, "bucket": bucket, "topic": topic, "versioned": versioned, "path": write_config(tmp_dir, raw)}


@pytest.fixture(scope="module", params=["unversioned", "versioned"])
def archive(request, kafka, s3, tmp_path_factory):
    return _json_archive(kafka, s3, request.param == "versioned", tmp_path_factory.mktemp("erase"))


def _records(cfg) -> dict[tuple[int, int], tuple]:
    """What restore and read_archive read: {(partition, offset): (key, value, headers)} of the live objects."""
    reader = ObjectReader(wiring.task_parts(cfg))
    live, _ = split_objects(None, cfg, wiring.manifest(cfg))
    out = {}
    for o in live:
        for r in reader.records(o):
            assert (r.partition, r.offset) not in out
            out[(r.partition, r.offset)] = (r.key, r.value, r.headers)
    return out


def test_erase_dry_run_execute_audit_and_time_travel(archive, s3, kafka):
    cfg = SinkConfig.from_dict(archive["raw"])
    path, bucket = archive["path"], archive["bucket"]
    before_keys = stored_versions(s3, bucket)
    before = _records(cfg)
    assert len(before) == RECORDS and len(before_keys) == 16  # 4 objects with keys, headers and metadata files
    where = "key = 'k3' OR value.id = 4 OR exists(headers, h -> h.key = 'i' AND h.value = '38')"
    # k3: partition 1 offset 1; id 4: partition 0 offset 2; header i=38: partition 0 offset 19
    gone = {(1, 1), (0, 2), (0, 19)}

    rc, out = run_cli(["erase", "--config", path, "--where", where])  # dry run
    assert rc == 0, out
    assert "would erase 3 record(s) in 3 object(s) (40 record(s) in 4 object(s) scanned)" in out, out
    assert "dry run: nothing changed" in out
    assert stored_versions(s3, bucket) == before_keys and sql_rows(path, "SELECT * FROM erasures") == []
    manifest = wiring.manifest(cfg)
    old_version = manifest.version()

    rc, out = run_cli(["erase", "--config", path, "--where", where, "--execute"])
    assert rc == 0, out
    assert "erased 3 record(s) in 3 object(s)" in out and "3 object(s) rewritten and committed" in out, out
    after = stored_versions(s3, bucket)
    assert set(after) == set(before_keys)  # the same keys: rewritten in place, nothing added or left over
    assert all(n == 1 for n in after.values())  # versioned: the superseded versions are deleted for good

    # readers: every record but the erased ones, keys and headers still in step with the values
    got = _records(cfg)
    assert set(got) == set(before) - gone
    assert all(got[k] == before[k] for k in got)
    # the audit: one erase, its predicate, 3 objects, 3 records; gaps name the erased offsets; the proof sums
    (erasure,) = sql_rows(path, "SELECT * FROM erasures")
    assert (erasure["action"], erasure["objects"], erasure["records"], erasure["predicate"]) == (
        "erased", 3, 3, where)
    gaps = sql_rows(path, "SELECT kafka_partition, start_offset, end_offset, offsets, kind, reason FROM gaps "
                      "ORDER BY 1, 2")
    assert [(g["kafka_partition"], g["start_offset"], g["end_offset"], g["offsets"], g["kind"]) for g in gaps] == [
        (0, 2, 2, 1, "erased"), (0, 19, 19, 1, "erased"), (1, 1, 1, 1, "erased")]
    assert gaps[0]["reason"] == f"erased 1 record at offsets 2 where {where}"
    objects = sql_rows(path, "SELECT kafka_partition, first_offset, last_offset, record_count FROM objects ORDER BY 1, 2")
    assert [(o["kafka_partition"], o["first_offset"], o["last_offset"], o["record_count"]) for o in objects] == [
        (0, 0, 9, 9), (0, 10, 19, 9), (1, 0, 9, 9), (1, 10, 19, 10)]
    assert [(p["expected"], p["accounted"]) for p in sql_rows(path, PROOF)] == [(20, 20), (20, 20)]

    from lakesink.runners.local import LocalRunner

    with LocalRunner(1) as runner:  # the holes are no fault; the erased offsets are checked absent
        rep = verify(cfg, runner=runner)
    assert rep.ok and rep.objects == 4 and rep.records_counted == 37, rep.faults

    # restore: every record but the erased ones, in offset order, exactly once (a rerun produces nothing)
    from support.archive_checks import consume

    dest = f"erased-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=2)
    with LocalRunner(1) as runner:
        restored = lakesink.restore(None, cfg, to_topic=dest, runner=runner)
        assert restored.produced == RECORDS - len(gone)
        assert lakesink.restore(None, cfg, to_topic=dest, runner=runner).produced == 0
    for p in (0, 1):
        want = [before[k][:2] for k in sorted(before) if k[0] == p and k not in gone]
        assert [(k, v) for k, v, *_ in consume(kafka, dest, p)] == want

    # Delta time travel: the manifest before the erase names the old bytes, which are gone: a clear error
    import deltalake

    old_rows = deltalake.DeltaTable(manifest.uri, version=old_version,
                                    storage_options=manifest.storage_options).to_pyarrow_table().to_pylist()
    reader = ObjectReader(wiring.task_parts(cfg))
    old_objects = [ArchivedObject.from_row(r) for r in old_rows if r["kind"] == "object"]
    rewritten = [o for o in old_objects if any((o.kafka_partition, off) in gone
                                                for off in range(o.first_offset, o.last_offset + 1))]
    assert len(rewritten) == 3
    for o in rewritten:
        with pytest.raises(StoreError) as e:  # unversioned: ETag mismatch; versioned: the version is deleted
            reader.records(o)
        assert "etag" in str(e.value).lower() or "version" in str(e.value).lower(), e.value

    # a second run finds nothing more and changes nothing
    rc, out = run_cli(["erase", "--config", path, "--where", where, "--execute"])
    assert rc == 0 and "erased 0 record(s) in 0 object(s)" in out, out
    assert stored_versions(s3, bucket) == after and len(sql_rows(path, "SELECT * FROM erasures")) == 1


@pytest.mark.parametrize("archive", ["unversioned"], indirect=True)  # refused before any store call
def test_a_bad_predicate_is_one_line_with_exit_2(archive):
    for where, says in (("nope = 1", "nope"), ("offset + 1", "not a boolean"),
                        ("offset IN (SELECT 1)", "subquer")):
        rc, out = run_cli(["erase", "--config", archive["path"], "--where", where])
        assert rc == 2, out
        line = next(ln for ln in out.splitlines() if ln.startswith("lakesink: error: "))
        assert "--where" in line and says in line.lower(), out
        assert "Traceback" not in out


@pytest.mark.parametrize("archive", ["unversioned"], indirect=True)  # verify reads the recorded versions alike
def test_verify_names_an_erased_offset_an_object_still_holds(archive):
    """An ``erased`` row naming an offset a live object holds (what a botched rewrite would leave) is a fault."""
    cfg = SinkConfig.from_dict(archive["raw"])
    manifest = wiring.manifest(cfg)
    rows = manifest.arrow(job=cfg.name).to_pylist()
    from lakesink.manifest.rows import erased_row, live_objects

    target = next(r for r in live_objects(rows) if r["kafka_partition"] == 1 and r["first_offset"] == 10)
    from lakesink.runners.local import LocalRunner

    with LocalRunner(1) as runner:
        assert verify(cfg, runner=runner).ok
    fake = erased_row(target, [12], "a test")
    # a row of its own job, never a tombstone of the live object (another ETag): only the offsets are claimed
    import dataclasses

    manifest.commit_notes(cfg.name, "test", "erase", lambda: [dataclasses.replace(fake, etag="not-this-one")])
    with LocalRunner(1) as runner:
        rep = verify(cfg, runner=runner)
    assert [f.kind for f in rep.faults] == ["erased-record-present"], rep.faults
    assert "offsets 12 that an erase removed" in rep.faults[0].detail


# ----------------------------------------------------------------------------------------------- every format

FORMATS = ("json", "json-gzip", "avro", "parquet", "bytearray", "blockgzip")
SCHEMA = {"type": "record", "name": "Order", "namespace": "lakesink.test",
          "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string"}]}
PARSED = fastavro.parse_schema(SCHEMA)
N = 12  # records per topic, 6 per partition; flush.size 3 -> 2 objects per partition


def _value(fmt: str, i: int) -> bytes:
    if fmt in ("avro", "parquet"):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, PARSED, {"id": i, "note": "é" * (i % 3)})
        return buf.getvalue()
    if fmt.startswith("json"):
        return json.dumps({"id": i, "note": "é" * (i % 3)}).encode()
    if fmt == "bytearray":
        return bytes([0, 255, 13, 200]) + b"raw-%d" % i
    return ("line %d é" % i).encode()


@pytest.fixture(scope="module")
def format_archives(kafka, s3):
    """{format: SinkConfig}: one topic per format sunk into one bucket (versioning on) and one manifest."""
    bucket = _bucket(s3, True)
    out = {}
    for fmt in FORMATS:
        topic = f"src-{fmt}-{uuid.uuid4().hex[:6]}"
        kafka.create_topic(topic, partitions=2)
        produce(kafka, topic, [_value(fmt, i) for i in range(N)], keys=[b"key-%d" % i for i in range(N)],
                partition_of=lambda i: i % 2)
        raw = base_config(kafka, s3, bucket, topic, **{"flush.size": "3", "store.kafka.keys": "true"})
        raw["format.class"] = fmt.split("-")[0]
        if fmt == "json-gzip":  # the keys file gzipped too
            raw.update({"s3.compression.type": "gzip", "keys.format.class": "json"})
        if fmt != "bytearray":  # ByteArrayFormat cannot hold headers (Confluent refuses it too)
            raw.update({"store.kafka.headers": "true", "headers.format.class": "json"})
        else:
            raw["value.decoder"] = "bytes"
        if fmt in ("avro", "parquet"):
            raw["value.schema"] = json.dumps(SCHEMA)  # bare Avro datums (no registry)
        if fmt == "blockgzip":  # objects without a record-metadata file: erase writes one
            raw["store.kafka.metadata"] = "false"
        assert [r.records for r in lakesink.run(None, raw, engine="local")] == [N], fmt
        out[fmt] = SinkConfig.from_dict(raw)
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_is_rewritten_in_its_format(format_archives, fmt):
    cfg = format_archives[fmt]
    before = _records(cfg)
    # key-2: partition 0 offset 1 (inside an object); key-5 and key-7: partition 1 offsets 2 and 3 (an object's
    # last record and the next one's first)
    rep = erase(cfg, "key IN ('key-2', 'key-5', 'key-7')", execute=True)
    assert (rep.records, rep.committed) == (3, 3), rep
    got = _records(cfg)
    assert set(got) == set(before) - {(0, 1), (1, 2), (1, 3)}
    assert all(got[k] == before[k] for k in got)  # values, keys and headers still in step
    store = open_store(wiring.store_settings(cfg))
    live, _ = split_objects(None, cfg, wiring.manifest(cfg))
    for o in live:
        data = store.read(o.object_key)
        assert strip_etag(store.head(o.object_key).etag) == strip_etag(o.etag)
        if fmt == "avro":  # a plain Avro container file, with the schema and codec it had
            reader = fastavro.reader(io.BytesIO(data))
            assert reader.codec == "null" and reader.writer_schema["name"] == "lakesink.test.Order"
            assert len(list(reader)) == o.record_count
        elif fmt == "parquet":
            import pyarrow.parquet as pq

            assert pq.read_table(io.BytesIO(data)).num_rows == o.record_count
        elif fmt == "json-gzip":
            import gzip

            assert len(gzip.decompress(data).splitlines()) == o.record_count
        elif fmt == "blockgzip":  # its index counts the records it holds
            index = next(s for s in o.side_files if s["view"] == "index")
            chunks = json.loads(store.read(index["key"]))["chunks"]
            assert sum(c["num_records"] for c in chunks) == o.record_count
            assert any(s["view"] == "metadata" for s in o.side_files) == (o.record_count < o.last_offset -
                                                                           o.first_offset + 1)
    from lakesink.runners.local import LocalRunner

    with LocalRunner(1) as runner:
        rep = verify(cfg, runner=runner)
    assert rep.ok and rep.records_counted == N - 3, rep.faults


def test_the_plan_runs_as_tasks_of_spark_and_of_local_workers(format_archives, spark):
    """The same plan from Spark's tasks, local workers' and the driver's: the manifest rules partition 0 out, the
    predicate reads keys and decoded Parquet values (keys the format test erases are not used)."""
    from lakesink.runners.local import LocalRunner
    from lakesink.runners.spark import SparkRunner

    cfg = format_archives["parquet"]
    where = "partition = 1 AND (key IN ('key-9', 'key-4') OR value.id = 11)"  # key-4 is in partition 0

    def found(rep):
        return [(m.row["object_key"], m.offsets, m.records, m.keep) for m in rep.matched], rep.pruned, rep.records

    driver = found(erase(cfg, where))
    with LocalRunner(2) as local:
        assert found(erase(cfg, where, runner=local)) == driver
        with pytest.raises(ArchiveQueryError, match="nope"):  # a task's error comes back as its class (exit 2)
            erase(cfg, "partition = 1 AND nope = 1", runner=local)
    assert found(erase(cfg, where, runner=SparkRunner(spark))) == driver
    with pytest.raises(ArchiveQueryError, match="nope"):
        erase(cfg, "partition = 1 AND nope = 1", runner=SparkRunner(spark))
    (matched,), pruned, records = driver
    assert (matched[1], pruned, records) == ([4, 5], 2, 2)  # partition 1 offsets 4 (key-9) and 5 (id 11)


# ------------------------------------------------------------------------------------------------ crash and race


def _consistent(cfg) -> dict[tuple[int, int], tuple]:
    """Every live object reads back as its manifest row says (ETag, count, side files): what a reader sees."""
    return _records(cfg)


@pytest.mark.parametrize("versioned", [False, True], ids=["unversioned", "versioned"])
def test_sigkill_at_every_point_of_an_erase_then_a_rerun_finishes_it(kafka, s3, tmp_path, versioned):
    """A real kill -9 of an erase process at each point, one run after the other on one archive: each later run
    first finishes what the killed one committed an intent for. Versioned: readers read the version the manifest
    recorded, so every point reads consistently; unversioned: between a replacement and its commit a reader of that
    object gets an ETag-mismatch error (never the erased records), until the rerun commits it."""
    a = _json_archive(kafka, s3, versioned, tmp_path)
    cfg, path, bucket = SinkConfig.from_dict(a["raw"]), a["path"], a["bucket"]
    before, keys = _records(cfg), set(stored_versions(s3, bucket))
    where = "key IN ('k3', 'k4')"  # partition 1 offset 1, partition 0 offset 2
    gone = {(1, 1), (0, 2)}
    # (a kill while a commit is in flight is expire's test: both commit through the same commit_notes)
    for fault in ("after_stage", "after_intent", "after_replace", "after_commit"):
        rc, out = run_cli([fault, path, where], CRASH_ENV, command=[sys.executable, str(HERE / "erase_job.py")])
        assert rc == -signal.SIGKILL, f"{fault}: not killed (rc {rc}):\n{out[-2000:]}"
        assert set(stored_versions(s3, bucket)) == keys  # the same keys: nothing lost, nothing added
        if fault == "after_replace" and not versioned:
            with pytest.raises(StoreError, match="etag"):  # replaced, not yet committed: a clear error
                _consistent(cfg)
            continue
        got = _consistent(cfg)
        assert set(got) in (set(before), set(before) - gone), fault  # old or new, as the manifest says
        assert all(got[k] == before[k] for k in got)
    rc, out = run_cli(["erase", "--config", path, "--where", where, "--execute"])
    assert rc == 0, out
    got = _consistent(cfg)
    assert set(got) == set(before) - gone and all(got[k] == before[k] for k in got)
    (erasure,) = sql_rows(path, "SELECT * FROM erasures")  # committed once, never twice
    assert (erasure["objects"], erasure["records"]) == (2, 2)
    assert all(n == 1 for n in stored_versions(s3, bucket).values())  # versioned: old versions deleted by the rerun


class SinkBetween(Hooks):
    """Runs a sink batch of new records between an erase's plan (and staging) and its commits."""

    def __init__(self, kafka, raw: dict, topic: str):
        self.kafka, self.raw, self.topic = kafka, raw, topic

    def driver(self, point: str) -> None:
        if point == "after_stage":
            produce(self.kafka, self.topic, json_payloads(20, start=RECORDS), partition_of=lambda i: i % 2,
                    keys=[b"k3"] * 20)
            assert [r.records for r in lakesink.run(None, self.raw, engine="local")] == [20]


def test_a_sink_committing_between_plan_and_commit_is_not_damaged(kafka, s3, tmp_path):
    a = _json_archive(kafka, s3, False, tmp_path)
    cfg, path = SinkConfig.from_dict(a["raw"]), a["path"]
    before = _records(cfg)
    rep = erase(cfg, "key = 'k3'", execute=True, hooks=SinkBetween(kafka, a["raw"], a["topic"]))
    assert (rep.records, rep.committed) == (1, 1)
    got = _records(cfg)
    # the planned erase is done; the records the sink archived meanwhile (planned after: key k3 too) are intact
    assert set(got) == (set(before) - {(1, 1)}) | {(p, o) for p in (0, 1) for o in range(20, 30)}
    assert sum(1 for v in got.values() if v[0] == b"k3") == 20
    offsets = sql_rows(path, "SELECT kafka_partition, next_offset FROM committed_offsets ORDER BY 1")
    assert [(o["kafka_partition"], o["next_offset"]) for o in offsets] == [(0, 30), (1, 30)]
    assert [(p["expected"], p["accounted"]) for p in sql_rows(path, PROOF)] == [(30, 30), (30, 30)]
    # the sink resumes where it was: nothing new, nothing archived twice
    assert [r.records for r in lakesink.run(None, a["raw"], engine="local")] == [0]
    with pytest.raises(ArchiveQueryError):
        erase(cfg, "key = ", execute=False)
