"""Dead-letter records as Kafka Connect's DeadLetterQueueReporter builds them (lakesink.executor.deadletter)."""
from __future__ import annotations

from lakesink.errors import DecodeError
from lakesink.executor.deadletter import HEADER_PREFIX, dead_letter


def _error() -> DecodeError:
    try:
        raise DecodeError("orders", 0, 7, "wrong magic byte 0x7b")
    except DecodeError as e:
        return e


def test_original_record_without_context_headers():
    d = dead_letter("dlq", "orders", 0, 7, b"k", b"{bad", 1_700_000_000_000, [("h", b"v")], _error(), job="j",
                    task=3)
    assert (d.topic, d.key, d.value, d.timestamp_ms, d.headers) == ("dlq", b"k", b"{bad", 1_700_000_000_000,
                                                                    (("h", b"v"),))


def test_context_headers_are_connects_names_and_utf8_strings():
    d = dead_letter("dlq", "orders", 2, 7, None, b"\x00", -1, None, _error(), job="j", task=3, context=True)
    assert d.timestamp_ms is None  # no timestamp: the broker sets one, as Connect leaves it unset
    h = dict(d.headers)
    assert [k for k, _ in d.headers] == [HEADER_PREFIX + s for s in (
        "topic", "partition", "offset", "connector.name", "task.id", "stage", "class.name", "exception.class.name",
        "exception.message", "exception.stacktrace")]
    assert (h["__connect.errors.topic"], h["__connect.errors.partition"], h["__connect.errors.offset"]) == \
           (b"orders", b"2", b"7")
    assert h["__connect.errors.connector.name"] == b"j" and h["__connect.errors.task.id"] == b"3"
    assert h["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert h["__connect.errors.exception.class.name"] == b"lakesink.errors.DecodeError"
    assert h["__connect.errors.exception.message"] == b"record orders-0@7: wrong magic byte 0x7b"
    assert b"DecodeError" in h["__connect.errors.exception.stacktrace"]
