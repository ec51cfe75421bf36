"""Dead-letter records the way Kafka Connect writes them (``errors.tolerance=all`` with
``errors.deadletterqueue.topic.name``; issue #11 item 7). NOT YET HOOKED INTO THE SINK: this module is the record
shape and the producer; the executor hook, the config keys and the manifest accounting are still to do.

Connect's ``DeadLetterQueueReporter`` produces the ORIGINAL record: key, value and headers as read, and its
timestamp when it has one. With ``errors.deadletterqueue.context.headers.enable=true`` (default false) it also
adds context headers, all UTF-8 strings: ``__connect.errors.topic``, ``.partition``, ``.offset`` (the source
record), ``.connector.name``, ``.task.id``, ``.stage``, ``.class.name`` (what failed), and for an error
``.exception.class.name``, ``.exception.message``, ``.exception.stacktrace``. :func:`dead_letter` builds the
same record (lakesink's job name is the connector name, the Spark task is the task id, the stage is
``VALUE_CONVERTER`` or ``KEY_CONVERTER`` for a decode error, as Connect's converter stage).
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["HEADER_PREFIX", "DeadLetter", "dead_letter", "context_headers"]

HEADER_PREFIX = "__connect.errors."
ORIG_TOPIC = HEADER_PREFIX + "topic"
ORIG_PARTITION = HEADER_PREFIX + "partition"
ORIG_OFFSET = HEADER_PREFIX + "offset"
CONNECTOR_NAME = HEADER_PREFIX + "connector.name"
TASK_ID = HEADER_PREFIX + "task.id"
STAGE = HEADER_PREFIX + "stage"
EXECUTING_CLASS = HEADER_PREFIX + "class.name"
EXCEPTION = HEADER_PREFIX + "exception.class.name"
EXCEPTION_MESSAGE = HEADER_PREFIX + "exception.message"
EXCEPTION_STACK_TRACE = HEADER_PREFIX + "exception.stacktrace"


@dataclass(frozen=True)
class DeadLetter:
    """One record for the dead-letter topic: what a producer sends."""

    topic: str
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None
    headers: tuple[tuple[str, bytes | None], ...]


def _b(v: Any) -> bytes | None:
    return None if v is None else str(v).encode("utf-8")


def context_headers(topic: str, partition: int, offset: int, error: BaseException, *, job: str, task: int | str,
                    stage: str = "VALUE_CONVERTER", executing_class: str | None = None
                    ) -> list[tuple[str, bytes | None]]:
    """Connect's context headers, in its order (see the module doc)."""
    cls = type(error)
    trace = "".join(traceback.format_exception(cls, error, error.__traceback__))
    return [(ORIG_TOPIC, _b(topic)), (ORIG_PARTITION, _b(partition)), (ORIG_OFFSET, _b(offset)),
            (CONNECTOR_NAME, _b(job)), (TASK_ID, _b(task)), (STAGE, _b(stage)),
            (EXECUTING_CLASS, _b(executing_class or f"{cls.__module__}.{cls.__qualname__}")),
            (EXCEPTION, _b(f"{cls.__module__}.{cls.__qualname__}")), (EXCEPTION_MESSAGE, _b(str(error))),
            (EXCEPTION_STACK_TRACE, _b(trace))]


def dead_letter(dlq_topic: str, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
                timestamp_ms: int | None, headers: Sequence[tuple[str, bytes | None]] | None,
                error: BaseException, *, job: str, task: int | str, context: bool = False,
                stage: str = "VALUE_CONVERTER", executing_class: str | None = None) -> DeadLetter:
    """The original record for ``dlq_topic``; with ``context`` (``errors.deadletterqueue.context.headers.enable``)
    Connect's ``__connect.errors.*`` headers appended after the record's own. A negative timestamp (Kafka's "no
    timestamp") is left for the broker to set, as Connect does."""
    hs = list(headers or ())
    if context:
        hs += context_headers(topic, partition, offset, error, job=job, task=task, stage=stage,
                              executing_class=executing_class)
    ts = timestamp_ms if timestamp_ms is not None and timestamp_ms >= 0 else None
    return DeadLetter(dlq_topic, key, value, ts, tuple(hs))
