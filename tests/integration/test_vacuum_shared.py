"""Jobs sharing a bucket, ``topics.dir`` and topic: vacuum of one never lists or deletes the other's objects,
in one manifest and in two; a key another job owns is never replaced by a sink run either."""
from __future__ import annotations

import pytest
from support.faults import Crash, RaiseAt
from support.archive_checks import base_config, json_payloads, manifest_rows, produce, write_config

from lakesink import wiring
from lakesink import cli
from lakesink.config import load_config
from lakesink.errors import KeyConflictError
from lakesink.driver.sink import SinkJob
from lakesink.store import open_store
from lakesink.driver.vacuum import vacuum


def _crashed_batch(spark, cfg) -> None:
    """A batch of ``cfg`` that uploads its objects and dies before the commit: its objects are orphans."""
    with pytest.raises(Crash):
        SinkJob(spark, cfg, hooks=RaiseAt("before_commit")).run_batch()


def _jobs(kafka, s3, bucket, topic, tmp_path, *, shared_manifest: bool):
    """Job A writes JSON, job B ByteArray (``.bin``): same bucket, topics.dir and topic, distinct keys."""
    a = base_config(kafka, s3, bucket, topic, name="job-a", **{"flush.size": "5"})
    # Both jobs would write <base>.metadata.avro for the same offsets (side files are named from the key without
    # its value extension, as Confluent names .keys/.headers): one prefix holds one job's metadata side files.
    b = base_config(kafka, s3, bucket, topic, name="job-b", **{"flush.size": "5", "format.class": "bytearray",
                                                               "store.kafka.metadata": "false"})
    if not shared_manifest:
        b["manifest.location"] = f"s3a://{bucket}/_lakesink/manifest-b"
    return load_config(write_config(tmp_path, a, "a.json")), load_config(write_config(tmp_path, b, "b.json"))


@pytest.mark.parametrize("shared_manifest", [True, False], ids=["one-manifest", "two-manifests"])
def test_vacuum_never_touches_another_jobs_objects(spark, kafka, s3, bucket, topic_name, tmp_path, capsys,
                                                  shared_manifest):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(10))
    a, b = _jobs(kafka, s3, bucket, topic_name, tmp_path, shared_manifest=shared_manifest)
    store = open_store(wiring.store_settings(a))
    prefix = f"topics/{topic_name}/"

    SinkJob(spark, b).run_batch()  # job B commits 2 objects under the shared prefix
    b_committed = {o.key for o in store.list(prefix)}
    assert len(b_committed) == 2 and all(k.endswith(".bin") for k in b_committed)

    # job A has committed nothing yet: a vacuum of it deletes nothing of B's
    report = vacuum(spark, a, retention_s=0)
    assert report.orphans == [] and report.uploads == []
    listed_unknown = {o.key for o in report.unknown}
    assert listed_unknown == (set() if shared_manifest else b_committed)  # one manifest: B's rows protect them

    SinkJob(spark, a).run_batch()
    a_committed = {o.key for o in store.list(prefix)} - b_committed
    produce(kafka, topic_name, json_payloads(10, 10))
    _crashed_batch(spark, a)  # A's orphans
    _crashed_batch(spark, b)  # B's orphans
    everything = {o.key for o in store.list(prefix)}
    a_orphans = {k for k in everything - a_committed - b_committed if k.endswith((".json", ".metadata.avro"))}
    b_orphans = {k for k in everything - a_committed - b_committed if k.endswith(".bin")}
    assert len(a_orphans) == 4 and len(b_orphans) == 2

    report = vacuum(spark, a, retention_s=0)
    assert {o.key for o in report.orphans} == a_orphans
    assert {o.key for o in report.unknown} == b_orphans | (set() if shared_manifest else b_committed)
    assert all(o.owner == "job-b" for o in report.unknown)

    # the CLI says which objects are unknown and that they are not deleted, then deletes only A's orphans
    assert cli.main(["vacuum", "--config", str(tmp_path / "a.json"), "--retention", "0s", "--execute"]) == 0
    out = capsys.readouterr().out
    for key in b_orphans:
        assert f"unknown, not deleted: s3://{bucket}/{key} (" in out and "uploaded by job 'job-b'" in out, out
    for key in a_orphans:
        assert f"deleted s3://{bucket}/{key} (" in out, out
    assert {o.key for o in store.list(prefix)} == a_committed | b_committed | b_orphans

    # B's own vacuum still finds and deletes B's orphans, and never A's committed objects
    report = vacuum(spark, b, retention_s=0, execute=True)
    assert {o.key for o in report.orphans} == b_orphans
    assert {o.key for o in report.unknown} == (set() if shared_manifest else a_committed)
    assert {o.key for o in store.list(prefix)} == a_committed | b_committed
    assert len(manifest_rows(spark, a)) == 2 and len(manifest_rows(spark, b)) == 2


def test_named_unknown_objects_are_deleted_only_when_unreferenced(spark, kafka, s3, bucket, topic_name, tmp_path):
    """--delete-unknown names an object that is not this job's: deleted if no manifest row references it."""
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(5))
    a, b = _jobs(kafka, s3, bucket, topic_name, tmp_path, shared_manifest=True)
    store = open_store(wiring.store_settings(a))
    prefix = f"topics/{topic_name}/"
    SinkJob(spark, b).run_batch()
    b_committed = {o.key for o in store.list(prefix)}
    stray = f"{prefix}partition=0/notes.txt"
    s3.client().put_object(Bucket=bucket, Key=stray, Body=b"left by a person")

    report = vacuum(spark, a, retention_s=0)
    assert {o.key for o in report.unknown} == {stray} and report.unknown[0].owner is None
    rc = cli.main(["vacuum", "--config", str(tmp_path / "a.json"), "--retention", "0s", "--execute",
                   "--delete-unknown", f"s3://{bucket}/{stray}", *[a for k in b_committed for a in ("--delete-unknown", k)]])
    assert rc == 0
    assert {o.key for o in store.list(prefix)} == b_committed  # B's committed objects survive being named


def test_a_key_owned_by_another_job_is_never_replaced(spark, kafka, s3, bucket, topic_name, tmp_path):
    """Two jobs (two manifests) that would write the same keys: the second fails naming the owner and the
    first job's object keeps its bytes."""
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(5))
    a = load_config(write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, name="job-a",
                                                      **{"flush.size": "5"}), "a.json"))
    b = load_config(write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, name="job-b", **{
        "flush.size": "5", "manifest.location": f"s3a://{bucket}/_lakesink/manifest-b"}), "b.json"))
    SinkJob(spark, a).run_batch()
    store = open_store(wiring.store_settings(a))
    (key,) = [o.key for o in store.list(f"topics/{topic_name}/") if o.key.endswith(".json")]  # (+ .metadata.avro)
    before = store.head(key)
    # job B's identical layout collides on the key; even identical bytes are not adopted from another job
    with pytest.raises(KeyConflictError, match=r"uploaded by job 'job-a'.*not replaced.*nothing was committed"):
        SinkJob(spark, b).run_batch()
    after = store.head(key)
    assert (after.etag, after.owner) == (before.etag, "job-a")
    assert manifest_rows(spark, b) == []
