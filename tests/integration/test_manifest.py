"""The Delta manifest on s3a://: next offsets, one-transaction commits, fencing of a second writer."""
import threading

import pytest

from lakesink.manifest import Manifest, SideFile, advance_row, object_row
from lakesink.errors import FencedError


def _rows(topic, part, start, end, key=None):
    """One object row at ``key`` (with a .keys side file), or an advance row without a key."""
    if key is None:
        return [advance_row(topic, part, start, end, kafka_cluster_id="c1", topic_id="t1")]
    return [object_row(topic, part, start, end, first_offset=start, last_offset=end, record_count=end - start + 1,
                       encoded_partition=f"partition={part}", object_key=key, object_uri=f"s3://b/{key}",
                       side_files=(SideFile("keys", key + ".keys", "e", None, 1),), format="avro",
                       compression="null", size_bytes=1, etag="e", version_id=None, min_timestamp_ms=None,
                       max_timestamp_ms=None, kafka_cluster_id="c1", topic_id="t1")]


@pytest.fixture
def manifest(spark, bucket):
    m = Manifest(spark, f"s3a://{bucket}/manifest")
    m.ensure()
    m.ensure()  # idempotent
    return m


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


def test_second_commit_of_a_batch_is_fenced_and_adds_nothing(manifest):
    manifest.commit("job", 0, "run-a", _rows("t", 0, 0, 9, "k0"))
    with pytest.raises(FencedError, match="batch 0 was already committed"):
        manifest.commit("job", 0, "run-zombie", _rows("t", 0, 0, 9, "k0-zombie"))
    assert manifest.df().count() == 1
    # a stale batch id (below the stored txn version) is skipped by Delta too: also fenced
    manifest.commit("job", 1, "run-a", _rows("t", 0, 10, 19, "k1"))
    with pytest.raises(FencedError):
        manifest.commit("job", 0, "run-old", _rows("t", 0, 0, 9, "k-old"))
    assert manifest.df().count() == 2


def test_concurrent_commits_of_the_same_batch_exactly_one_wins(manifest):
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
    rows = manifest.df().collect()
    assert len(rows) == 1 and outcomes[rows[0].run_id] == "ok"


def test_warm_commit_takes_transaction_lookup_off_the_commit(spark, manifest):
    """Delta resolves txnAppId on every append; Manifest.warm_commit resolves it ahead of time, so the
    commit that follows launches fewer Spark jobs (and commits the same rows)."""
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
