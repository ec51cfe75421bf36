"""The direct reader's stall bound (issue #14 item 1): only records and the end of the range count as progress.

A scripted consumer stands in for librdkafka here: what is tested is the loop's clock, not the client (the
real broker cases, unreachable and truncated, are in tests/integration/test_sink_direct.py)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError
from support.clock import FakeClock
from support.consumers import Msg

from lakesink.config import SinkConfig
from lakesink.errors import KafkaReadError
from lakesink.executor.kafka_reader import (FETCH_QUEUE_BACKOFF_MS, POLL_TIMEOUT_S, consumer_config, read_range,
                                          record_offsets)


class _ScriptedConsumer:
    """Answers each ``consume`` with the next scripted list of messages, then with ``idle`` forever; each answer
    takes ``pause_s`` (on ``clock`` when given, a FakeClock the read is measured on; else really); ``calls``
    counts them."""

    def __init__(self, script: list[list[Msg]], idle: list[Msg], pause_s: float = 0.01,
                 clock: FakeClock | None = None):
        self.script, self.idle, self.pause_s, self.clock = list(script), idle, pause_s, clock
        self.closed = False
        self.calls = 0

    def assign(self, parts):
        pass

    def consume(self, num_messages: int, timeout: float):
        self.calls += 1
        if self.clock is not None:
            self.clock.advance(self.pause_s)
        else:
            time.sleep(self.pause_s)
        return self.script.pop(0) if self.script else list(self.idle)

    def close(self):
        self.closed = True


def _eof(offset: int) -> Msg:
    return Msg(offset, KafkaError(KafkaError._PARTITION_EOF))


def test_error_events_alone_do_not_keep_a_stalled_read_alive():
    # records 0..2, then the broker only ever answers with an EOF event below the read position: before the
    # fix any non-empty answer reset the stall clock and such a read never ended (here: the clock's read limit)
    clock = FakeClock(max_reads=1000)
    consumer = _ScriptedConsumer([[Msg(0), Msg(1), Msg(2)]], idle=[_eof(1)], pause_s=1, clock=clock)
    with pytest.raises(KafkaReadError, match=r"^t-0: reading \[0, 8\) made no progress for 3s at offset 3 "
                                             r"\(kafka.retry.deadline.ms\)"):
        list(read_range({}, "t", 0, 0, 8, stall_timeout_s=3, consumer_factory=lambda conf: consumer, clock=clock))
    # the records' answer at 1 s, then EOF events at 2, 3, 4 and 5 s: the first answer more than 3 s after the
    # last progress ends the read
    assert consumer.calls == 5 and clock.now == 5
    assert consumer.closed


def test_records_arriving_slowly_are_progress():
    # one record per answer, each after more than half the stall bound: progress every time, no failure
    clock = FakeClock()
    script = [[Msg(i)] for i in range(4)] + [[_eof(4)]]
    consumer = _ScriptedConsumer(script, idle=[], pause_s=2, clock=clock)
    batches = list(read_range({}, "t", 0, 0, 4, stall_timeout_s=3, consumer_factory=lambda conf: consumer,
                              clock=clock))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == [0, 1, 2, 3]
    assert consumer.calls == 4 and clock.now == 8  # 8 s in all, more than the bound: only the gaps count


def test_the_deadline_key_reaches_config_with_a_bounded_default():
    base = {"name": "j", "topics": "t", "flush.size": "1", "s3.bucket.name": "bucket-x", "store.url": "file:///tmp/x",
            "manifest.location": "/tmp/x-manifest", "kafka.bootstrap.servers": "127.0.0.1:9"}
    assert SinkConfig.from_dict(base).kafka_retry_deadline_ms == 60000
    cfg = SinkConfig.from_dict({**base, "kafka.retry.deadline.ms": "5000"})
    assert cfg.kafka_retry_deadline_ms == 5000
    assert "retry.deadline.ms" not in cfg.kafka_options  # never handed to librdkafka or Spark's consumer


class _CountingConsumer(_ScriptedConsumer):
    """Records each ``consume`` call's timeout; an unscripted call blocks for its whole timeout, as librdkafka's
    batch consume does when fewer messages than asked are queued."""

    def __init__(self, script: list[list[Msg]]):
        super().__init__(script, idle=[], pause_s=0)
        self.timeouts: list[float] = []

    def consume(self, num_messages: int, timeout: float):
        self.timeouts.append(timeout)
        if not self.script:
            time.sleep(timeout)
        return super().consume(num_messages, timeout)


def test_the_read_ends_with_the_record_at_end_minus_one_without_waiting_for_an_eof_event():
    # before: one more consume call waited for the partition-EOF event, a full second per range
    consumer = _CountingConsumer([[Msg(0), Msg(1), Msg(2), Msg(3)]])
    batches = list(read_range({}, "t", 0, 0, 4, consumer_factory=lambda conf: consumer))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == [0, 1, 2, 3]
    assert len(consumer.timeouts) == 1 and consumer.closed


def test_a_range_ending_on_a_marker_waits_for_eof_in_short_polls():
    # offset 3 is a transaction marker: the read needs the EOF event, and waits for it a short poll at a time
    consumer = _CountingConsumer([[Msg(0), Msg(1), Msg(2)], [], [_eof(4)]])
    batches = list(read_range({}, "t", 0, 0, 4, consumer_factory=lambda conf: consumer))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == [0, 1, 2]
    assert len(consumer.timeouts) == 3
    assert max(consumer.timeouts) == POLL_TIMEOUT_S <= 0.1


def test_the_fetch_queue_backoff_is_short_unless_the_config_sets_it():
    assert consumer_config({"bootstrap.servers": "b"}, "g")["fetch.queue.backoff.ms"] == FETCH_QUEUE_BACKOFF_MS <= 100
    assert consumer_config({"bootstrap.servers": "b", "fetch.queue.backoff.ms": "200"}, "g")[
        "fetch.queue.backoff.ms"] == "200"


def test_record_offsets_takes_only_records_in_order_from_the_position():
    assert record_offsets([Msg(5), Msg(6), Msg(9)], 5) == [5, 6, 9]
    assert record_offsets([Msg(5), Msg(6)], 5, partition=0) == [5, 6]
    assert record_offsets([Msg(5), Msg(6, partition=1)], 5, partition=0) is None  # another partition's message
    assert record_offsets([Msg(5), _eof(6)], 5) is None  # an event: the per-message loop handles it
    assert record_offsets([Msg(5), Msg(5)], 5) is None  # not ascending
    assert record_offsets([Msg(4), Msg(5)], 5) is None  # before the position
    assert record_offsets([], 0) is None


def test_records_past_the_end_in_one_answer_are_never_taken():
    consumer = _CountingConsumer([[Msg(i) for i in range(2, 9)]])
    batches = list(read_range({}, "t", 0, 2, 6, consumer_factory=lambda conf: consumer))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == [2, 3, 4, 5]
    assert [v for b in batches for v in b.column("value").to_pylist()] == [b"v"] * 4


def test_an_offset_the_broker_repeats_is_named():
    consumer = _CountingConsumer([[Msg(0), Msg(1)], [Msg(1), Msg(2)]])
    with pytest.raises(KafkaReadError, match=r"^t-0: the broker returned offset 1 after 1$"):
        list(read_range({}, "t", 0, 0, 4, consumer_factory=lambda conf: consumer))
