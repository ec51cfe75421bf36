"""Fencing: two runs of one job (concurrent, or a zombie that resumes late) never both commit.

Exactly one commit of a batch wins; the other run fails with FencedError and a message that says
what happened; the archive read through the manifest stays exactly-once, and an object the manifest
references is never silently replaced.
"""
from __future__ import annotations

import json
import re
import threading

import pytest
from support.faults import CallAt, Crash, RaiseAt
from support.archive_checks import (AVRO_SCHEMA, avro_values, base_config, check_exactly_once, json_payloads,
                                    manifest_rows, produce)

from lakesink import wiring
from lakesink.driver.archive import ArchivedObject, read_object
from lakesink.config import SinkConfig
from lakesink.errors import FencedError, ObjectChangedError
from lakesink.driver.sink import SinkJob
from lakesink.store import open_store


def _setup(kafka, s3, bucket, topic, per_partition=10, **over):
    kafka.create_topic(topic, partitions=2)
    sent = produce(kafka, topic, json_payloads(2 * per_partition), partition_of=lambda i: i % 2)
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic, **{"flush.size": "5", **over}))
    return cfg, sent


def _etags(spark, cfg) -> dict[str, str]:
    return {r.object_key: r.etag for r in manifest_rows(spark, cfg) if r.kind == "object"}


def _assert_store_matches_manifest(spark, cfg):
    """Every committed object still holds exactly the bytes (etag) the manifest recorded."""
    store = open_store(wiring.store_settings(cfg))
    for key, etag in _etags(spark, cfg).items():
        head = store.head(key)
        assert head is not None and head.etag == etag, f"{key}: etag {head and head.etag} != manifest {etag}"


def test_concurrent_runs_of_one_job_exactly_one_commits(spark, kafka, s3, bucket, topic_name):
    cfg, sent = _setup(kafka, s3, bucket, topic_name)
    outcomes: dict[str, object] = {}
    barrier = threading.Barrier(2)

    def go(name):
        try:
            job = SinkJob(spark, cfg, run_id=f"run-{name}")  # both create the manifest table: a race too
            barrier.wait(300)
            outcomes[name] = job.run_batch()
        except Exception as e:  # noqa: BLE001 - FencedError expected once; anything else is reported below
            barrier.abort()
            outcomes[name] = e

    threads = [threading.Thread(target=go, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    won = [n for n, o in outcomes.items() if not isinstance(o, Exception)]
    lost = [n for n, o in outcomes.items() if isinstance(o, Exception)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    err = outcomes[lost[0]]
    assert isinstance(err, FencedError), f"the losing run failed with {type(err).__name__}: {err}"
    assert cfg.name in str(err) and "nothing" in str(err), str(err)
    rows = manifest_rows(spark, cfg)
    assert {r.run_id for r in rows} == {f"run-{won[0]}"} and {r.batch_id for r in rows} == {0}
    check_exactly_once(spark, cfg, sent, "json")
    _assert_store_matches_manifest(spark, cfg)


@pytest.mark.parametrize("pause", ["after_plan", "before_resolve", "before_commit"])
def test_zombie_resuming_after_another_run_committed_is_fenced(spark, kafka, s3, bucket, topic_name, pause):
    """Run A stalls at ``pause`` (a GC pause, a lost network, a hung driver); run B does a whole batch
    and commits; then A resumes with its stale plan for the same batch id and must not commit."""
    cfg, sent = _setup(kafka, s3, bucket, topic_name)
    seen: dict[str, object] = {}

    def run_winner():
        seen["winner"] = winner.run_batch()
        seen["etags"] = _etags(spark, cfg)

    zombie = SinkJob(spark, cfg, run_id="run-zombie", hooks=None if pause == "after_plan" else CallAt(pause, run_winner))
    winner = SinkJob(spark, cfg, run_id="run-winner")

    if pause == "after_plan":
        real_plan = zombie.plan

        def stale_plan():
            planned = real_plan()
            run_winner()
            return planned
        zombie.plan = stale_plan

    with pytest.raises(FencedError) as exc:
        zombie.run_batch()
    assert seen["winner"].batch_id == 0 and seen["winner"].committed_rows == 4
    msg = str(exc.value)
    assert cfg.name in msg and "nothing" in msg, msg
    if pause == "after_plan":  # its uploads met committed objects: fenced before touching them
        assert "already committed in the manifest" in msg and f"topics/{topic_name}/partition=" in msg, msg
    else:  # the winner took the zombie's uploads for orphans and replaced them: the zombie's pre-commit
        # check sees it (or, had it raced past that check, the Delta transaction: txnVersion 0 was taken)
        assert "was replaced by another run" in msg or "batch 0" in msg, msg
    rows = manifest_rows(spark, cfg)
    assert {r.run_id for r in rows} == {"run-winner"}, "the zombie committed rows"
    assert _etags(spark, cfg) == seen["etags"], "the zombie changed what the manifest records"
    _assert_store_matches_manifest(spark, cfg)  # and never replaced a committed object
    check_exactly_once(spark, cfg, sent, "json")

    # the zombie object (or a fresh one) re-plans from the manifest: nothing left to do
    assert SinkJob(spark, cfg).run_batch().committed_rows == 0


def test_committed_object_replaced_out_of_band_is_detected(spark, kafka, s3, bucket, topic_name):
    cfg, _sent = _setup(kafka, s3, bucket, topic_name, **{"format.class": "json"})
    SinkJob(spark, cfg).run_batch()
    row = sorted((r for r in manifest_rows(spark, cfg) if r.kind == "object"), key=lambda r: r.object_key)[0]
    store = open_store(wiring.store_settings(cfg))
    fmt = wiring.value_format(cfg)
    obj = ArchivedObject.from_row(row)
    assert len(read_object(store, fmt, obj)) == row.record_count  # fine before

    original = s3.client().get_object(Bucket=bucket, Key=row.object_key)["Body"].read()
    s3.client().put_object(Bucket=bucket, Key=row.object_key, Body=original.replace(b'"id"', b'"ID"'))
    with pytest.raises(ObjectChangedError, match=re.escape(row.object_key)):
        read_object(store, fmt, obj)

    # the check is on content identity: restoring the original bytes makes the object readable again
    s3.client().put_object(Bucket=bucket, Key=row.object_key, Body=original)
    assert len(read_object(store, fmt, obj)) == row.record_count


def _first_pauses_while_second_resolves_and_dies(spark, cfg, cfg_second) -> tuple[SinkJob, SinkJob]:
    """Two runs of one batch: ``first`` pauses before its commit while ``second`` runs up to its own commit
    (resolving conflicts with ``first``'s uploads) and dies there."""
    second = SinkJob(spark, cfg_second, run_id="run-second", hooks=RaiseAt("before_commit"))

    def second_runs_and_dies():
        with pytest.raises(Crash):
            second.run_batch()
    first = SinkJob(spark, cfg, run_id="run-first", hooks=CallAt("before_commit", second_runs_and_dies))
    return first, second


def test_second_run_with_identical_bytes_adopts_an_in_flight_runs_objects(spark, kafka, s3, bucket, topic_name):
    """Replays of a deterministic config write the same bytes: the other run's object is kept, not replaced."""
    cfg, sent = _setup(kafka, s3, bucket, topic_name)
    first, _second = _first_pauses_while_second_resolves_and_dies(spark, cfg, cfg)
    first.run_batch()
    assert {r.run_id for r in manifest_rows(spark, cfg)} == {"run-first"}
    _assert_store_matches_manifest(spark, cfg)
    check_exactly_once(spark, cfg, sent, "json")


def test_avro_replays_are_byte_identical_and_adopted(spark, kafka, s3, bucket, topic_name):
    """Avro's sync marker comes from the object key, so a replayed Avro batch writes the same bytes (with random
    markers, as Confluent's writer draws them, `first` would find its objects replaced and commit nothing)."""
    kafka.create_topic(topic_name, partitions=2)
    sent = produce(kafka, topic_name, avro_values(20), partition_of=lambda i: i % 2)
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "flush.size": "5", "format.class": "avro", "value.schema": json.dumps(AVRO_SCHEMA)}))
    first, _second = _first_pauses_while_second_resolves_and_dies(spark, cfg, cfg)
    first.run_batch()
    assert {r.run_id for r in manifest_rows(spark, cfg)} == {"run-first"}
    _assert_store_matches_manifest(spark, cfg)
    check_exactly_once(spark, cfg, sent, "avro")


def test_second_run_replacing_an_in_flight_runs_object_before_it_commits(spark, kafka, s3, bucket, topic_name):
    # different gzip levels: the same keys, different bytes, so `second` replaces what `first` uploaded
    cfg, sent = _setup(kafka, s3, bucket, topic_name, **{"s3.compression.type": "gzip", "s3.compression.level": "0"})
    cfg9 = SinkConfig.from_dict({**cfg.as_dict(redact=False), "s3.compression.level": "9"})
    first, _second = _first_pauses_while_second_resolves_and_dies(spark, cfg, cfg9)

    # before committing, `first` re-checks its uploads: they were replaced, so it commits nothing
    with pytest.raises(FencedError, match=r"was replaced by another run .* committed nothing"):
        first.run_batch()
    assert manifest_rows(spark, cfg) == []
    # the next run takes both runs' leftovers for orphans, replaces them and commits exactly once
    SinkJob(spark, cfg, run_id="run-third").run_batch(flush_tail=True)
    assert {r.run_id for r in manifest_rows(spark, cfg)} == {"run-third"}
    _assert_store_matches_manifest(spark, cfg)
    check_exactly_once(spark, cfg, sent, "json")
