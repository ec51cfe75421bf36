"""`lakesink schema history` and `lakesink schema check` as subprocesses, without Spark: an archive written with
lakesink's own Avro/Parquet format writers on the moto S3 endpoint and a delta-rs manifest committed beside it;
the registry case against the real Schema Registry (Apicurio, Confluent API)."""
from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.manifest import object_row
from lakesink.manifest.deltars import DeltaRsManifest
from lakesink.objects import formats
from lakesink.objects.records import SinkRecord
from lakesink.schemas.avro import value_schema
from lakesink.store import open_store

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "long"}]}
V2 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "long"},
    {"name": "note", "type": "string", "default": ""}]}
V3_COMPATIBLE = {**V2, "fields": V2["fields"] + [{"name": "coupon", "type": ["null", "string"], "default": None}]}
V3_BREAKING = {**V2, "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "string"},
                                {"name": "note", "type": "string", "default": ""}]}


def config(s3, bucket: str, topic: str, **over) -> dict:
    return {"name": f"job-{topic}", "topics": topic, "flush.size": "10", "format.class": "avro",
            "s3.bucket.name": bucket, "s3.region": "us-east-1", "store.url": s3.endpoint_url,
            "aws.access.key.id": "testing", "aws.secret.access.key": "testing",
            "manifest.location": f"s3a://{bucket}/_lakesink/manifest",
            "kafka.bootstrap.servers": "127.0.0.1:9",  # never contacted: a schema check needs no broker
            "schema.compatibility": "BACKWARD", **over}


def archive(s3, cfg_dict: dict, objects: list[tuple[str, dict, int | None, int | None]]) -> None:
    """Write one object per (format, schema, schema id, version) with lakesink's format writers, 10 records each,
    and commit their manifest rows in one delta-rs commit."""
    cfg = SinkConfig.from_dict(cfg_dict)
    store = open_store(wiring.store_settings(cfg))
    topic = cfg.topics[0]
    rows = []
    for n, (fmt, schema, sid, version) in enumerate(objects):
        vs = value_schema(schema, f"{topic}-value" if sid is not None else None, sid, version)
        f = formats.create(fmt)
        buf = io.BytesIO()
        w = f.open_writer(buf)
        first = n * 10
        w.write_many([SinkRecord(topic, 0, o, 1_700_000_000_000 + o, None,
                                 {k["name"]: (o if k["type"] == "long" else "") for k in schema["fields"]},
                                 value_schema=vs) for o in range(first, first + 10)])
        w.close()
        key = f"topics/{topic}/partition=0/{topic}+0+{first:010d}{f.extension}"
        written = store.put_bytes(key, buf.getvalue())
        rows.append(object_row(topic, 0, first, first + 9, first_offset=first, last_offset=first + 9,
                               record_count=10, encoded_partition="partition=0", object_key=key,
                               object_uri=store.uri(key), side_files=(), format=fmt, compression=None,
                               size_bytes=len(buf.getvalue()), etag=written.etag, version_id=written.version_id,
                               min_timestamp_ms=1_700_000_000_000 + first, max_timestamp_ms=1_700_000_000_009 + first,
                               schema=vs))
    manifest = DeltaRsManifest(cfg.manifest_location, s3.s3_settings())
    manifest.ensure()
    manifest.commit(cfg.name, 0, "test-run", rows)


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakesink.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def write(tmp_path, name: str, content) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


@pytest.fixture
def archived(s3, bucket, topic_name, tmp_path):
    """A topic archived as v1 (Avro objects) then v2 (a Parquet object): (config path, topic, bucket)."""
    cfg = config(s3, bucket, topic_name)
    archive(s3, cfg, [("avro", V1, 1, 1), ("avro", V1, 1, 1), ("parquet", V2, 2, 2)])
    return write(tmp_path, "sink.json", cfg), topic_name, bucket


def test_history_text_and_json(archived):
    cfg, topic, _ = archived
    r = cli("schema", "history", "--config", cfg)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["topic", "subject", "version", "id", "fingerprint", "partitions", "first_offset",
                                "last_offset", "min_timestamp", "max_timestamp", "objects", "records"]
    assert [ln.split()[:4] + ln.split()[5:8] + ln.split()[-2:] for ln in lines[1:]] == [
        [topic, f"{topic}-value", "1", "1", "0", "0", "19", "2", "20"],
        [topic, f"{topic}-value", "2", "2", "0", "20", "29", "1", "10"]]
    r = cli("--format", "json", "schema", "history", "--config", cfg, "--topic", topic)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(e["version"], e["first_offset"], e["last_offset"], e["objects"]) for e in doc["schemas"]] == \
           [(1, 0, 19, 2), (2, 20, 29, 1)]
    assert doc["schemas"][0]["min_timestamp"] == "2023-11-14T22:13:20Z"


def test_check_compatible_text_and_json(archived, tmp_path):
    cfg, topic, bucket = archived
    schema = write(tmp_path, "v3.avsc", V3_COMPATIBLE)
    r = cli("schema", "check", "--config", cfg, "--schema", schema)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        f"topic {topic}, subject {topic}-value, mode BACKWARD: 2 earlier version(s)",
        f"  version 1: archive: s3://{bucket}/topics/{topic}/partition=0/{topic}+0+0000000010.avro",
        f"  version 2: archive: s3://{bucket}/topics/{topic}/partition=0/{topic}+0+0000000020.snappy.parquet",
        "compatible (BACKWARD; compared with version 2)"]
    assert r.stderr == ""
    r = cli("--format", "json", "schema", "check", "--config", cfg, "--schema", schema, "--mode", "FULL_TRANSITIVE")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["compatible"] is True and doc["mode"] == "FULL_TRANSITIVE" and doc["incompatibilities"] == []
    assert doc["compared"] == ["version 1", "version 2"] and doc["registry_checked"] is False
    assert [(v["version"], v["id"]) for v in doc["versions"]] == [(1, 1), (2, 2)]


def test_check_incompatible_names_field_types_and_rule(archived, tmp_path):
    cfg, topic, _ = archived
    schema = write(tmp_path, "bad.avsc", V3_BREAKING)
    r = cli("schema", "check", "--config", cfg, "--schema", schema)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "INCOMPATIBLE: 1 problem(s) (BACKWARD; compared with version 2)" in r.stdout
    assert ("  field 'amount': type changed long → string (BACKWARD: a reader with the new schema cannot read data "
            "written with version 2)") in r.stdout.splitlines()
    r = cli("--format", "json", "schema", "check", "--config", cfg, "--schema", schema, "--mode", "forward")
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["compatible"] is False
    assert [(i["rule"], i["against"], i["path"], i["old_type"], i["new_type"]) for i in doc["incompatibilities"]] == \
           [("FORWARD", "version 2", "amount", "long", "string")]


def test_bad_inputs_are_one_line_and_exit_2(archived, tmp_path):
    cfg, topic, _ = archived
    cases = [
        (["--schema", str(tmp_path / "missing.avsc")], f"schema file {tmp_path / 'missing.avsc'}: no such file"),
        (["--schema", write(tmp_path, "broken.avsc", '{"type": "record",')],
         f"schema file {tmp_path / 'broken.avsc'}: not valid JSON: "),
        (["--schema", write(tmp_path, "invalid.avsc", {"type": "record", "name": "R", "fields": [
            {"name": "a", "type": "nosuch"}]})],
         f"schema file {tmp_path / 'invalid.avsc'}: invalid Avro schema: unknown type 'nosuch'"),
        (["--schema", write(tmp_path, "ok.avsc", V2), "--topic", "no-such-topic"],
         f"--topic no-such-topic: job 'job-{topic}' does not archive this topic (its topics: {topic})"),
        (["--schema", str(tmp_path / "ok.avsc"), "--mode", "SIDEWAYS"], "--mode SIDEWAYS: expected one of NONE, "),
    ]
    for extra, message in cases:
        r = cli("schema", "check", "--config", cfg, *extra)
        assert r.returncode == 2, (extra, r.stdout, r.stderr)
        assert r.stdout == "" and len(r.stderr.splitlines()) == 1, (extra, r.stderr)
        assert r.stderr.startswith(f"lakesink: error: {message}"), (extra, r.stderr)
    r = cli("schema", "history", "--config", cfg, "--topic", "no-such-topic")
    assert r.returncode == 2 and r.stderr.startswith("lakesink: error: --topic no-such-topic: "), r.stderr


def test_notebook_api_returns_the_report(archived):
    import lakesink

    cfg, topic, _ = archived
    rep = lakesink.schema_check(cfg, V3_BREAKING, mode="FULL")
    assert isinstance(rep, lakesink.SchemaCheckReport) and not rep.compatible and rep.exit_code == 1
    assert [(i.rule, i.path) for i in rep.incompatibilities] == [("BACKWARD", "amount"), ("FORWARD", "amount")]
    hist = lakesink.schema_history(cfg, topic)
    assert [(e.version, e.objects) for e in hist.entries] == [(1, 2), (2, 1)]


def test_registry_versions_join_the_archive_and_an_unreachable_registry_warns(s3, bucket, topic_name, tmp_path,
                                                                             schema_registry, schema_registry_url):
    from confluent_kafka.schema_registry import Schema

    client = schema_registry.client()
    subject = f"{topic_name}-value"
    id1 = client.register_schema(subject, Schema(json.dumps(V1), "AVRO"))
    id2 = client.register_schema(subject, Schema(json.dumps(V2), "AVRO"))
    cfg = config(s3, bucket, topic_name, **{"schema.registry.url": schema_registry_url})
    archive(s3, cfg, [("avro", V1, id1, 1)])  # the archive holds v1 only; the registry knows v2 as well
    path = write(tmp_path, "sink.json", cfg)

    # FORWARD against the latest version, which only the registry knows: v2 cannot read data lacking 'amount'
    no_amount = {**V2, "fields": [V2["fields"][0], V2["fields"][2]]}
    r = cli("--format", "json", "schema", "check", "--config", path, "--schema", write(tmp_path, "c.avsc", no_amount),
            "--mode", "FORWARD")
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["registry_checked"] is True and doc["subject"] == subject and doc["warnings"] == []
    assert [(v["label"], v["id"]) for v in doc["versions"]] == [("version 1", id1), ("version 2", id2)]
    assert any(s.startswith("archive: s3://") for s in doc["versions"][0]["sources"])
    assert f"registry: subject {subject} version 1 (id {id1})" in doc["versions"][0]["sources"]
    assert doc["versions"][1]["sources"] == [f"registry: subject {subject} version 2 (id {id2})"]
    assert [i["message"] for i in doc["incompatibilities"]] == [
        "field 'amount' removed, and version 2 gives it no default (FORWARD: a reader with version 2 cannot read "
        "data written with the new schema)"]

    # BACKWARD (the config's mode) against the latest, the registry's version 2
    r = cli("schema", "check", "--config", path, "--schema", write(tmp_path, "v3.avsc", V3_COMPATIBLE))
    assert r.returncode == 0 and "compatible (BACKWARD; compared with version 2)" in r.stdout, r.stdout + r.stderr

    # an unreachable registry: a warning line, and the archive's versions are still checked
    dead = config(s3, bucket, topic_name, **{"schema.registry.url": "http://127.0.0.1:9/apis/ccompat/v7",
                                             "schema.registry.max.retries": "0"})
    r = cli("schema", "check", "--config", write(tmp_path, "dead.json", dead), "--schema",
            write(tmp_path, "bad.avsc", V3_BREAKING))
    assert r.returncode == 1, r.stdout + r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("lakesink: warning: ")]
    assert len(warnings) == 1 and "unreachable" in warnings[0] and "checked against the archive's versions only" \
        in warnings[0], r.stderr
    assert "compared with version 1)" in r.stdout and "field 'amount': type changed long → string" in r.stdout
