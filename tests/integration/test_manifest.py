"""The Delta manifest on s3a://: next offsets, one-transaction commits, fencing of a second writer.

Every behaviour test runs on both engines (``Manifest``: Spark, for catalog tables; ``DeltaRsManifest``:
delta-rs, the default for path tables); the interop tests write with one and read/append with the other.
"""
import threading

import pytest

from lakesink.errors import FencedError
from lakesink.manifest import Manifest, SideFile, advance_row, object_row
from lakesink.manifest.deltars import DeltaRsManifest


def _rows(topic, part, start, end, key=None):
    """One object row at ``key`` (with a .keys side file), or an advance row without a key."""
    if key is None:
        return [advance_row(topic, part, start, end, kafka_cluster_id="c1", topic_id="t1")]
    return [object_row(topic, part, start, end, first_offset=start, last_offset=end, record_count=end - start + 1,
                       encoded_partition=f"partition={part}", object_key=key, object_uri=f"s3://b/{key}",
                       side_files=(SideFile("keys", key + ".keys", "e", None, 1),), format="avro",
                       compression="null", size_bytes=1, etag="e", version_id=None, min_timestamp_ms=None,
                       max_timestamp_ms=None, kafka_cluster_id="c1", topic_id="t1")]


@pytest.fixture(params=["spark", "delta-rs"])
def manifest(request, spark, s3, bucket):
    loc = f"s3a://{bucket}/manifest"
    m = Manifest(spark, loc) if request.param == "spark" else DeltaRsManifest(loc, s3.s3_settings())
    m.ensure()
    m.ensure()  # idempotent
    return m


def _count(spark, m) -> int:
    return spark.read.format("delta").load(m.location).count()


def _collect(spark, m):
    return spark.read.format("delta").load(m.location).collect()


def test_empty_manifest_snapshot(manifest):
    snap = manifest.snapshot("job")
    assert snap.partitions == {} and snap.next_batch_id == 0


def test_commit_and_next_offsets(manifest):
    assert manifest.commit("job", 0, "run-a", _rows("t", 0, 0, 9, "topics/t/partition=0/t+0+0000000000.avro")
                           + _rows("t", 1, 0, 4)) == 2
    manifest.commit("job", 1, "run-a", _rows("t", 0, 10, 19, "topics/t/partition=0/t+0+0000000010.avro"))
    snap = manifest.snapshot("job")
    assert snap.next_batch_id == 2
    assert snap.partitions[("t", 0)].next_offset == 20
    assert snap.partitions[("t", 1)].next_offset == 5
    assert snap.partitions[("t", 0)].topic_id == "t1"
    assert manifest.snapshot("other-job").partitions == {}
    keys = manifest.committed_keys("job")
    assert "topics/t/partition=0/t+0+0000000010.avro" in keys and "topics/t/partition=0/t+0+0000000000.avro.keys" in keys
    asked = {"topics/t/partition=0/t+0+0000000000.avro.keys", "topics/t/partition=0/t+0+0000000010.avro",
             "topics/t/partition=0/t+0+0000000020.avro"}
    assert manifest.committed_owners(asked) == {k: {"job"} for k in asked - {"topics/t/partition=0/t+0+0000000020.avro"}}
    manifest.commit("other-job", 0, "run-b", _rows("t", 0, 0, 9, "topics/t/partition=0/t+0+0000000000.avro"))
    owners = manifest.committed_owners({"topics/t/partition=0/t+0+0000000000.avro", "nothing"})
    assert owners == {"topics/t/partition=0/t+0+0000000000.avro": {"job", "other-job"}}
    assert manifest.committed_owners(set()) == {}


def test_second_commit_of_a_batch_is_fenced_and_adds_nothing(spark, manifest):
    manifest.commit("job", 0, "run-a", _rows("t", 0, 0, 9, "k0"))
    with pytest.raises(FencedError, match="batch 0 was already committed"):
        manifest.commit("job", 0, "run-zombie", _rows("t", 0, 0, 9, "k0-zombie"))
    assert _count(spark, manifest) == 1
    # a stale batch id (below the stored txn version) is skipped by Delta too: also fenced
    manifest.commit("job", 1, "run-a", _rows("t", 0, 10, 19, "k1"))
    with pytest.raises(FencedError):
        manifest.commit("job", 0, "run-old", _rows("t", 0, 0, 9, "k-old"))
    assert _count(spark, manifest) == 2


def test_concurrent_commits_of_the_same_batch_exactly_one_wins(spark, manifest):
    outcomes = {}

    def go(run):
        try:
            manifest.commit("job", 0, run, _rows("t", 0, 0, 9, f"key-{run}"))
            outcomes[run] = "ok"
        except FencedError as e:
            outcomes[run] = f"fenced: {e}"

    threads = [threading.Thread(target=go, args=(r,)) for r in ("run-a", "run-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(v == "ok" for v in outcomes.values()) == [False, True], outcomes
    rows = _collect(spark, manifest)
    assert len(rows) == 1 and outcomes[rows[0].run_id] == "ok"


def test_warm_commit_takes_transaction_lookup_off_the_commit(spark, bucket):
    """(Spark engine.) Delta resolves txnAppId on every append; Manifest.warm_commit resolves it ahead of time, so the
    commit that follows launches fewer Spark jobs (and commits the same rows)."""
    manifest = Manifest(spark, f"s3a://{bucket}/manifest")
    manifest.ensure()
    tracker = spark.sparkContext.statusTracker()

    def jobs_of(fn):
        before = set(tracker.getJobIdsForGroup(None))
        fn()
        return len(set(tracker.getJobIdsForGroup(None)) - before)

    manifest.commit("warm-job", 0, "r", _rows("t", 0, 0, 9, "w0"))
    cold = jobs_of(lambda: manifest.commit("warm-job", 1, "r", _rows("t", 0, 10, 19, "w1")))
    manifest.warm_commit()
    warm = jobs_of(lambda: manifest.commit("warm-job", 2, "r", _rows("t", 0, 20, 29, "w2")))
    assert warm < cold, (warm, cold)
    assert manifest.snapshot("warm-job").partitions[("t", 0)].next_offset == 30


# ----------------------------------------------------------------------------- interop and races (delta-rs)

def test_one_table_written_and_read_by_both_engines(spark, s3, bucket):
    """delta-rs creates and commits; Spark reads and appends; delta-rs reads Spark's append and the
    reverse, with the same next offsets, fencing and column values either way."""
    loc = f"s3a://{bucket}/shared-manifest"
    rs, sp = DeltaRsManifest(loc, s3.s3_settings()), Manifest(spark, loc)
    rs.ensure()
    sp.ensure()  # sees delta-rs's table: nothing to create
    rs.commit("job", 0, "run-rs", _rows("t", 0, 0, 9, "k0"))
    sp.commit("job", 1, "run-sp", _rows("t", 0, 10, 19, "k1"))
    rs.commit("job", 2, "run-rs", _rows("t", 1, 0, 4))
    for m in (rs, sp):
        snap = m.snapshot("job")
        assert snap.next_batch_id == 3 and snap.partitions[("t", 0)].next_offset == 20
        assert snap.partitions[("t", 1)].next_offset == 5 and snap.partitions[("t", 0)].kafka_cluster_id == "c1"
        assert m.committed_keys("job") == {"k0", "k0.keys", "k1", "k1.keys"}
    # each engine fences a batch the other committed
    with pytest.raises(FencedError):
        sp.commit("job", 2, "zombie", _rows("t", 0, 20, 29, "kz"))
    with pytest.raises(FencedError):
        rs.commit("job", 1, "zombie", _rows("t", 0, 20, 29, "kz"))
    rows = sorted(_collect(spark, rs), key=lambda r: r.batch_id)
    assert [(r.batch_id, r.run_id, r.kind) for r in rows] == [(0, "run-rs", "object"), (1, "run-sp", "object"),
                                                               (2, "run-rs", "advance")]
    assert rows[0].side_files[0].key == "k0.keys" and rows[0].committed_at is not None
    hist = spark.sql(f"DESCRIBE HISTORY delta.`{loc}`").orderBy("version").collect()
    tags = [h.userMetadata for h in hist if h.userMetadata]
    assert len(tags) == 3 and all('"lakesink_job":"job"' in t for t in tags)
    # a table Spark created is appended to by delta-rs
    loc2 = f"s3a://{bucket}/spark-made"
    Manifest(spark, loc2).ensure()
    DeltaRsManifest(loc2, s3.s3_settings()).commit("job", 0, "r", _rows("t", 0, 0, 9, "k"))
    assert Manifest(spark, loc2).snapshot("job").partitions[("t", 0)].next_offset == 10


RACER = r"""
import json, os, sys, time
import deltalake
from lakesink.errors import FencedError
from lakesink.manifest import advance_row
from lakesink.manifest.deltars import DeltaRsManifest
from lakesink.store.settings import S3Settings

loc, s3, run, gate = sys.argv[1], S3Settings(**json.loads(sys.argv[2])), sys.argv[3], sys.argv[4]
real = deltalake.write_deltalake

def paused(*a, **kw):  # this writer has checked transaction_version(job): wait for the other one, then write
    open(gate + "." + run, "w").close()
    while not os.path.exists(gate + ".go"):
        time.sleep(0.01)
    return real(*a, **kw)

deltalake.write_deltalake = paused
try:
    DeltaRsManifest(loc, s3).commit("job", 0, run, [advance_row("t", 0, 0, 9, run)])
    print("ok")
except FencedError as e:
    print("fenced:", e)
"""


def test_two_processes_racing_one_batch_exactly_one_commits(s3, bucket, tmp_path):
    """Both writers pass the app-transaction check, pause, then write the same table version: S3's
    conditional create lets one in; the other re-checks, finds the batch committed and is fenced."""
    import json
    import subprocess
    import sys
    import time

    loc = f"s3a://{bucket}/raced"
    DeltaRsManifest(loc, s3.s3_settings()).ensure()
    st = s3.s3_settings()
    settings = json.dumps({"endpoint_url": st.endpoint_url, "access_key": st.access_key,
                           "secret_key": st.secret_key, "region": st.region, "path_style": st.path_style})
    gate = str(tmp_path / "gate")
    procs = {run: subprocess.Popen([sys.executable, "-c", RACER, loc, settings, run, gate], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True) for run in ("run-a", "run-b")}
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"gate.{r}").exists() for r in procs):
        assert time.monotonic() < deadline, "the writers never reached the commit"
        time.sleep(0.02)
    (tmp_path / "gate.go").touch()  # both have checked; release them together
    out = {}
    for run, p in procs.items():
        stdout, stderr = p.communicate(timeout=60)
        assert p.returncode == 0, stderr
        out[run] = stdout.strip()
    assert sorted(o.split(":")[0] for o in out.values()) == ["fenced", "ok"], out
    winner = next(r for r, o in out.items() if o == "ok")
    snap = DeltaRsManifest(loc, s3.s3_settings()).snapshot("job")
    assert snap.next_batch_id == 1 and snap.partitions[("t", 0)].next_offset == 10
    rows = DeltaRsManifest(loc, s3.s3_settings()).arrow(["run_id", "note"])
    assert rows.column("run_id").to_pylist() == [winner] and rows.column("note").to_pylist() == [winner]
