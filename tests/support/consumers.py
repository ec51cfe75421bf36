"""A real confluent-kafka consumer that keeps what each ``consume`` answered, for tests of the direct reader
(``read_range(..., consumer_factory=recording(answers))``): they name the event that ended a read."""
from __future__ import annotations

from typing import Any, Callable

#: An answer's message: (offset, error code or None for a record).
Seen = tuple[int, Any]



class Msg:
    """A consumed message of ``partition`` at ``offset`` (value ``b"v"``, CreateTime 1000 + offset) carrying
    ``error``, if any."""

    def __init__(self, offset: int, error=None, partition: int = 0):
        self._offset, self._error, self._partition = offset, error, partition

    def partition(self):
        return self._partition

    def error(self):
        return self._error

    def offset(self):
        return self._offset

    def value(self):
        return b"v"

    def timestamp(self):
        return (1, 1000 + self._offset)

class RecordingConsumer:
    """Delegates to ``confluent_kafka.Consumer(conf)``; appends one list of :data:`Seen` per ``consume`` call."""

    def __init__(self, conf: dict, answers: list[list[Seen]]):
        from confluent_kafka import Consumer

        self._consumer, self.answers = Consumer(conf), answers

    def assign(self, partitions) -> None:
        self._consumer.assign(partitions)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list:
        msgs = self._consumer.consume(num_messages=num_messages, timeout=timeout)
        self.answers.append([(m.offset(), m.error().code() if m.error() is not None else None) for m in msgs])
        return msgs

    def close(self) -> None:
        self._consumer.close()


def recording(answers: list[list[Seen]]) -> Callable[[dict], RecordingConsumer]:
    """A ``consumer_factory`` whose consumers append their answers to ``answers``."""
    return lambda conf: RecordingConsumer(conf, answers)
