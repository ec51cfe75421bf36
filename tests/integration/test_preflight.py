"""Preflight (issue #14 item 1): a wrong broker port, a wrong bucket or a dead S3 port fails ``lakesink sink``
in seconds, exit code 5, one line naming the endpoint, before the manifest table is created."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from support.archive_checks import base_config

from lakesink.devstack import free_port

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_sink(tmp_path, cfg: dict) -> tuple[int, str, float]:
    path = tmp_path / "job.properties"
    path.write_text("\n".join(f"{k}={v}" for k, v in cfg.items()))
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "lakesink.cli", "sink", "--config", str(path), "--once"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": REPO})
    return p.returncode, p.stderr, time.monotonic() - t


@pytest.mark.parametrize("fault", ["broker_port", "bucket", "s3_port"])
def test_unreachable_dependency_fails_fast_naming_it(tmp_path, kafka, s3, bucket, topic_name, fault):
    dead = f"127.0.0.1:{free_port()}"
    over = {"broker_port": {"kafka.bootstrap.servers": dead},
            "bucket": {"s3.bucket.name": "no-such-bucket-14a",
                       "manifest.location": f"{tmp_path}/manifest"},
            "s3_port": {"store.url": f"http://{dead}", "manifest.location": f"{tmp_path}/manifest"}}[fault]
    cfg = base_config(kafka, s3, bucket, topic_name)
    cfg.update(over)
    rc, err, seconds = run_sink(tmp_path, cfg)
    print(f"{fault}: exit {rc} after {seconds:.1f} s: {err.strip()}")
    assert rc == 5, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lakesink: error:"), err
    assert {"broker_port": dead, "bucket": "no-such-bucket-14a", "s3_port": dead}[fault] in lines[0], err
    assert "preflight" in lines[0], err  # the event: the preflight stopped the run, not a later step's timeout
    assert not (tmp_path / "manifest").exists()
