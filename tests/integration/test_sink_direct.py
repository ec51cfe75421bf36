"""The direct reader (``kafka.reader=direct``, librdkafka in the executors) against Spark's Kafka source:
byte-identical objects and manifest rows; transactions under read_committed; ranges the broker no longer has."""
from __future__ import annotations

import io
import json
import time

import fastavro
import pytest
from support.archive_checks import (AVRO_SCHEMA, archived_values, avro_values, base_config, check_chains, json_payloads,
                                    manifest_rows, produce)

from lakesink.config import SinkConfig
from lakesink import wiring
from lakesink.driver.sink import SinkJob
from lakesink.executor.columnar import ColumnarPlan
from lakesink.manifest.rows import value_omitted
from lakesink.errors import BatchFailedError, KafkaReadError
from lakesink.executor.kafka_reader import consumer_config, read_range

FORMATS = {
    "json": ({"format.class": "json"}, json_payloads),
    "bytearray": ({"format.class": "bytearray"}, json_payloads),
    "avro": ({"format.class": "avro", "value.schema": json.dumps(AVRO_SCHEMA)}, avro_values),
    # the direct reader decodes each batch a column at a time (avro_arrow), Spark's reader with from_avro
    "parquet": ({"format.class": "parquet", "value.schema": json.dumps(AVRO_SCHEMA)}, avro_values),
}


def comparable_objects(s3, bucket: str, rows) -> dict[str, bytes]:
    """Every committed object and side file, Avro sync markers masked (random per file)."""
    client, out = s3.client(), {}
    keys = [r.object_key for r in rows if r.object_key and not value_omitted(r)] + \
        [s.key for r in rows for s in (r.side_files or ())]
    for key in keys:
        data = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        if key.endswith(".avro"):
            data = data.replace(fastavro.block_reader(io.BytesIO(data))._header["sync"], b"<sync-marker-16>")
        out[key] = data
    return out


def differing_metadata(objects: dict[str, dict[str, bytes]]) -> list:
    """The decoded record-metadata records that differ between the readers' side files (a failure's clue)."""
    decoded = {r: {k: list(fastavro.reader(io.BytesIO(v))) for k, v in objs.items() if k.endswith(".metadata.avro")}
               for r, objs in objects.items()}
    first, *rest = decoded
    return [(r, key, i, a, b) for r in rest for key, recs in decoded[first].items()
            for i, (a, b) in enumerate(zip(recs, decoded[r].get(key, []))) if a != b][:10] or "no record differs"


def comparable_rows(rows) -> list[dict]:
    out = []
    for r in rows:
        d = r.asDict(recursive=True)
        for k in ("run_id", "committed_at", "object_uri"):  # object_uri names the bucket
            d.pop(k, None)
        if d["format"] == "avro":
            d.pop("etag")  # Avro sync markers are random per file
        for s in d.get("side_files") or ():
            if s["key"].endswith(".avro"):
                s.pop("etag")
        out.append(d)
    return sorted(out, key=lambda d: json.dumps(d, sort_keys=True, default=str))


@pytest.fixture(scope="module")
def local_tasks():
    """Two local worker processes (the CLI's local engine), shared by this module's tests."""
    from lakesink.runners.local import LocalRunner

    with LocalRunner(2) as runner:
        yield runner


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_both_readers_write_identical_archives(spark, kafka, s3, topic_name, fmt, local_tasks):
    """Spark's Kafka source, the direct reader in Spark tasks, and the direct reader in local worker processes
    (no Spark): the same objects, byte for byte, and the same manifest rows."""
    kafka.create_topic(topic_name, partitions=2)
    over, payloads = FORMATS[fmt]
    produce(kafka, topic_name, payloads(230), partition_of=lambda i: i % 2, headers=True)
    cfgs, engines = {}, {"direct": None, "spark": None, "local": local_tasks}
    for name in engines:
        bucket = s3.create_bucket(f"rd-{name}-{topic_name}")
        cfgs[name] = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
            **over, "name": f"job-{topic_name}", "flush.size": "40",
            "kafka.reader": "spark" if name == "spark" else "direct"}))
        job = SinkJob(spark, cfgs[name], runner=engines[name])
        job.run_batch()  # full files only: tails stay open ...
    produce(kafka, topic_name, payloads(50, start=230), partition_of=lambda i: i % 2, headers=True)
    for name in engines:
        SinkJob(spark, cfgs[name], runner=engines[name]).run_batch(flush_tail=True)  # ... re-read, then closed
    rows = {r: manifest_rows(spark, c) for r, c in cfgs.items()}
    check_chains(rows["direct"], {(topic_name, 0): 140, (topic_name, 1): 140})
    objects = {r: comparable_objects(s3, cfgs[r].s3_bucket_name, rows[r]) for r in rows}
    assert comparable_rows(rows["direct"]) == comparable_rows(rows["spark"]) == comparable_rows(rows["local"]), \
        differing_metadata(objects)
    assert len(objects["direct"]) == 16  # 8 values + their .metadata.avro
    assert objects["direct"] == objects["spark"] == objects["local"]
    assert archived_values(spark, cfgs["direct"]) == archived_values(spark, cfgs["spark"])


def test_local_tasks_need_a_config_spark_only_schedules(spark, kafka, s3, bucket, topic_name, local_tasks):
    """Spark's Kafka source cannot run in local workers: the job refuses at once, naming why."""
    from lakesink.errors import InvalidArgumentError

    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{"kafka.reader": "spark"}))
    with pytest.raises(InvalidArgumentError, match="local worker processes cannot run this config: kafka.reader=spark reads Kafka with Spark"):
        SinkJob(spark, cfg, runner=local_tasks)


def test_stored_keys_and_headers_identical(spark, kafka, s3, topic_name, local_tasks):
    """The record path with every optional column (key, headers; two topics add ``topic``), and tombstones written
    (``behavior.on.null.values=write``: keys, headers and metadata side files under ``tombstone/``, no value
    object), by Spark's Kafka source, the direct reader in Spark tasks and in local worker processes."""
    kafka.create_topic(topic_name, partitions=1)
    payloads = [None if i % 6 == 5 else v for i, v in enumerate(json_payloads(25))]
    produce(kafka, topic_name, payloads, headers=True)
    cfgs, engines = {}, {"direct": None, "spark": None, "local": local_tasks}
    for reader, runner in engines.items():
        bucket = s3.create_bucket(f"kh-{reader}-{topic_name}")
        cfgs[reader] = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
            "name": f"job-{topic_name}", "store.kafka.keys": "true", "store.kafka.headers": "true",
            "keys.format.class": "json", "headers.format.class": "json", "behavior.on.null.values": "write",
            "kafka.reader": "spark" if reader == "spark" else "direct"}))
        SinkJob(spark, cfgs[reader], runner=runner).run_batch(flush_tail=True)
    rows = {r: manifest_rows(spark, c) for r, c in cfgs.items()}
    direct = comparable_rows(rows["direct"])
    for other in ("spark", "local"):
        theirs = comparable_rows(rows[other])
        assert direct == theirs, [(x.get("object_key"), k, x.get(k), y.get(k)) for x, y in zip(direct, theirs)
                                  for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)][:10]
    objects = {r: comparable_objects(s3, cfgs[r].s3_bucket_name, rows[r]) for r in rows}
    tombs = [r for r in rows["direct"] if r.encoded_partition == "tombstone"]
    assert sum(r.record_count for r in tombs) == payloads.count(None) == 4
    assert all(r.note.startswith("tombstones:") and r.object_key not in objects["direct"] for r in tombs)
    # 3 value objects with keys, headers, metadata; the tombstone file's keys, headers, metadata
    assert len(objects["direct"]) == 12 + 3 * len(tombs) and objects["direct"] == objects["spark"] == objects["local"]
    assert all(f"/{topic_name}/tombstone/" in s.key for r in tombs for s in r.side_files)


def test_stored_keys_and_headers_columnar_identical(spark, kafka, s3, topic_name, local_tasks):
    """Keys and headers side files (Avro) written a column at a time (issue #30: the columnar path takes them) by
    Spark's Kafka source, the direct reader in Spark tasks and in local worker processes: the same rows and objects."""
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(25), headers=True)
    cfgs, engines = {}, {"direct": None, "spark": None, "local": local_tasks}
    for reader, runner in engines.items():
        bucket = s3.create_bucket(f"khc-{reader}-{topic_name}")
        cfgs[reader] = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
            "name": f"job-{topic_name}", "store.kafka.keys": "true", "store.kafka.headers": "true",
            "kafka.reader": "spark" if reader == "spark" else "direct"}))
        assert ColumnarPlan.for_parts(wiring.task_parts(cfgs[reader])) is not None
        SinkJob(spark, cfgs[reader], runner=runner).run_batch(flush_tail=True)
    rows = {r: manifest_rows(spark, c) for r, c in cfgs.items()}
    direct = comparable_rows(rows["direct"])
    assert direct == comparable_rows(rows["spark"]) == comparable_rows(rows["local"])
    objects = {r: comparable_objects(s3, cfgs[r].s3_bucket_name, rows[r]) for r in rows}
    assert len(objects["direct"]) == 12 and objects["direct"] == objects["spark"] == objects["local"]


def test_aborted_transactions_are_skipped_and_the_manifest_advances(spark, kafka, s3, bucket, topic_name):
    from confluent_kafka import Producer

    kafka.create_topic(topic_name, partitions=1)
    p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"tx-{topic_name}"})
    p.init_transactions(30)
    committed, n = [], 0
    for commit, count in ((True, 10), (False, 5), (True, 12), (False, 4), (True, 3), (False, 6)):
        p.begin_transaction()
        for _ in range(count):
            v = json.dumps({"id": n, "committed": commit}).encode()
            p.produce(topic_name, value=v, key=b"k")
            if commit:
                committed.append(json.loads(v))
            n += 1
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    end = n + 6  # one marker per transaction
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{"flush.size": "7"}))
    assert cfg.kafka_reader == "direct"
    first = SinkJob(spark, cfg).run_batch(flush_tail=True)
    assert first.partitions[0].end == end
    SinkJob(spark, cfg).run_batch(flush_tail=True)  # the trailing aborted records + markers: an advance row
    rows = manifest_rows(spark, cfg)
    check_chains(rows, {(topic_name, 0): end})
    assert archived_values(spark, cfg)[(topic_name, 0)] == committed
    assert sum(r.record_count for r in rows if r.kind == "object") == len(committed)


def test_a_range_the_broker_no_longer_has_fails_naming_the_partition(kafka, topic_name):
    """An end past the log's end (EOF below it) and a start deleted after planning: one KafkaReadError each."""
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(20), headers=False)
    conf = consumer_config({"bootstrap.servers": kafka.bootstrap_servers}, "lakesink-test")
    batches = list(read_range(conf, topic_name, 0, 5, 20))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(5, 20))
    from confluent_kafka import KafkaError
    from support.consumers import recording

    answers: list = []  # what each poll of the read answered
    with pytest.raises(KafkaReadError, match=rf"^{topic_name}-0: the broker's log ends at offset 20, before the "
                                             r"planned end 25"):
        list(read_range(conf, topic_name, 0, 5, 25, consumer_factory=recording(answers)))
    # the event, not a timing: the broker's first end-of-partition event (offset 20) ended the read, no poll after it
    eofs = [(i, off) for i, a in enumerate(answers) for off, code in a if code == KafkaError._PARTITION_EOF]
    assert eofs == [(len(answers) - 1, 20)], answers

    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    for f in admin.delete_records([TopicPartition(topic_name, 0, 10)], request_timeout=30).values():
        f.result(30)
    with pytest.raises(KafkaReadError, match=rf"^{topic_name}-0: reading \[5, 20\) failed at offset 5: .*"):
        list(read_range(conf, topic_name, 0, 5, 20))


def test_an_unreachable_broker_fails_in_bounded_time(kafka, topic_name):
    conf = consumer_config({"bootstrap.servers": "127.0.0.1:1", "socket.connection.setup.timeout.ms": "1000"},
                           "lakesink-test")
    from support.clock import FakeClock
    from support.consumers import recording

    clock, answers = FakeClock(tick=1, max_reads=100), []  # the stall bound's clock moves 1 s a reading
    with pytest.raises(KafkaReadError, match=rf"^{topic_name}-0: reading \[0, 5\) made no progress for 3s"):
        list(read_range(conf, topic_name, 0, 0, 5, stall_timeout_s=3, consumer_factory=recording(answers),
                        clock=clock))
    # counts, not timings: the broker answered none of the read's polls, and the 3 s bound ended it on the 4th
    assert len(answers) == 4 and not any(answers), answers


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_truncated_range_fails_the_batch_and_commits_nothing(spark, kafka, s3, bucket, topic_name, monkeypatch,
                                                             engine, request):
    """Records deleted past the planned start between planning and reading: the batch fails, naming
    the partition and cause, and commits nothing -- in Spark tasks and in local worker processes alike."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(30), headers=False)
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name))
    job = SinkJob(spark, cfg, runner=request.getfixturevalue("local_tasks") if engine == "local" else None)
    plan = job.plan

    def plan_then_truncate():
        out = plan()
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        for f in admin.delete_records([TopicPartition(topic_name, 0, 12)], request_timeout=30).values():
            f.result(30)
        return out

    monkeypatch.setattr(job, "plan", plan_then_truncate)
    with pytest.raises(BatchFailedError, match=rf"nothing was committed: KafkaReadError: {topic_name}-0: reading "
                                              r"\[0, 30\) failed at offset 0"):
        job.run_batch(flush_tail=True)
    assert manifest_rows(spark, cfg) == []


def test_time_partitioned_columnar_equals_the_record_path(spark, kafka, s3, topic_name, local_tasks, monkeypatch):
    """Hourly in a DST zone on Record timestamps (issue #30 item 6): Spark's Kafka source and the local workers take
    the columnar path (files cut from the timestamp column) and write the objects and manifest rows the record path
    writes, for CreateTimes that cross local midnight and hours and go backwards, files closed by rotate.interval.ms,
    by partition change, by flush.size and, in a second batch that re-reads the open tails, by --flush-tail."""
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    kafka.create_topic(topic_name, partitions=2)
    ny = ZoneInfo("America/New_York")
    # the last local midnight whose records (up to ~7 h after it) are all in the past: the broker refuses a
    # CreateTime more than an hour ahead (log.message.timestamp.after.max.ms), and retention keeps a day-old one
    midnight = (datetime.now(ny) - timedelta(hours=9)).replace(hour=0, minute=0, second=0, microsecond=0)
    at = int((midnight - timedelta(hours=2)).timestamp() * 1000)
    steps = [0, 4 * 60_000, 9 * 60_000, -7 * 60_000, 25 * 60_000, 1, 0, -50 * 60_000, 40 * 60_000, 13 * 60_000]
    ts = []
    for i in range(160):
        at += steps[(i * 7) % len(steps)]
        ts.append(at)
    assert ts[0] < midnight.timestamp() * 1000 < ts[-1] < time.time() * 1000
    payloads = json_payloads(160)
    produce(kafka, topic_name, payloads[:120], partition_of=lambda i: i % 2, headers=False, timestamps=ts[:120])
    cfgs, engines = {}, {"spark": None, "local": local_tasks, "record": local_tasks}
    for name in engines:
        bucket = s3.create_bucket(f"tc-{name}-{topic_name}")
        cfgs[name] = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
            "name": f"job-{topic_name}", "flush.size": "17", "partitioner.class": "hourly", "locale": "en",
            "timezone": "America/New_York", "timestamp.extractor": "Record", "rotate.interval.ms": str(30 * 60_000),
            "kafka.reader": "spark" if name == "spark" else "direct"}))
    assert ColumnarPlan.for_parts(wiring.task_parts(cfgs["local"])) is not None
    took = {name: 0 for name in engines}

    def batch(flush_tail: bool) -> None:
        for name, runner in engines.items():
            with monkeypatch.context() as m:
                if name == "record":  # the plan is made on the driver: without it the tasks go record by record
                    m.setattr(ColumnarPlan, "for_parts", classmethod(lambda cls, parts: None))
                res = SinkJob(spark, cfgs[name], runner=runner).run_batch(flush_tail=flush_tail)
            took[name] += res.columnar_records

    batch(False)  # files closed on time and by flush.size; the others stay open ...
    produce(kafka, topic_name, payloads[120:], partition_of=lambda i: i % 2, headers=False, timestamps=ts[120:])
    batch(True)  # ... and are re-read with the new records, then closed
    rows = {r: manifest_rows(spark, c) for r, c in cfgs.items()}
    check_chains(rows["record"], {(topic_name, 0): 80, (topic_name, 1): 80})
    objects = {r: comparable_objects(s3, cfgs[r].s3_bucket_name, rows[r]) for r in rows}
    assert comparable_rows(rows["record"]) == comparable_rows(rows["spark"]) == comparable_rows(rows["local"]), \
        differing_metadata(objects)
    assert objects["record"] == objects["spark"] == objects["local"]
    hours = {r.encoded_partition for r in rows["record"] if r.kind == "object"}
    assert len(hours) > 3 and any("hour=23" in h for h in hours) and any("hour=00" in h for h in hours)
    assert took["record"] == 0 and took["spark"] == took["local"] >= 160  # tails re-read count again
