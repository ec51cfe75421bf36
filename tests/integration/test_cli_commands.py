"""Every `lakesink` subcommand as a real subprocess on a valid input: output and exit status.

Cold Spark subprocesses are expensive here (~20-40 s each on 2 cores), so there are three: one
``sink`` (json mode; its text rendering is covered by tests/unit/test_cli.py and the text-mode runs in
test_sink_cli.py / test_secrets.py), one ``vacuum`` dry run on the same job, and the ``demo``.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import pytest
from support.archive_checks import base_config, json_payloads, produce, run_cli, write_config
from support.noise import noise_lines

from lakesink.driver.sink import BatchResult


def _json_lines(out: str) -> list[dict]:
    """The JSON documents in a combined stdout+stderr capture (Spark/log4j lines are not JSON)."""
    docs = []
    for line in out.splitlines():
        if line.startswith("{"):
            try:
                docs.append(json.loads(line))
            except ValueError:
                pass
    return docs


@pytest.mark.timeout(1200)  # ~1-2 min normally; two cold Spark drivers on a loaded 2-core box take much longer
def test_check_sink_json_then_vacuum_dry_run(kafka, s3, bucket, topic_name, tmp_path):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(25))
    raw = base_config(kafka, s3, bucket, topic_name, **{"flush.size": "10"})
    cfg_file = write_config(tmp_path, raw)
    job = raw["name"]

    # check: valid config, text and json
    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "check", cfg_file], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"{cfg_file}: OK (job {job!r})"] and r.stderr == ""
    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "--format", "json", "check", cfg_file],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["name"] == job and doc["topics"] == [topic_name] and doc["flush_size"] == 10

    # sink --once --flush-tail in json mode: one JSON object for the one batch
    t0 = time.monotonic()
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    rc, out = run_cli(["--format", "json", "sink", "--config", cfg_file, "--once", "--flush-tail",
                       "--master", "local[1]"], timeout=540, cwd=workdir)
    sink_s = time.monotonic() - t0
    assert list(workdir.iterdir()) == []  # no spark-warehouse/, metastore_db/ or derby.log left behind
    assert rc == 0, out[-3000:]
    assert "Traceback" not in out and "lakesink: error" not in out, out[-3000:]
    batches = _json_lines(out)
    assert len(batches) == 1, out[-3000:]
    b = batches[0]
    assert set(b) == {"batch_id", "run_id", "objects", "records", "bytes", "committed_rows", "s3_retries", "seconds",
                      "partitions", "records_read", "metrics_warning", "dead_lettered", "poll", "committed", "note"}
    assert (b["committed"], b["note"]) == (True, None)
    assert (b["partitions"], b["records_read"], b["metrics_warning"]) == (1, 25, None)
    assert b["s3_retries"] == 0
    assert b["batch_id"] == 0 and b["records"] == 25 and b["objects"] == 3  # 10 + 10 + a flushed tail of 5
    assert b["bytes"] > 0 and b["committed_rows"] >= 1 and isinstance(b["run_id"], str) and b["run_id"]
    assert all(isinstance(v, float) for v in b["seconds"].values()) and b["seconds"]
    # the first batch's phases begin with the cold start, in order; the local engine (the default here: no Spark)
    # has no session to wait for (tests/integration/test_sink_cli.py has the Spark engine's `session` phase)
    assert list(b["seconds"]) == ["start", "config", "init", "plan", "archive", "commit"], b["seconds"]
    # the text mode prints the same data as BatchResult.summary()
    text = BatchResult(**{k: v for k, v in b.items() if k not in ("partitions", "committed", "note")}).summary()
    assert text.startswith(f"batch 0: 3 objects, 25 records, {b['bytes']} bytes, {b['committed_rows']} manifest rows (")

    # an object of this job that no manifest row references (a crashed upload), for vacuum to find
    orphan = f"topics/{topic_name}/partition=0/{topic_name}+0+0000000099.json"
    s3.client().put_object(Bucket=bucket, Key=orphan, Body=b'{"id": 99}\n', Metadata={"lakesink-job": job})

    # vacuum dry run on the same job, text mode: the report's lines + the dry-run hint, nothing deleted
    t0 = time.monotonic()
    rc, out = run_cli(["vacuum", "--config", cfg_file, "--retention", "0s", "--master", "local[1]"],
                      timeout=540)
    vacuum_s = time.monotonic() - t0
    assert rc == 0, out[-3000:]
    lines = out.splitlines()
    assert f"would delete s3://{bucket}/{orphan} (11 bytes)" in lines, out[-3000:]
    assert ("1 orphan object(s), 0 open upload(s), 0 unknown object(s) not deleted; "
            "0 uncommitted object(s) younger than the retention kept") in lines
    assert "dry run: pass --execute to delete" in lines
    assert sum(1 for ln in lines if ln.startswith("would delete ")) == 1  # committed objects are never listed
    assert s3.client().head_object(Bucket=bucket, Key=orphan)["ContentLength"] == 11
    print(f"sink {sink_s:.0f}s, vacuum {vacuum_s:.0f}s")


@pytest.mark.timeout(660)
def test_demo():
    """The demo starts its own broker + S3 endpoint and archives on the engine `lakesink sink` picks on one machine
    (local worker processes: no JVM besides the broker), then queries the manifest with `lakesink sql`'s DuckDB route."""
    t0 = time.monotonic()
    rc, out = run_cli(["demo", "--records", "300"], timeout=600)
    assert rc == 0, out[-4000:]
    for want in ("== local stack up in ", "== produced 300 orders to topic 'orders' (3 partitions)",
                 "== engine: local worker processes (no JVM)",
                 "== batch 1 (flush.size=100; tails below 100 stay uncommitted): batch ",
                 "== batch 3 (nothing new: exactly once, nothing re-archived): 0 rows committed",
                 "== manifest query:", "== OK: 300 of 300 records archived exactly once in "):
        assert want in out, (want, out[-4000:])
    # quiet (issue #28 item 6): no Spark banner, log4j/SLF4J line, stage progress bar, traceback or librdkafka line
    assert noise_lines(out) == [], out[-4000:]
    print(f"demo {time.monotonic() - t0:.0f}s")


def test_dev_up_status_down_in_cwd(tmp_path):
    from lakesink.devstack import pid_alive, port_open

    def run(*args, rc=0):
        proc = subprocess.run([sys.executable, "-m", "lakesink.cli", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=180)
        assert proc.returncode == rc, proc.stdout + proc.stderr
        return proc

    state_file = tmp_path / ".lakesink" / "dev-stack.json"
    info = None
    try:
        up = run("dev", "up")
        info = json.loads(state_file.read_text())
        assert up.stdout.splitlines()[0] == (f"dev stack up (state: {state_file}, "
                                             f"log: {tmp_path / '.lakesink' / 'dev-stack.log'})")
        assert f"Kafka bootstrap servers: {info['bootstrap_servers']}" in up.stdout
        assert f"S3 endpoint:             {info['s3_endpoint']}" in up.stdout
        assert f"Schema Registry:         {info['schema_registry_url']}" in up.stdout
        assert port_open(info["kafka_port"]) and port_open(info["s3_port"]) and port_open(info["registry_port"])
        assert info["schema_registry_url"].endswith("/apis/ccompat/v7")  # Apicurio's Confluent-compatible API
        with urllib.request.urlopen(info["schema_registry_url"] + "/subjects", timeout=10) as resp:
            assert json.loads(resp.read()) == []

        again = run("dev", "up")
        assert again.stdout.startswith(f"dev stack already running (state: {state_file})")

        st = run("dev", "status")
        assert st.stdout.splitlines()[-1] == "Kafka port open, S3 port open, Schema Registry port open"
        assert info["bootstrap_servers"] in st.stdout

        doc = json.loads(run("--format", "json", "dev", "status").stdout)
        assert doc["running"] is True and doc["ports_open"] == {"kafka": True, "s3": True, "registry": True}
        assert doc["state"]["bootstrap_servers"] == info["bootstrap_servers"] and doc["state_file"] == str(state_file)
    finally:
        down = subprocess.run([sys.executable, "-m", "lakesink.cli", "dev", "down"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=180)
    assert down.returncode == 0 and down.stdout == "dev stack stopped\n", down.stdout + down.stderr
    assert not state_file.exists()
    if info:
        assert not pid_alive(info["supervisor_pid"]) and not pid_alive(info["kafka_pid"])
        assert not pid_alive(info["registry_pid"])
    assert run("dev", "status", rc=1).stdout == "dev stack not running\n"
    assert run("dev", "down").stdout == "dev stack not running\n"
