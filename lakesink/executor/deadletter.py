"""Dead-letter records the way Kafka Connect writes them (``errors.tolerance=all`` with
``errors.deadletterqueue.topic.name``; issue #11 item 7): the record shape (:func:`dead_letter`) and the producer
that delivers them from a sink task (:class:`DeadLetterProducer`). The task (``lakesink.executor.task``) sends
the dead letters whose offsets its committed ranges cover, and waits for their delivery before it returns its
manifest rows, so a commit never records a dead letter that is not in the topic.

Connect's ``DeadLetterQueueReporter`` produces the ORIGINAL record: key, value and headers as read, and its
timestamp when it has one. With ``errors.deadletterqueue.context.headers.enable=true`` (Connect's default is false,
lakesink's is true) it also
adds context headers, all UTF-8 strings: ``__connect.errors.topic``, ``.partition``, ``.offset`` (the source
record), ``.connector.name``, ``.task.id``, ``.stage``, ``.class.name`` (what failed), and for an error
``.exception.class.name``, ``.exception.message``, ``.exception.stacktrace``. :func:`dead_letter` builds the
same record (lakesink's job name is the connector name, the Spark task is the task id, the stage is
``VALUE_CONVERTER`` or ``KEY_CONVERTER`` for a decode error, as Connect's converter stage).
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from lakesink.config.kafka import CONSUMER_ONLY
from lakesink.errors import DeadLetterError

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.wiring import DeadLetterSettings

__all__ = ["HEADER_PREFIX", "DeadLetter", "DeadLetterProducer", "DeadLetters", "dead_letter", "context_headers", "producer_config"]


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


def producer_config(client_conf: Mapping[str, Any], deadline_s: float) -> dict[str, Any]:
    """The dead-letter producer's librdkafka settings: the job's client settings (security, SASL, SSL) without
    consumer-only properties, idempotent with ``acks=all``, each delivery bounded by ``deadline_s``."""
    conf = {k: v for k, v in client_conf.items() if k not in CONSUMER_ONLY}
    conf.update({"enable.idempotence": True, "acks": "all", "linger.ms": 5,
                 "delivery.timeout.ms": max(1000, int(deadline_s * 1000)), "log_level": 3})
    return conf


class DeadLetterProducer:
    """Sends :class:`DeadLetter` records and waits for every delivery; any failure, or no answer within the
    deadline, is a :class:`DeadLetterError` (the batch then commits nothing; its next run sends them again, so a
    dead letter may arrive twice after a failed batch, never zero times for a committed one)."""

    def __init__(self, conf: Mapping[str, Any], deadline_s: float,
                 producer_factory: Callable[[dict], Any] | None = None, clock: Callable[[], float] = time.monotonic):
        self.conf, self.deadline_s, self.clock = dict(conf), deadline_s, clock
        self._factory = producer_factory
        self._producer: Any = None
        self.sent = 0
        self._failures: list[str] = []

    def _get(self):
        if self._producer is None:
            if self._factory is not None:
                self._producer = self._factory(self.conf)
            else:
                from confluent_kafka import Producer

                self._producer = Producer(self.conf)
        return self._producer

    def _on_delivery(self, err, msg) -> None:
        if err is not None:  # named as every client names it (lakesink.config.kafka_errors), without secrets
            from lakesink.config.kafka_errors import classify

            self._failures.append(f"{msg.topic()}: {classify(err, self.conf).message}")

    def send_all(self, letters: Sequence[DeadLetter]) -> int:
        """Produce ``letters`` and wait until the broker acknowledged each; the number sent."""
        if not letters:
            return 0
        producer = self._get()
        deadline = self.clock() + self.deadline_s
        for dl in letters:
            while True:
                try:
                    producer.produce(dl.topic, value=dl.value, key=dl.key, headers=list(dl.headers) or None,
                                     timestamp=dl.timestamp_ms or 0, on_delivery=self._on_delivery)
                    break
                except BufferError:  # the local queue is full: serve deliveries, then retry
                    if self.clock() > deadline:
                        raise DeadLetterError(f"dead-letter topic {dl.topic!r}: the producer queue stayed full for "
                                              f"{self.deadline_s:g} s; nothing was committed") from None
                    producer.poll(0.1)
            producer.poll(0)
        remaining = producer.flush(max(0.0, deadline - self.clock()))
        if self._failures:
            raise DeadLetterError(f"dead-letter delivery failed ({len(self._failures)} of {len(letters)}): "
                                  f"{self._failures[0]}; nothing was committed")
        if remaining:
            raise DeadLetterError(f"dead-letter topic {letters[0].topic!r}: {remaining} of {len(letters)} records "
                                  f"not acknowledged within {self.deadline_s:g} s (kafka.retry.deadline.ms); "
                                  f"nothing was committed")
        self.sent += len(letters)
        return len(letters)


class DeadLetters:
    """One sink task's dead letters (``errors.tolerance=all``): the records whose key or value does not decode are
    taken out of the batch as it is read (:meth:`take_failed`), and at the end of the task those its committed
    ranges cover are delivered and noted in a ``deadletter`` manifest row (:meth:`deliver`). Those in the open
    tail are not sent: the next batch reads them again."""

    def __init__(self, dlq_topic: str, context: bool, job: str, producer: DeadLetterProducer, task: int | str = 0):
        self.dlq_topic, self.context, self.job, self.producer, self.task = dlq_topic, context, job, producer, task
        self.pending: list[tuple[int, DeadLetter, str]] = []
        self.delivered = 0

    @classmethod
    def for_settings(cls, settings: "DeadLetterSettings | None", ctx: Any,
                     producer_factory: Callable[[dict], Any] | None = None) -> "DeadLetters | None":
        """The task's dead letters, or None when ``errors.tolerance`` is ``none`` (``settings`` None: a bad record
        fails the batch)."""
        if settings is None:
            return None
        deadline_s = settings.deadline_s
        conf = producer_config(settings.kafka, deadline_s)
        try:
            from pyspark import TaskContext

            tc = TaskContext.get()
            task: int | str = tc.partitionId() if tc is not None else 0
        except Exception:  # noqa: BLE001 - no pyspark (unit tests, a plain Python caller)
            task = 0
        return cls(settings.topic, settings.context_headers, ctx.job,
                   DeadLetterProducer(conf, deadline_s, producer_factory), task)

    def take_failed(self, topic: str, partition: int, offsets: Sequence[int], timestamps: Sequence[int | None],
                    raw_keys: Sequence[bytes | None], raw_values: Sequence[bytes | None],
                    headers: Sequence[Sequence[tuple[str, bytes | None]]], keys: Sequence[Any],
                    values: Sequence[Any]) -> list[int] | None:
        """Positions of the records to keep, or None when every record decoded. ``keys``/``values`` are the
        decoders' results with ``errors="return"``: a DecodeError in a slot makes that record a dead letter (the
        key is checked first, as Connect's key converter runs first)."""
        from lakesink.errors import DecodeError

        bad: set[int] = set()
        for i, (k, v) in enumerate(zip(keys, values)):
            if isinstance(k, DecodeError):
                err, stage = k, "KEY_CONVERTER"
            elif isinstance(v, DecodeError):
                err, stage = v, "VALUE_CONVERTER"
            else:
                continue
            letter = dead_letter(self.dlq_topic, topic, partition, offsets[i], raw_keys[i], raw_values[i],
                                 timestamps[i], headers[i], err, job=self.job, task=self.task, context=self.context,
                                 stage=stage)
            self.pending.append((offsets[i], letter, str(err)))
            bad.add(i)
        if not bad:
            return None
        return [i for i in range(len(offsets)) if i not in bad]

    def deliver(self, topic: str, partition: int, rows: Sequence[Any]) -> list[Any]:
        """Send the dead letters at or below the end of ``rows``' committed ranges (``ArchivedRow``s of this
        task's partition) and wait for them; the ``deadletter`` row to commit with them (empty list if none)."""
        from lakesink.executor.archiver import ArchivedRow
        from lakesink.manifest.rows import CHAIN_KINDS, deadletter_row

        end = max((r.row.range_end for r in rows if r.row.kind in CHAIN_KINDS), default=None)
        due = [p for p in self.pending if end is not None and p[0] <= end]
        if not due:
            return []
        self.producer.send_all([letter for _, letter, _ in due])
        self.delivered = len(due)
        first = next((r.row for r in rows if r.row.kind in CHAIN_KINDS), None)
        return [ArchivedRow(deadletter_row(topic, partition, [o for o, _, _ in due], self.dlq_topic, due[0][2],
                                           kafka_cluster_id=getattr(first, "kafka_cluster_id", None),
                                           topic_id=getattr(first, "topic_id", None)))]
