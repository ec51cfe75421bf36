"""The direct reader's stall bound (issue #14 item 1): only records and the end of the range count as progress.

A scripted consumer stands in for librdkafka here: what is tested is the loop's clock, not the client (the
real broker cases, unreachable and truncated, are in tests/integration/test_sink_direct.py)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError

from lakesink.config import SinkConfig
from lakesink.errors import KafkaReadError
from lakesink.executor.kafka_reader import read_range


class _Msg:
    def __init__(self, offset: int, error: KafkaError | None = None):
        self._offset, self._error = offset, error

    def error(self):
        return self._error

    def offset(self):
        return self._offset

    def value(self):
        return b"v"

    def timestamp(self):
        return (1, 1000 + self._offset)


class _ScriptedConsumer:
    """Answers each ``consume`` with the next scripted list of messages, then with ``idle`` forever."""

    def __init__(self, script: list[list[_Msg]], idle: list[_Msg], pause_s: float = 0.01):
        self.script, self.idle, self.pause_s = list(script), idle, pause_s
        self.closed = False

    def assign(self, parts):
        pass

    def consume(self, num_messages: int, timeout: float):
        time.sleep(self.pause_s)
        return self.script.pop(0) if self.script else list(self.idle)

    def close(self):
        self.closed = True


def _eof(offset: int) -> _Msg:
    return _Msg(offset, KafkaError(KafkaError._PARTITION_EOF))


def test_error_events_alone_do_not_keep_a_stalled_read_alive():
    # records 0..2, then the broker only ever answers with an EOF event below the read position: before the
    # fix any non-empty answer reset the stall clock and such a read never ended
    consumer = _ScriptedConsumer([[_Msg(0), _Msg(1), _Msg(2)]], idle=[_eof(1)])
    t = time.monotonic()
    with pytest.raises(KafkaReadError, match=r"^t-0: reading \[0, 8\) made no progress for 0.3s at offset 3 "
                                             r"\(kafka.retry.deadline.ms\)"):
        list(read_range({}, "t", 0, 0, 8, stall_timeout_s=0.3, consumer_factory=lambda conf: consumer))
    assert time.monotonic() - t < 5
    assert consumer.closed


def test_records_arriving_slowly_are_progress():
    # one record per answer, each after more than half the stall bound: progress every time, no failure
    script = [[_Msg(i)] for i in range(4)] + [[_eof(4)]]
    consumer = _ScriptedConsumer(script, idle=[], pause_s=0.12)
    batches = list(read_range({}, "t", 0, 0, 4, stall_timeout_s=0.2, consumer_factory=lambda conf: consumer))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == [0, 1, 2, 3]


def test_the_deadline_key_reaches_config_with_a_bounded_default():
    base = {"name": "j", "topics": "t", "flush.size": "1", "s3.bucket.name": "bucket-x", "store.url": "file:///tmp/x",
            "manifest.location": "/tmp/x-manifest", "kafka.bootstrap.servers": "127.0.0.1:9"}
    assert SinkConfig.from_dict(base).kafka_retry_deadline_ms == 60000
    cfg = SinkConfig.from_dict({**base, "kafka.retry.deadline.ms": "5000"})
    assert cfg.kafka_retry_deadline_ms == 5000
    assert "retry.deadline.ms" not in cfg.kafka_options  # never handed to librdkafka or Spark's consumer
