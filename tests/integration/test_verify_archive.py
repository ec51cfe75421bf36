"""``lakesink verify`` against the real services: an archive on moto's S3 with keys, headers and metadata side files,
checked whole on both runners (local worker processes and Spark), then damaged on S3 (an object replaced, one
truncated, one deleted, a side file deleted) and each fault named; the CLI's exit codes and JSON evidence report."""
from __future__ import annotations

import json

import pytest
from support.archive_checks import base_config, json_payloads, produce, run_cli, write_config

import lakesink
from lakesink.config import SinkConfig
from lakesink.driver.verify import verify

RECORDS, FLUSH = 40, 10


@pytest.fixture
def archived(spark, kafka, s3, bucket, topic_name):
    """A 2-partition topic of 40 keyed records with headers, archived with its keys, headers and metadata side
    files (4 objects of 10 records)."""
    kafka.create_topic(topic_name, partitions=2)
    produce(kafka, topic_name, json_payloads(RECORDS), keys=[f"k{i}".encode() for i in range(RECORDS)],
            partition_of=lambda i: i % 2)
    raw = base_config(kafka, s3, bucket, topic_name, **{
        "flush.size": str(FLUSH), "store.kafka.keys": "true", "store.kafka.headers": "true",
        "keys.format.class": "json", "headers.format.class": "json", "store.kafka.metadata": "true"})
    results = lakesink.run(spark, raw, engine="local")
    assert [r.records for r in results] == [RECORDS]
    return raw


def test_a_whole_archive_has_no_fault_on_either_runner(archived, runner, spark):
    rep = verify(SinkConfig.from_dict(archived), runner=runner, spark=spark)
    assert rep.ok and rep.faults == [] and rep.exit_code == 0
    assert (rep.objects, rep.records_counted, rep.runner) == (RECORDS // FLUSH, RECORDS, runner.name)
    assert rep.side_files == 3 * rep.objects  # keys, headers, metadata
    assert [(p.kafka_partition, p.first_offset, p.next_offset, p.records) for p in rep.partitions] == [
        (0, 0, 20, 20), (1, 0, 20, 20)]
    shallow = verify(SinkConfig.from_dict(archived), runner=runner, spark=spark, deep=False)
    assert shallow.ok and shallow.records_counted == 0


def _objects(s3, bucket: str) -> list[dict]:
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket)["Contents"]]
    values = sorted(k for k in keys if k.endswith(".json") and not k.endswith((".keys.json", ".headers.json"))
                    and "/_lakesink/" not in f"/{k}")
    return [{"value": k, "keys": k[: -len(".json")] + ".keys.json"} for k in values]


def test_each_kind_of_damage_is_named_on_either_runner(archived, runner, spark, s3, bucket):
    client = s3.client()
    objs = _objects(s3, bucket)
    assert len(objs) == 4
    replaced, truncated, deleted, lost_side = objs
    body = client.get_object(Bucket=bucket, Key=replaced["value"])["Body"].read()
    client.put_object(Bucket=bucket, Key=replaced["value"], Body=body.replace(b'"id"', b'"ID"'))  # same size
    client.put_object(Bucket=bucket, Key=truncated["value"], Body=body[: len(body) // 2])
    client.delete_object(Bucket=bucket, Key=deleted["value"])
    client.delete_object(Bucket=bucket, Key=lost_side["keys"])
    rep = verify(SinkConfig.from_dict(archived), runner=runner, spark=spark)
    got = {(f.kind, f.object_key) for f in rep.faults}
    assert got == {("object-etag-mismatch", replaced["value"]), ("object-etag-mismatch", truncated["value"]),
                   ("object-size-mismatch", truncated["value"]), ("missing-object", deleted["value"]),
                   ("missing-side-file", lost_side["value"])}, rep.faults
    assert rep.exit_code == 1 and rep.records_counted == 0  # the damaged objects are named, not read
    side = next(f for f in rep.faults if f.kind == "missing-side-file")
    assert lost_side["keys"] in side.detail and "(keys)" in side.detail


def test_the_cli_reports_evidence_and_exits_1_on_a_fault(archived, s3, bucket, tmp_path):
    path = write_config(tmp_path, archived)
    report = tmp_path / "evidence.json"
    rc, out = run_cli(["verify", "--config", path, "--report", str(report)])
    assert rc == 0, out
    data = json.loads(report.read_text())
    assert data["ok"] is True and data["records_counted"] == RECORDS and data["manifest_version"] >= 1
    assert data["runner"] == "local"  # a path manifest on a local master: no JVM
    assert f"job {archived['name']}: manifest version" in out and "no fault" in out
    s3.client().delete_object(Bucket=bucket, Key=_objects(s3, bucket)[0]["value"])
    rc, out = run_cli(["--format", "json", "verify", "--config", path, "--report", str(report)])
    assert rc == 1, out
    assert json.loads(report.read_text())["faults"][0]["kind"] == "missing-object"
    assert "missing-object" in out
