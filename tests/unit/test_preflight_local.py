"""Preflight checks that need no service (issue #14 item 1): a closed broker port fails in seconds naming it;
local store/manifest paths; the shared bounded-retry helper."""
from __future__ import annotations

import socket
import time

import pytest

from lakesink.config import SinkConfig
from lakesink.driver.preflight import check_broker, check_local_dir, check_stores
from lakesink.errors import KafkaMetadataError, StoreError
from lakesink.retry import backoff_s, retry_until


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(tmp_path, **over) -> SinkConfig:
    d = {"name": "job-pre", "topics": "t", "flush.size": "10", "format.class": "json",
         "s3.bucket.name": "bucket-pre", "store.url": f"file://{tmp_path / 'store'}",
         "manifest.location": str(tmp_path / "manifest"), "kafka.bootstrap.servers": f"127.0.0.1:{closed_port()}"}
    d.update(over)
    return SinkConfig.from_dict(d)


def test_closed_broker_port_fails_fast_naming_it(tmp_path):
    cfg = config(tmp_path)
    t = time.monotonic()
    with pytest.raises(KafkaMetadataError) as e:
        check_broker(cfg, timeout_s=2.0)
    print(f"failed after {time.monotonic() - t:.1f} s: {e.value}")
    assert cfg.kafka_options["bootstrap.servers"] in str(e.value) and "preflight" in str(e.value)
    assert e.value.exit_code == 5
    assert time.monotonic() - t < 60


def test_local_store_and_manifest_paths(tmp_path):
    check_stores(config(tmp_path))  # neither exists yet: their parent is a writable directory
    assert not (tmp_path / "store").exists() and not (tmp_path / "manifest").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="manifest.location"):
        check_stores(config(tmp_path, **{"manifest.location": str(tmp_path / "file" / "manifest")}))
    with pytest.raises(StoreError, match="store.url"):
        check_local_dir(str(tmp_path / "file" / "store"), "store.url")


def test_retry_until_bounds_attempts_by_deadline():
    calls = []

    def flaky():
        calls.append(time.monotonic())
        raise TimeoutError("down")

    t = time.monotonic()
    with pytest.raises(TimeoutError):
        retry_until(flaky, deadline_s=0.5, base_ms=20, retryable=lambda e: isinstance(e, TimeoutError))
    assert len(calls) > 1 and time.monotonic() - t < 5
    with pytest.raises(ValueError):  # not retryable: one attempt
        retry_until(lambda: (_ for _ in ()).throw(ValueError("bad")), 5, 20, lambda e: False)
    it = iter([TimeoutError("once")])

    def once_then_ok():
        for e in it:
            raise e
        return "ok"

    assert retry_until(once_then_ok, 5, 1, lambda e: True) == ("ok", 1)
    assert all(0 <= backoff_s(a, 200) <= min(10.0, 0.2 * 2 ** (a - 1)) for a in range(1, 30))
