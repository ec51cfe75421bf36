"""SIGTERM to the whole process group of ``lakesink sink`` mid-batch (what systemd and schedulers send; issue
#14 item 3): the Spark JVM is in its own process group, so only the driver gets the signal; it lets the batch
commit, says so in one line and exits 0. The manifest is exact, the next run archives the rest exactly once,
and no Spark JVM is left running. The same with the local engine's worker processes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from support.archive_checks import (base_config, check_exactly_once, json_payloads, local_worker_alive,
                                    local_workers_of, produce)

from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def jvms_logging_to(log: str) -> list[int]:
    """Pids of live processes whose command line names ``log`` (the run's Spark JVM: -Dlakesink.log.file)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if log.encode() in cmd and state != "Z":
            pids.append(int(d))
    return pids


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_sigterm_to_process_group_mid_batch_commits_and_exits_0(spark, tmp_path, kafka, s3, bucket, topic_name,
                                                                engine):
    """The local engine's workers run in their own session too: the group's SIGTERM reaches the driver only."""
    kafka.create_topic(topic_name, partitions=2)
    sent = produce(kafka, topic_name, json_payloads(20000), partition_of=lambda i: i % 2)
    cfg_dict = base_config(kafka, s3, bucket, topic_name, **{"flush.size": "100"})
    path = tmp_path / "job.properties"
    path.write_text("\n".join(f"{k}={v}" for k, v in cfg_dict.items()))
    log = str(tmp_path / "spark.log")
    proc = subprocess.Popen([sys.executable, "-m", "lakesink.cli", "sink", "--config", str(path), "--once",
                             "--flush-tail", "--progress", "none", "--engine", engine],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            start_new_session=True,
                            env={**os.environ, "PYTHONPATH": REPO, "LAKESINK_SPARK_LOG_FILE": log})
    deadline = time.monotonic() + 120
    workers: list[int] = []
    if engine == "spark":
        while not jvms_logging_to(log) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, f"the run ended before its JVM started: {proc.communicate()}"
        time.sleep(3)  # into the batch (session start / archive)
    else:  # no JVM: wait for the workers, then for the batch's first object (its commit comes after the last)
        client = s3.client()
        while proc.poll() is None and time.monotonic() < deadline and not (
                workers and client.list_objects_v2(Bucket=bucket, Prefix="topics/").get("KeyCount")):
            workers = sorted(set(workers) | set(local_workers_of(proc.pid)))
            time.sleep(0.05)
        assert proc.poll() is None and workers, f"the run ended before its first object: {proc.communicate()}"
    t = time.monotonic()
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    print(f"exit {proc.returncode} {time.monotonic() - t:.1f} s after SIGTERM; stderr: {err!r}")
    assert proc.returncode == 0, err
    lines = err.strip().splitlines()
    assert lines == ["lakesink: warning: SIGTERM received: stopped after batch 0 committed (20000 records)"], err
    # the JVM ends with the driver (its stdin pipe closes)
    deadline = time.monotonic() + 30
    while jvms_logging_to(log) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not jvms_logging_to(log), "a Spark JVM outlived the run"
    assert not [p for p in workers if local_worker_alive(p)], "a local worker outlived the run"
    # the manifest is exact and a next run archives the rest exactly once (nothing half-committed)
    cfg = SinkConfig.from_dict(cfg_dict)
    SinkJob(spark, cfg).run_batch(flush_tail=True)
    check_exactly_once(spark, cfg, sent, "json")
