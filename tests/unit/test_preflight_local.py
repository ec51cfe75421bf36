"""Preflight checks that need no service (issue #14 item 1): a closed broker port fails in seconds naming it;
local store/manifest paths; the shared bounded-retry helper."""
from __future__ import annotations

import socket
from functools import partial

import pytest
from support.clock import FakeClock, upper_bound

from lakesink.config import SinkConfig
from lakesink.driver.preflight import check_broker, check_local_dir, check_stores
from lakesink.errors import KafkaMetadataError, StoreError
from lakesink import retry
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


def test_closed_broker_port_fails_at_the_first_refusal_naming_it(tmp_path, monkeypatch):
    """Events, not timings: the preflight ends at the error callback's first definitive answer (connection refused
    by the only bootstrap server), not at its timeout; librdkafka's own line goes to its logger, not stderr."""
    from confluent_kafka import KafkaError

    from lakesink.config.kafka_errors import ErrorWatch

    reported: list[int] = []
    real_call = ErrorWatch.__call__

    def spy(self, err):
        reported.append(err.code())
        real_call(self, err)

    monkeypatch.setattr(ErrorWatch, "__call__", spy)
    cfg = config(tmp_path)
    servers = cfg.kafka_options["bootstrap.servers"]
    with pytest.raises(KafkaMetadataError) as e:
        check_broker(cfg, timeout_s=120.0)
    msg = str(e.value)
    print(msg)
    assert msg == (f"Kafka at {servers}: not reachable (preflight metadata request): connection refused by "
                   f"{servers}: nothing listens there (kafka.bootstrap.servers, or the broker is down)")
    assert "no answer in" not in msg  # the deadline's message: not reached
    assert KafkaError._ALL_BROKERS_DOWN in reported  # noqa: SLF001 - the answer that made it definitive
    assert 1 <= reported.count(KafkaError._TRANSPORT) <= 3, reported  # noqa: SLF001 - no retry loop
    assert e.value.exit_code == 5


def test_local_store_and_manifest_paths(tmp_path):
    check_stores(config(tmp_path))  # neither exists yet: their parent is a writable directory
    assert not (tmp_path / "store").exists() and not (tmp_path / "manifest").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="manifest.location"):
        check_stores(config(tmp_path, **{"manifest.location": str(tmp_path / "file" / "manifest")}))
    with pytest.raises(StoreError, match="store.url"):
        check_local_dir(str(tmp_path / "file" / "store"), "store.url")


def test_retry_until_bounds_attempts_by_deadline():
    # counts, not timings: a scripted clock, the backoff's jitter at its upper bound (1 s, 2 s, 4 s, 8 s ...)
    clock = FakeClock()
    calls = []

    def flaky():
        calls.append(clock())
        raise TimeoutError("down")

    with pytest.raises(TimeoutError):
        retry_until(flaky, deadline_s=10, base_ms=1000, retryable=lambda e: isinstance(e, TimeoutError),
                    clock=clock, sleep=clock.sleep, rng=upper_bound)
    # attempts at 0, 1, 3 and 7 s; the next would start at 7 + 8 = 15 s, past the 10 s deadline: given up, no sleep
    assert calls == [0, 1, 3, 7] and clock.sleeps == [1, 2, 4]

    # the attempts' own time counts against the deadline too: no backoff, 1 s an attempt, 5 s: five attempts
    clock, calls = FakeClock(), []

    def slow():
        calls.append(clock())
        clock.advance(1)
        raise TimeoutError("down")

    with pytest.raises(TimeoutError):
        retry_until(slow, 5, 1000, lambda e: True, clock=clock, sleep=clock.sleep, rng=lambda lo, hi: lo)
    assert calls == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):  # not retryable: one attempt
        retry_until(lambda: (_ for _ in ()).throw(ValueError("bad")), 5, 20, lambda e: False)
    it = iter([TimeoutError("once")])

    def once_then_ok():
        for e in it:
            raise e
        return "ok"

    assert retry_until(once_then_ok, 5, 1, lambda e: True) == ("ok", 1)
    assert all(0 <= backoff_s(a, 200) <= min(10.0, 0.2 * 2 ** (a - 1)) for a in range(1, 30))


class _HeadBucketServer:
    """A loopback HTTP server answering HeadBucket: 503 for the first ``fail`` requests, then 200; it keeps
    each request's headers (no S3 behind it: preflight's own retry and signing are what is tested)."""

    def __init__(self, fail: int):
        import http.server
        import threading

        outer = self
        self.fail, self.headers = fail, []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_HEAD(self):  # noqa: N802 - http.server's naming
                outer.headers.append(dict(self.headers))
                self.send_response(503 if len(outer.headers) <= outer.fail else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()


def s3_config(tmp_path, url: str, **over) -> SinkConfig:
    return config(tmp_path, **{"store.url": url, "s3.region": "us-east-1", "manifest.location":
                               "s3a://bucket-pre/_lakesink/manifest", "aws.access.key.id": "ASIAPRE",
                               "aws.secret.access.key": "secret-pre", **over})


def test_head_bucket_is_retried_through_throttling_and_signed_with_the_session_token(tmp_path):
    srv = _HeadBucketServer(fail=2)
    try:
        check_stores(s3_config(tmp_path, srv.url, **{"s3.credentials.source": "session",
                                                     "aws.session.token": "token-pre"}))
    finally:
        srv.close()
    assert len(srv.headers) == 3  # two 503s retried, then the bucket answered
    assert all(h.get("X-Amz-Security-Token") == "token-pre" for h in srv.headers), srv.headers[0]


def test_head_bucket_throttled_past_the_deadline_names_it(tmp_path, monkeypatch):
    # the preflight's retry on a scripted clock, the backoff's jitter at its upper bound: 200, 400, 800 ms
    clock = FakeClock()
    scripted = partial(retry_until, clock=clock, sleep=clock.sleep, rng=upper_bound)
    monkeypatch.setattr(retry, "retry_until", scripted)
    monkeypatch.setattr("lakesink.driver.preflight.retry_until", scripted, raising=False)
    srv = _HeadBucketServer(fail=10**6)
    try:
        with pytest.raises(StoreError) as e:
            check_stores(s3_config(tmp_path, srv.url, **{"s3.retry.deadline.ms": "1500",
                                                         "s3.retry.backoff.ms": "200"}))
    finally:
        srv.close()
    assert "throttled or unavailable (503) until s3.retry.deadline.ms=1500" in str(e.value)
    # HeadBucket at 0, 0.2, 0.6 and 1.4 s; the next would start at 1.4 + 1.6 s, past the 1.5 s deadline
    assert len(srv.headers) == 4 and clock.sleeps == pytest.approx([0.2, 0.4, 0.8])
