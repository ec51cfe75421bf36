"""Orphans left by a failed batch: vacuum lists exactly them (dry run by default), deletes them with
``execute``, keeps anything younger than the retention, and never touches a committed object."""
from __future__ import annotations

import pytest
from support.faults import Crash, RaiseAt
from support.archive_checks import (archived_values, base_config, check_exactly_once, json_payloads, manifest_rows,
                                    produce, write_config)

from lakesink import wiring
from lakesink import cli
from lakesink.config import load_config
from lakesink.objects.formats.base import RecordView
from lakesink.driver.sink import SinkJob
from lakesink.store import open_store
from lakesink.driver.vacuum import vacuum


def test_vacuum_lists_and_deletes_exactly_the_orphans(spark, kafka, s3, bucket, topic_name, tmp_path, capsys):
    kafka.create_topic(topic_name, partitions=1)
    sent = produce(kafka, topic_name, json_payloads(10))
    cfg_file = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{
        "flush.size": "5", "store.kafka.keys": "true", "keys.format.class": "json", "key.decoder": "string"}))
    cfg = load_config(cfg_file)
    store = open_store(wiring.store_settings(cfg))
    prefix = f"topics/{topic_name}/"

    SinkJob(spark, cfg).run_batch()  # batch 0: [0, 4] and [5, 9], each with .keys and .metadata.avro side files
    committed = {o.key for o in store.list(prefix)}
    assert len(committed) == 6

    more = produce(kafka, topic_name, json_payloads(10, 10))  # offsets 10..19
    job = SinkJob(spark, cfg, hooks=RaiseAt("before_commit"))  # the driver dies before its commit
    with pytest.raises(Crash):
        job.run_batch()
    orphans = {o.key for o in store.list(prefix)} - committed
    assert orphans == {f"{prefix}partition=0/{topic_name}+0+{o:010d}{ext}"
                       for o in (10, 15) for ext in (".json", ".keys.json", ".metadata.avro")}, orphans
    assert len(manifest_rows(spark, cfg)) == 2

    # dry run: lists exactly the orphans, deletes nothing
    report = vacuum(spark, cfg, retention_s=0)
    assert {o.key for o in report.orphans} == orphans and not report.deleted
    assert {o.key for o in store.list(prefix)} == committed | orphans

    # everything is younger than a day: nothing is deletable, the orphans are counted as kept
    report = vacuum(spark, cfg, retention_s=24 * 3600)
    assert report.orphans == [] and report.uploads == [] and report.kept_recent == len(orphans)

    # the CLI prints them (dry run)
    assert cli.main(["vacuum", "--config", cfg_file, "--retention", "0s"]) == 0
    out = capsys.readouterr().out
    for key in orphans:
        assert f"would delete s3://{bucket}/{key} (" in out, out
    for key in committed:
        assert key not in out
    assert f"{len(orphans)} orphan object(s)" in out and "dry run: pass --execute to delete" in out
    assert {o.key for o in store.list(prefix)} == committed | orphans

    # execute: orphans gone, every committed object still there and readable through the manifest
    report = vacuum(spark, cfg, retention_s=0, execute=True)
    assert report.deleted and {o.key for o in report.orphans} == orphans
    assert {o.key for o in store.list(prefix)} == committed
    assert vacuum(spark, cfg, retention_s=0).orphans == []
    vals = archived_values(spark, cfg)[(topic_name, 0)]
    assert [v["id"] for v in vals] == list(range(10))
    assert len(archived_values(spark, cfg, RecordView.KEYS)[(topic_name, 0)]) == 10

    # and the next run archives the crashed batch's records exactly once
    SinkJob(spark, cfg).run_batch()
    check_exactly_once(spark, cfg, {0: sent[0] + more[0]}, "json")
    assert vacuum(spark, cfg, retention_s=0).orphans == []
