"""Dead letters in the sink (errors.tolerance=all, issue #11 item 7): the config keys, the task taking records
that do not decode out of the batch, delivering only those its committed ranges cover (with Connect's context
headers) before it returns its rows, the ``deadletter`` manifest row, and the failures that commit nothing."""
from __future__ import annotations

import dataclasses
import json

import pytest

from support.archive_helpers import BASE_TS, batch
from lakesink.wiring import task_parts
from lakesink.config import SinkConfig
from lakesink.driver.validate import range_frame
from lakesink.errors import ConfigError, DeadLetterError, DecodeError
from lakesink.executor.archiver import ArchivedRow, BatchContext
from lakesink.executor.deadletter import DeadLetterProducer, producer_config
from lakesink.executor.task import PartitionStatus, archive_partitions, decode_result
from lakesink.manifest.rows import CHAIN_KINDS, DEADLETTER, OBJECT


def config(tmp_path, **extra) -> SinkConfig:
    cfg = {"name": "j", "topics": "t", "format.class": "json", "value.decoder": "json", "flush.size": "3",
           "s3.bucket.name": "bkt", "store.url": f"file://{tmp_path}/store", "manifest.location": str(tmp_path / "m"),
           "kafka.bootstrap.servers": "localhost:9", "errors.tolerance": "all",
           "errors.deadletterqueue.topic.name": "dlq"}
    cfg.update(extra)
    return SinkConfig.from_dict({k: v for k, v in cfg.items() if v is not None})


class FakeMessage:
    def __init__(self, topic):
        self._topic = topic

    def topic(self):
        return self._topic


class RecordingProducer:
    """What confluent-kafka's Producer is asked to do; ``fail``: every delivery reports this error;
    ``stuck``: flush never gets an answer."""

    instances: list["RecordingProducer"] = []

    def __init__(self, conf, fail=None, stuck=False):
        self.conf, self.fail, self.stuck = conf, fail, stuck
        self.sent, self._callbacks = [], []
        RecordingProducer.instances.append(self)

    def produce(self, topic, value=None, key=None, headers=None, timestamp=0, on_delivery=None):
        self.sent.append({"topic": topic, "value": value, "key": key, "headers": headers, "timestamp": timestamp})
        self._callbacks.append((on_delivery, topic))

    def poll(self, timeout=0):
        return 0

    def flush(self, timeout=None):
        if self.stuck:
            return len(self._callbacks)
        for cb, topic in self._callbacks:
            cb(self.fail, FakeMessage(topic))
        self._callbacks = []
        return 0


def run(cfg, values, offsets, flush_tail=True, producer=RecordingProducer, keys=None):
    RecordingProducer.instances = []
    ctx = BatchContext(job="j", run_id="r", batch_id=0, cluster_id="c", topic_ids={"t": "tid"},
                       flush_tail=flush_tail, dead_letter_producer=producer)
    tss = [BASE_TS + o for o in offsets]
    b = batch(values, offsets, tss, keys=keys, headers=[[("h", b"%d" % o)] for o in offsets])
    out = list(archive_partitions(iter([b]), task_parts(cfg), ctx, {("t", 3): (offsets[0], offsets[-1] + 1)}))
    results = [decode_result(r) for r in out[0].column("row").to_pylist()] if out else []
    rows = [r.row for r in results if isinstance(r, ArchivedRow)]
    (status,) = [r for r in results if isinstance(r, PartitionStatus)]
    return rows, status


GOOD = [json.dumps({"i": i}).encode() for i in range(10)]


# ---------------------------------------------------------------------------------------------- config

def test_config_keys_defaults_and_connect_names(tmp_path):
    c = config(tmp_path)
    assert (c.errors_tolerance, c.dlq_topic, c.dlq_context_headers) == ("all", "dlq", True)
    c = config(tmp_path, **{"errors.tolerance": "ALL", "errors.deadletterqueue.context.headers.enable": "false",
                            "errors.deadletterqueue.topic.replication.factor": "3", "errors.log.enable": "true"})
    assert c.errors_tolerance == "all" and c.dlq_context_headers is False
    assert {"errors.deadletterqueue.topic.replication.factor", "errors.log.enable"} <= dict(c.ignored_keys).keys()
    c = config(tmp_path, **{"errors.tolerance": None, "errors.deadletterqueue.topic.name": None})
    assert (c.errors_tolerance, c.dlq_topic) == ("none", None)


@pytest.mark.parametrize("extra, key, words", [
    ({"errors.deadletterqueue.topic.name": None}, "errors.tolerance", "requires errors.deadletterqueue.topic.name"),
    ({"errors.tolerance": "some"}, "errors.tolerance", "one of 'none', 'all'"),
    ({"errors.deadletterqueue.topic.name": "t"}, "errors.deadletterqueue.topic.name", "a topic this job archives"),
    ({"topics": None, "topics.regex": "t.*", "errors.deadletterqueue.topic.name": "t-dlq"},
     "errors.deadletterqueue.topic.name", "a topic this job archives"),
    ({"errors.deadletterqueue.topic.name": "bad/name"}, "errors.deadletterqueue.topic.name", "legal Kafka topic"),
])
def test_config_errors_name_the_key(tmp_path, extra, key, words):
    with pytest.raises(ConfigError) as e:
        config(tmp_path, **extra)
    assert len(e.value.problems) == 1 and e.value.problems[0].key == key and words in str(e.value), str(e.value)


def test_a_topic_without_tolerance_all_is_a_warning(tmp_path):
    c = config(tmp_path, **{"errors.tolerance": "none"})
    assert any("errors.deadletterqueue.topic.name is unused" in w for w in c.warnings)


def test_producer_config_drops_consumer_properties_and_is_idempotent():
    conf = producer_config({"bootstrap.servers": "b:9", "isolation.level": "read_committed",
                            "enable.partition.eof": "true", "security.protocol": "SASL_SSL"}, 30)
    assert conf == {"bootstrap.servers": "b:9", "security.protocol": "SASL_SSL", "enable.idempotence": True,
                    "acks": "all", "linger.ms": 5, "delivery.timeout.ms": 30000, "log_level": 3}


# ---------------------------------------------------------------------------------------------- the task

def test_records_that_do_not_decode_go_to_the_dead_letter_topic_the_rest_is_archived(tmp_path):
    values = list(GOOD)
    values[4], values[9] = b"{not json", b"\xff\xfe"
    rows, status = run(config(tmp_path), values, list(range(100, 110)))
    objects = [r for r in rows if r.kind == OBJECT]
    assert sum(r.record_count for r in objects) == 8
    # the committed ranges still chain over every offset read, dead letters included
    frame = range_frame([dataclasses.asdict(r) for r in rows])  # deadletter rows are not links of the chain
    assert [f["chain_gap"] for f in frame] == [None] + [0] * (len(frame) - 1)
    assert min(r.range_start for r in rows) == 100 and max(r.range_end for r in rows) == 109
    (dl,) = [r for r in rows if r.kind == DEADLETTER]
    assert (dl.range_start, dl.range_end, dl.first_offset, dl.last_offset, dl.record_count) == (104, 109, 104, 109, 0)
    assert dl.note.startswith("2 records sent to dead-letter topic 'dlq' (offsets 104, 109): record t-3@104: ")
    assert (dl.kafka_cluster_id, dl.topic_id) == ("c", "tid")
    assert status.dead_lettered == 2 and status.read == 10 and status.last_offset == 109
    (p,) = RecordingProducer.instances
    assert p.conf["enable.idempotence"] is True and p.conf["acks"] == "all"
    assert [m["value"] for m in p.sent] == [b"{not json", b"\xff\xfe"]
    m = p.sent[0]
    h = dict(m["headers"])
    assert m["topic"] == "dlq" and m["timestamp"] == BASE_TS + 104 and h["h"] == b"104"  # the record's own first
    assert (h["__connect.errors.topic"], h["__connect.errors.partition"], h["__connect.errors.offset"],
            h["__connect.errors.stage"], h["__connect.errors.connector.name"]) == (b"t", b"3", b"104",
                                                                                b"VALUE_CONVERTER", b"j")
    assert h["__connect.errors.exception.class.name"] == b"lakesink.errors.DecodeError"
    assert b"t-3@104" in h["__connect.errors.exception.message"]


def test_without_context_headers_the_original_record_only(tmp_path):
    values = list(GOOD)
    values[2] = b"[1,"
    run(config(tmp_path, **{"errors.deadletterqueue.context.headers.enable": "false"}), values, list(range(10)))
    (p,) = RecordingProducer.instances
    assert p.sent[0]["headers"] == [("h", b"2")]


def test_a_key_that_does_not_decode_is_a_dead_letter_of_the_key_stage(tmp_path):
    keys = [b"k%d" % i for i in range(10)]
    keys[5] = b"\xff"
    rows, status = run(config(tmp_path, **{"key.decoder": "string"}), GOOD, list(range(10)), keys=keys)
    assert status.dead_lettered == 1
    (p,) = RecordingProducer.instances
    assert p.sent[0]["key"] == b"\xff" and dict(p.sent[0]["headers"])["__connect.errors.stage"] == b"KEY_CONVERTER"


def test_only_dead_letters_a_committed_range_covers_are_sent(tmp_path):
    # flush.size 3, no flush of the tail: objects of 0-2, 3+5+6 (the dead letter 4 inside), 7-9; the dead letter
    # at 10 and record 11 stay in the open tail, read again by the next batch: 10 is neither sent nor noted
    values = [b"{" if i in (4, 10) else json.dumps({"i": i}).encode() for i in range(12)]
    rows, status = run(config(tmp_path), values, list(range(12)), flush_tail=False)
    assert max(r.range_end for r in rows if r.kind in CHAIN_KINDS) == 9
    (dl,) = [r for r in rows if r.kind == DEADLETTER]
    assert (dl.first_offset, dl.last_offset) == (4, 4) and status.dead_lettered == 1
    assert len(RecordingProducer.instances[0].sent) == 1


def test_a_batch_of_dead_letters_only_advances_its_range(tmp_path):
    rows, status = run(config(tmp_path), [b"{"] * 4, [7, 8, 9, 10])
    kinds = sorted((r.kind, r.range_start, r.range_end) for r in rows)
    assert kinds == [("advance", 7, 10), ("deadletter", 7, 10)] and status.dead_lettered == 4


def test_tolerance_none_fails_naming_the_record_and_sends_nothing(tmp_path):
    values = list(GOOD)
    values[6] = b"{"
    with pytest.raises(DecodeError, match=r"record t-3@6"):
        run(config(tmp_path, **{"errors.tolerance": "none"}), values, list(range(10)))
    assert RecordingProducer.instances == []


def test_a_failed_delivery_fails_the_task(tmp_path):
    values = list(GOOD)
    values[1] = b"{"
    with pytest.raises(DeadLetterError, match="dead-letter delivery failed .*UNKNOWN_TOPIC"):
        run(config(tmp_path), values, list(range(10)),
            producer=lambda conf: RecordingProducer(conf, fail="KafkaError{code=UNKNOWN_TOPIC_OR_PART}"))


def test_an_unanswered_delivery_fails_within_the_deadline():
    p = DeadLetterProducer({}, 0.5, lambda conf: RecordingProducer(conf, stuck=True))
    from lakesink.executor.deadletter import DeadLetter

    with pytest.raises(DeadLetterError, match=r"1 of 1 records not acknowledged within 0.5 s"):
        p.send_all([DeadLetter("dlq", None, b"x", None, ())])
