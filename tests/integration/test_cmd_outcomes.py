"""Issue #26 item 6 against the real services, each command as a subprocess: `lakesink status` of a job that never
ran (no manifest table yet; a manifest shared with another job that did run) is NEVER RUN, never OK, and
--max-lag judges it; `lakesink schema check` of a JSON archive says there was nothing to compare and exits 1
unless --allow-empty; `lakesink sink` with the AWS environment emptied says no credentials were found (exit 3),
not that the S3 endpoint is not reachable. The pure parts are in tests/unit/test_cmd_words.py (this file has a
basename of its own: pytest refuses two test files of one name)."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import types

import pytest
from support.archive_checks import base_config, json_payloads, produce, run_cli, write_config

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.manifest import advance_row, object_row
from lakesink.manifest.deltars import DeltaRsManifest
from lakesink.objects import formats
from lakesink.objects.records import SinkRecord
from lakesink.store import open_store

#: The AWS default credential chain emptied: no keys, no profile files, no instance metadata.
NO_AWS = {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
          "AWS_EC2_METADATA_DISABLED": "true"}


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakesink.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env)


# ------------------------------------------------------------------------------------- status: never run


@pytest.fixture
def waiting(kafka, s3, bucket, topic_name, tmp_path):
    """20 records on a one-partition topic and a job config for it that never ran: (config dict, path)."""
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(20))
    raw = base_config(kafka, s3, bucket, topic_name)
    return raw, write_config(tmp_path, raw)


@pytest.mark.timeout(300)
def test_status_of_a_job_that_never_ran_is_never_run_and_max_lag_judges_it(waiting, s3, tmp_path):
    raw, path = waiting
    job, manifest = raw["name"], raw["manifest.location"]

    # no manifest table yet
    r = cli("status", "--config", path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"job '{job}': NEVER RUN, UNHEALTHY (1 problem(s)); 1 partition(s), lag 20 record(s)" in r.stdout, r.stdout
    assert f"  no batch committed yet for job '{job}' (manifest {manifest}: no table there yet)" in r.stdout
    assert f"20 record(s) waiting and no batch committed yet for job '{job}'" in r.stdout
    assert ": OK" not in r.stdout and r.stderr == ""

    r = cli("status", "--config", path, "--max-lag", "5")
    assert r.returncode == 1 and "lag 20 > --max-lag 5" in r.stdout and "NEVER RUN" in r.stdout, r.stdout
    r = cli("status", "--config", path, "--max-lag", "100")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"job '{job}': NEVER RUN; 1 partition(s), lag 20 record(s)" in r.stdout, r.stdout

    # a manifest shared with another job that did run (on the same topic): still no row of this job
    other = SinkConfig.from_dict({**raw, "name": "another-job"})
    m = DeltaRsManifest(other.manifest_location, s3.s3_settings())
    m.ensure()
    m.commit(other.name, 0, "run-of-another-job", [advance_row(other.topics[0], 0, 0, 19)])
    r = cli("--format", "json", "status", "--config", path)
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert (doc["state"], doc["never_ran"], doc["healthy"], doc["total_lag"]) == ("NEVER RUN", True, False, 20), doc
    assert doc["note"] == f"no batch committed yet for job '{job}' (manifest {manifest}: no row of job '{job}')"
    # the other job is caught up and OK: the state is per job
    other_path = write_config(tmp_path, {**raw, "name": "another-job"}, "other.json")
    r = cli("status", "--config", other_path)
    assert r.returncode == 0 and "job 'another-job': OK; 1 partition(s), lag 0 record(s)" in r.stdout, r.stdout


# ------------------------------------------------------------------------------------- schema check: empty


def json_archive(s3, raw: dict, objects: int = 2) -> None:
    """``objects`` schemaless JSON objects of 10 records each and their manifest rows (one delta-rs commit)."""
    cfg = SinkConfig.from_dict(raw)
    store = open_store(wiring.store_settings(cfg))
    topic, rows = cfg.topics[0], []
    for n in range(objects):
        f, buf, first = formats.create("json"), io.BytesIO(), n * 10
        w = f.open_writer(buf)
        w.write_many([SinkRecord(topic, 0, o, 1_700_000_000_000 + o, None, {"id": o}) for o in range(first, first + 10)])
        w.close()
        key = f"topics/{topic}/partition=0/{topic}+0+{first:010d}{f.extension}"
        written = store.put_bytes(key, buf.getvalue())
        rows.append(object_row(topic, 0, first, first + 9, first_offset=first, last_offset=first + 9, record_count=10,
                               encoded_partition="partition=0", object_key=key, object_uri=store.uri(key),
                               side_files=(), format="json", compression=None, size_bytes=len(buf.getvalue()),
                               etag=written.etag, version_id=written.version_id,
                               min_timestamp_ms=1_700_000_000_000 + first, max_timestamp_ms=1_700_000_000_009 + first))
    m = DeltaRsManifest(cfg.manifest_location, s3.s3_settings())
    m.ensure()
    m.commit(cfg.name, 0, "test-run", rows)


@pytest.mark.timeout(300)
def test_schema_check_of_a_json_archive_has_nothing_to_compare_and_fails_unless_allowed(s3, bucket, topic_name,
                                                                                        tmp_path):
    no_broker = types.SimpleNamespace(bootstrap_servers="127.0.0.1:9")  # a schema check needs no broker
    raw = {**base_config(no_broker, s3, bucket, topic_name), "schema.compatibility": "BACKWARD"}
    json_archive(s3, raw)
    path = write_config(tmp_path, raw)
    schema = tmp_path / "order.avsc"
    schema.write_text(json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}))
    words = (f"NOTHING TO COMPARE (BACKWARD): no schema version of {topic_name} to compare with: its 2 archived "
             f"object(s) (json) carry no schema; ")

    r = cli("schema", "check", "--config", path, "--schema", str(schema))
    assert r.returncode == 1, r.stdout + r.stderr
    assert words + "not passed (--allow-empty accepts it)" in r.stdout, r.stdout
    assert "compatible (" not in r.stdout

    r = cli("schema", "check", "--config", path, "--schema", str(schema), "--allow-empty")
    assert r.returncode == 0, r.stdout + r.stderr
    assert words + "accepted (--allow-empty)" in r.stdout, r.stdout

    r = cli("--format", "json", "schema", "check", "--config", path, "--schema", str(schema))
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["passed"] is False and doc["compatible"] is True and doc["versions"] == []
    assert doc["nothing_to_compare"].startswith(f"no schema version of {topic_name} to compare with")


# ------------------------------------------------------------------------------------- sink: no credentials


@pytest.mark.timeout(300)
def test_sink_without_any_s3_credentials_says_so_with_exit_3(kafka, s3, bucket, topic_name, tmp_path):
    kafka.create_topic(topic_name, partitions=1)
    raw = base_config(kafka, s3, bucket, topic_name)
    del raw["aws.access.key.id"], raw["aws.secret.access.key"]
    path = write_config(tmp_path, raw)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") or k == "AWS_CA_BUNDLE"}
    rc, out = run_cli(["sink", "--config", path, "--once"], NO_AWS, cwd=tmp_path, env=env)
    errors = [line for line in out.splitlines() if line.startswith("lakesink: ")]
    assert rc == 3, out
    assert len(errors) == 1 and errors[0].startswith(f"lakesink: error: no S3 credentials found for S3 endpoint "
                                                     f"{s3.endpoint_url} (bucket '{bucket}'): "), out
    assert "not reachable" not in out and "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY unset" in errors[0]
    assert "Traceback" not in out
    assert not any(o.get("Key", "").startswith("_lakesink/") for o in
                   s3.client().list_objects_v2(Bucket=bucket).get("Contents", []))  # no manifest created
