"""The `lakesink` command: continuous mode stops cleanly on SIGTERM; config errors exit 1 with a message."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

from archive_checks import base_config, check_chains, manifest_rows, produce

from lakesink.config import load_config


def test_continuous_mode_finishes_the_batch_and_exits_0_on_sigterm(spark, kafka, s3, bucket, topic_name, tmp_path):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, [json.dumps({"i": i}).encode() for i in range(20)])
    raw = base_config(kafka, s3, bucket, topic_name, **{"flush.size": "5"})
    cfg_file = tmp_path / "sink.json"
    cfg_file.write_text(json.dumps(raw))
    proc = subprocess.Popen([sys.executable, "-m", "lakesink.cli", "sink", "--config", str(cfg_file),
                             "--continuous", "--interval", "1s", "--master", "local[1]"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()  # printed after batch 0 committed
        assert first.startswith("batch 0:"), first + proc.stderr.read()[-2000:]
        produce(kafka, topic_name, [json.dumps({"i": i}).encode() for i in range(20, 30)])
        archived, deadline = 0, time.monotonic() + 180
        while archived < 10 and time.monotonic() < deadline:  # later batches archive the new records
            line = proc.stdout.readline()
            m = re.match(r"batch \d+: \d+ objects, (\d+) records", line)
            archived += int(m.group(1)) if m else 0
        assert archived == 10
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 0, proc.stderr.read()[-2000:]
    cfg = load_config(cfg_file)
    check_chains(manifest_rows(spark, cfg), {(topic_name, 0): 30})


def test_bad_config_exits_3_naming_every_problem(tmp_path):
    f = tmp_path / "bad.properties"
    f.write_text("name=j\ntopics=t\nflush.size=zero\nformat.class=avro\nformatt.class=json\n"
                 "s3.bucket.name=b\nmanifest.location=/tmp/m\nkafka.bootstrap.servers=x:1\n")
    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "check", str(f)], capture_output=True, text=True)
    assert r.returncode == 3  # config error
    assert "flush.size='zero'" in r.stderr and "did you mean 'format.class'" in r.stderr
    assert str(f) in r.stderr


def test_a_bad_record_is_one_stderr_line_and_the_details_go_to_the_log_file(kafka, s3, bucket, topic_name, tmp_path):
    """Spark's task-failure log and the Python worker's traceback go to the run's log file; stderr has the one
    `lakesink: error:` line naming the record, its cause and the log file; exit 6 (bad record)."""
    from archive_checks import json_payloads, write_config

    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(3) + [b"{not json"] + json_payloads(2, start=4))
    cfg = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{"flush.size": "2"}))
    log = tmp_path / "run.log"
    env = {**__import__("os").environ, "LAKESINK_SPARK_LOG_FILE": str(log)}
    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "sink", "--config", cfg, "--once", "--master",
                        "local[1]"], capture_output=True, text=True, timeout=540, env=env, cwd=tmp_path)
    assert r.returncode == 6, r.stderr[-3000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr[-5000:]
    assert lines[0].startswith("lakesink: error: batch 0 of job") and "nothing was committed" in lines[0]
    assert f"{topic_name}-0@3" in lines[0] and f"(Spark log: {log})" in lines[0]
    text = log.read_text()
    assert "Traceback" in text and f"{topic_name}-0@3" in text
    assert "s3.bucket.name" not in r.stdout  # the results only
