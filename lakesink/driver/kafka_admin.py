"""Kafka metadata for the driver: topics, partitions, cluster/topic ids and offset bounds.

Uses confluent-kafka's AdminClient. The config's ``kafka.*`` keys arrive with the prefix stripped
(``kafka.security.protocol`` → ``security.protocol``), as librdkafka and Spark's consumers want them.
Every call has a bounded timeout and fails with an error naming the broker and the cause. The admin client's
error callback is an :class:`~lakesink.config.kafka_errors.ErrorWatch`: an authentication or TLS failure it reports
ends the retries at once and is the error's cause; librdkafka's log lines go to the ``lakesink.librdkafka`` logger.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping


from lakesink.errors import KafkaMetadataError

TIMEOUT_S = 30.0
#: Total time one metadata step (list topics, describe, list offsets) may spend retrying transient failures,
#: unless ``kafka.retry.deadline.ms`` says otherwise (the same default).
DEADLINE_S = 60.0
#: Base of the full-jitter exponential backoff between attempts.
BACKOFF_MS = 500


def transient(e: BaseException) -> bool:
    """A failure worth retrying: a timeout, a broker down or unreachable, or an error Kafka marks retriable."""
    from concurrent.futures import TimeoutError as FutureTimeout

    from confluent_kafka import KafkaError, KafkaException

    if isinstance(e, (TimeoutError, FutureTimeout)):
        return True
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        err = e.args[0]
        return err.retriable() or err.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT,  # noqa: SLF001
                                                 KafkaError._ALL_BROKERS_DOWN)  # noqa: SLF001
    return False


@dataclass(frozen=True)
class PartitionBounds:
    topic: str
    partition: int
    earliest: int  # first offset still stored
    latest: int  # next offset to be written (high watermark, or LSO with read_committed)


@dataclass(frozen=True)
class TopicsSnapshot:
    cluster_id: str | None
    topic_ids: dict[str, str]
    bounds: dict[tuple[str, int], PartitionBounds]


def client_config(kafka_options: Mapping[str, str]) -> dict:
    """The driver's admin-client config from the config's ``kafka.*`` keys (already without the prefix; names
    that differ from the Java client's mapped by :func:`lakesink.wiring.librdkafka_config`), logging warnings
    and worse unless the config sets ``log_level``: librdkafka's info lines (e.g. BGQUEUE "Purging 1 unserved
    events" when a client is destroyed) would otherwise land on the CLI's stderr."""
    from lakesink import wiring
    from lakesink.config.kafka import CONSUMER_ONLY

    # consumer settings (isolation.level: read by us and by the consumers) would each be a CONFWARN here
    from lakesink.config.kafka_errors import client_logging

    out: dict = {k: str(v) for k, v in wiring.librdkafka_config(kafka_options).items() if k not in CONSUMER_ONLY}
    out.setdefault("log_level", "4")
    out.update(client_logging())  # its log lines: the lakesink.librdkafka logger (the run's log file), not stderr
    return out


def isolation_level(kafka_options: Mapping[str, str]) -> str:
    """The effective ``isolation.level`` (default read_committed), the same for the snapshot and both readers."""
    from lakesink import wiring

    return wiring.librdkafka_config(kafka_options)["isolation.level"]


class KafkaMetadata:
    def __init__(self, kafka_options: Mapping[str, str], deadline_s: float = DEADLINE_S):
        from confluent_kafka.admin import AdminClient

        from lakesink.config.kafka_errors import ErrorWatch

        self.options = dict(kafka_options)
        self.conf = client_config(kafka_options)
        self.servers = self.conf.get("bootstrap.servers", "?")
        self.read_committed = isolation_level(kafka_options) == "read_committed"
        self.watch = ErrorWatch(self.conf)
        self.admin = AdminClient({**self.conf, "socket.timeout.ms": 10000, "error_cb": self.watch})
        self.deadline_s = deadline_s
        #: Retries made by this client's metadata calls (transient failures).
        self.retries = 0

    def definitive(self):
        """The first authentication/TLS failure the error callback reported (served now), or None."""
        self.admin.poll(0)
        return self.watch.failure(connecting=False)

    def _fail(self, what: str, e: BaseException) -> KafkaMetadataError:
        failure = self.definitive()
        if failure is not None:
            return KafkaMetadataError(f"Kafka at {self.servers}: {failure.message} ({what.split(' (')[0]})")
        from lakesink.config.kafka_errors import mask

        return KafkaMetadataError(f"Kafka at {self.servers}: {what} failed: {mask(str(e), self.conf)}")

    def _retrying(self, fn):
        """``fn()`` with bounded retries of transient failures (backoff + jitter, ``deadline_s`` in all); none
        after a definitive failure (:meth:`definitive`)."""
        from lakesink.retry import retry_until

        result, retries = retry_until(fn, self.deadline_s, BACKOFF_MS,
                                      lambda e: transient(e) and self.definitive() is None)
        self.retries += retries
        return result

    def resolve_topics(self, topics: list[str] | None, regex: str | None) -> list[str]:
        """The configured topics (all must exist) or those matching ``topics.regex``."""
        try:
            md = self._retrying(lambda: self.admin.list_topics(timeout=TIMEOUT_S))
        except Exception as e:  # noqa: BLE001 - KafkaException / timeouts
            raise self._fail(f"listing topics (is the broker reachable? gave up after {self.deadline_s:g} s "
                             f"of retries)", e) from None
        existing = {t for t in md.topics if not t.startswith("__")}
        if regex:
            pat = re.compile(regex)
            return sorted(t for t in existing if pat.fullmatch(t))
        missing = [t for t in topics or [] if t not in existing]
        if missing:
            raise KafkaMetadataError(f"Kafka at {self.servers}: topic(s) {', '.join(missing)} do not exist "
                                     f"(config key `topics`)")
        return list(topics or [])

    def snapshot(self, topics: list[str]) -> TopicsSnapshot:
        """Cluster id, topic ids, and earliest/latest offsets of every partition of ``topics``."""
        from confluent_kafka import IsolationLevel, TopicCollection, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        def describe():
            cluster_id = self.admin.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S).cluster_id
            described = self.admin.describe_topics(TopicCollection(topics), request_timeout=TIMEOUT_S)
            topic_ids, parts = {}, []
            for name, fut in described.items():
                d = fut.result(TIMEOUT_S)
                topic_ids[name] = str(d.topic_id) if d.topic_id is not None else None
                parts += [TopicPartition(name, p.id) for p in d.partitions]
            return cluster_id, topic_ids, parts

        try:
            cluster_id, topic_ids, parts = self._retrying(describe)
        except Exception as e:  # noqa: BLE001
            raise self._fail("describing topics " + ", ".join(topics), e) from None
        iso = IsolationLevel.READ_COMMITTED if self.read_committed else IsolationLevel.READ_UNCOMMITTED
        bounds = {}
        if parts:
            def offsets():
                early = self.admin.list_offsets({tp: OffsetSpec.earliest() for tp in parts},
                                                isolation_level=iso, request_timeout=TIMEOUT_S)
                late = self.admin.list_offsets({tp: OffsetSpec.latest() for tp in parts},
                                               isolation_level=iso, request_timeout=TIMEOUT_S)
                return {(tp.topic, tp.partition): PartitionBounds(tp.topic, tp.partition,
                                                                  early[tp].result(TIMEOUT_S).offset,
                                                                  late[tp].result(TIMEOUT_S).offset)
                        for tp in parts}

            try:
                bounds = self._retrying(offsets)
            except Exception as e:  # noqa: BLE001
                raise self._fail("listing offsets", e) from None
        return TopicsSnapshot(cluster_id, topic_ids, bounds)


def job_bounds(kafka_options: Mapping[str, str], topics: list[str] | None, regex: str | None,
               also: set[str] = frozenset(), deadline_s: float = DEADLINE_S) -> dict[tuple[str, int], PartitionBounds]:
    """Offset bounds of a job's partitions: its configured topics (or those matching ``regex``) plus the topics
    in ``also`` (e.g. those its manifest names) that still exist."""
    md = KafkaMetadata(kafka_options, deadline_s)
    configured = md.resolve_topics(list(topics or []), regex) if (topics or regex) else []
    existing = set(md.resolve_topics(None, ".*")) if also else set()
    names = sorted(set(configured) | (set(also) & existing))
    return md.snapshot(names).bounds if names else {}
