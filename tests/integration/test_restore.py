"""Restore and read_archive end to end (issue #10): real Kafka, moto S3, Spark.

One module fixture sinks one topic per format (avro, json, bytearray, parquet, blockgzip) into ONE shared manifest
(one job per format): records with keys (one empty; the sink refuses null keys with store.kafka.keys), headers (duplicate keys, empty and null values) and non-monotonic
CreateTime timestamps, two partitions. Each format is restored once to ``copy_of_<topic>`` and consumed
``read_committed``: same partitions, order, keys, headers, timestamps; values byte-identical where docs/restore.md
promises it (ByteArray, JSON lines as produced compactly, bare Avro datums, Block-GZIP text lines), equal after
parsing for Parquet. Then read_archive (count, columns, where, orphans never read), the checks that refuse before
producing (missing destination, feedback loop, altered object, bad where) and the CLI as a subprocess.
"""
from __future__ import annotations

import io
import json
import re
import time
import uuid

import fastavro
import pytest
from support.archive_checks import base_config, consume, run_cli, write_config

import lakesink
from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.errors import ArchiveQueryError, ObjectChangedError, RestoreRefusedError, StoreError

FORMATS = ("avro", "json", "bytearray", "parquet", "blockgzip")
SCHEMA = {"type": "record", "name": "Order", "namespace": "lakesink.test",
          "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string"}]}
PARSED = fastavro.parse_schema(SCHEMA)
N = 14  # records per topic, 7 per partition; flush.size 3 → 3 objects per partition (the last one by flush_tail)


def value_of(fmt: str, i: int) -> bytes:
    if fmt in ("avro", "parquet"):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, PARSED, {"id": i, "note": "é" * (i % 3)})
        return buf.getvalue()
    if fmt == "json":
        return json.dumps({"id": i, "note": "é" * (i % 3)}, separators=(",", ":"), ensure_ascii=False).encode()
    if fmt == "bytearray":
        return bytes([0, 255, 13, 200]) + b"raw-%d" % i  # not UTF-8, no separator (newline)
    return ("line %d é" % i).encode()  # blockgzip: text lines


def parsed(fmt: str, v: bytes):
    if fmt in ("avro", "parquet"):
        return fastavro.schemaless_reader(io.BytesIO(v), PARSED, None)
    return json.loads(v) if fmt == "json" else v


def produce_records(kafka, topic: str, fmt: str) -> dict[int, list[tuple]]:
    """{partition: [(key, value, headers, timestamp)]} in offset order."""
    from confluent_kafka import Producer

    now = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": True})
    want: dict[int, list[tuple]] = {0: [], 1: []}
    for i in range(N):
        key = b"key-%d" % i if i != 5 else b""  # store.kafka.keys refuses null keys; an empty one is fine
        headers = [("h", b"%d" % i), ("h", b"dup"), ("empty", b""), ("null", None)]
        ts = now - 3_600_000 + 1000 * i - (60_000 if i % 4 == 1 else 0)
        p.produce(topic, value=value_of(fmt, i), key=key, headers=headers, partition=i % 2, timestamp=ts)
        want[i % 2].append((key, value_of(fmt, i), headers, ts))
    assert p.flush(60) == 0
    return want


def job_config(kafka, s3, bucket: str, topic: str, fmt: str) -> dict:
    over = {"format.class": fmt, "flush.size": "3", "store.kafka.keys": "true", "store.kafka.headers": "true",
            "manifest.location": f"s3a://{bucket}/_lakesink/manifest"}
    if fmt in ("avro", "parquet"):
        over["value.schema"] = json.dumps(SCHEMA)  # bare Avro datums (no registry)
    cfg = base_config(kafka, s3, bucket, topic)
    cfg.update(over)
    return cfg


@pytest.fixture(scope="module")
def archives(spark, kafka, s3):
    """{format: (SinkConfig, topic, produced)}: every format's topic sunk once into one shared manifest."""
    bucket = s3.create_bucket(f"restore-{uuid.uuid4().hex[:10]}")
    out = {}
    for fmt in FORMATS:
        topic = f"src-{fmt}-{uuid.uuid4().hex[:6]}"
        kafka.create_topic(topic, partitions=2)
        want = produce_records(kafka, topic, fmt)
        cfg = SinkConfig.from_dict(job_config(kafka, s3, bucket, topic, fmt))
        res = SinkJob(spark, cfg).run_batch(flush_tail=True)
        assert res.records == N, (fmt, res.summary())
        out[fmt] = (cfg, topic, want)
    return out


def end_offsets(kafka, topic: str, partitions: int = 2) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "ends"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)]
    finally:
        c.close()


def check_copy(kafka, fmt: str, want: dict[int, list[tuple]], copy: str) -> None:
    from confluent_kafka import TIMESTAMP_CREATE_TIME

    for part, records in want.items():
        got = consume(kafka, copy, part)
        assert [(k, h, ts, tt) for k, _v, h, ts, tt in got] == \
               [(k, h, ts, TIMESTAMP_CREATE_TIME) for k, _v, h, ts in records], (fmt, part)
        if fmt == "parquet":  # re-encoded from the Parquet rows: equal after parsing
            assert [parsed(fmt, v) for _k, v, *_ in got] == [parsed(fmt, v) for _k, v, *_ in records]
        else:  # byte-identical
            assert [v for _k, v, *_ in got] == [v for _k, v, *_ in records], fmt


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip(spark, kafka, archives, fmt):
    cfg, topic, want = archives[fmt]
    copy = f"copy_of_{topic}"
    kafka.create_topic(copy, partitions=2)
    rep = lakesink.restore(spark, cfg, to_topic=copy)
    assert rep.produced == N and rep.objects == 6 and [p.topic for p in rep.partitions] == [copy, copy]
    check_copy(kafka, fmt, want, copy)
    again = lakesink.restore(spark, cfg, to_topic=copy)  # same selection, same default name: nothing more
    assert (again.name, again.produced, again.skipped) == (rep.name, 0, N)
    check_copy(kafka, fmt, want, copy)


def test_read_archive_count_columns_where_and_no_orphans(spark, s3, archives):
    cfg, topic, want = archives["json"]
    df = lakesink.read_archive(spark, cfg)
    assert df.columns == ["topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers"]
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    rows = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    assert len(rows) == N
    for part in (0, 1):
        mine = [r for r in rows if r.partition == part]
        assert [(r.key, bytes(r.value), [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers],
                 int(r.timestamp.timestamp() * 1000), r.timestamp_type) for r in mine] == \
               [(k, v, h, ts, "CreateTime") for k, v, h, ts in want[part]]
        assert [r.offset for r in mine] == list(range(7))
    assert lakesink.read_archive(spark, cfg, where="kafka_partition = 1 AND first_offset >= 3").count() == 4
    # an orphan: an uploaded object no manifest row references, named like the job's next object
    key = f"topics/{topic}/partition=0/{topic}+0+{999:010d}.json"
    s3.client().put_object(Bucket=cfg.s3_bucket_name, Key=key, Body=b'{"id":999}\n')
    assert lakesink.read_archive(spark, cfg).count() == N
    assert lakesink.read_archive(spark, cfg, where="object_key LIKE '%0000000999%'").count() == 0


def test_bad_where_is_one_line(spark, archives):
    cfg, _topic, _want = archives["json"]
    with pytest.raises(ArchiveQueryError) as e:
        lakesink.read_archive(spark, cfg, where="no_such_column = 1")
    assert "\n" not in str(e.value) and "no_such_column" in str(e.value) and "UNRESOLVED_COLUMN" in str(e.value)
    with pytest.raises(ArchiveQueryError) as e:
        lakesink.restore(spark, cfg, where="topic = 'x' AND", to_topic="x")  # F.expr would alias it
    assert "\n" not in str(e.value) and "PARSE_SYNTAX_ERROR" in str(e.value)


def test_dry_run_reads_the_manifest_alone(spark, kafka, archives):
    cfg, _topic, _want = archives["bytearray"]
    rep = lakesink.restore(spark, cfg, to_topic="never-created", dry_run=True, where="kafka_partition = 0",
                           from_offset=2)
    assert rep.dry_run and rep.exact and rep.objects == 3 and rep.records == 5 and rep.bytes > 0
    assert [(p.source_partition, p.topic, p.partition) for p in rep.partitions] == [(0, "never-created", 0)]
    assert rep.produced == 0


def test_refusals_before_anything_is_produced(spark, kafka, s3, archives):
    cfg, topic, _want = archives["json"]
    other_topic = archives["avro"][1]
    before = end_offsets(kafka, topic), end_offsets(kafka, other_topic)
    with pytest.raises(RestoreRefusedError, match="does not exist"):
        lakesink.restore(spark, cfg, to_topic=f"missing-{uuid.uuid4().hex[:6]}")
    for dest in (topic, other_topic):  # this job's topic, and another job's of the same manifest
        with pytest.raises(RestoreRefusedError, match="feedback loop"):
            lakesink.restore(spark, cfg, to_topic=dest)
    small = f"small-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(small, partitions=1)
    with pytest.raises(RestoreRefusedError, match="has 1 partition"):
        lakesink.restore(spark, cfg, to_topic=small)
    assert (end_offsets(kafka, topic), end_offsets(kafka, other_topic)) == before
    assert end_offsets(kafka, small, 1) == [0]


def test_altered_object_is_named_and_nothing_is_produced(spark, kafka, s3):
    bucket = s3.create_bucket(f"altered-{uuid.uuid4().hex[:10]}")
    topic = f"src-alt-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, partitions=2)
    produce_records(kafka, topic, "json")
    cfg = SinkConfig.from_dict(job_config(kafka, s3, bucket, topic, "json"))
    SinkJob(spark, cfg).run_batch(flush_tail=True)
    key = f"topics/{topic}/partition=1/{topic}+1+{3:010d}.json"
    s3.client().put_object(Bucket=bucket, Key=key, Body=b'{"id":"tampered"}\n' * 3)
    copy = f"copy_of_{topic}"
    kafka.create_topic(copy, partitions=2)
    with pytest.raises(ObjectChangedError, match=re.escape(f"{key} was altered after it was archived")):
        lakesink.restore(spark, cfg, to_topic=copy)
    assert end_offsets(kafka, copy) == [0, 0]


def test_missing_side_file_is_named_and_nothing_is_produced(spark, kafka, s3):
    """The driver checks every file of the selected objects before producing (one listing per directory on S3): a
    side file deleted from the store is named, and nothing is produced."""
    bucket = s3.create_bucket(f"gone-{uuid.uuid4().hex[:10]}")
    topic = f"src-gone-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, partitions=2)
    produce_records(kafka, topic, "json")
    cfg = SinkConfig.from_dict(job_config(kafka, s3, bucket, topic, "json"))  # keys and headers stored
    SinkJob(spark, cfg).run_batch(flush_tail=True)
    listed = s3.client().list_objects_v2(Bucket=bucket, Prefix=f"topics/{topic}/partition=0/")["Contents"]
    key = sorted(o["Key"] for o in listed if ".keys." in o["Key"])[1]
    s3.client().delete_object(Bucket=bucket, Key=key)
    copy = f"copy_of_{topic}"
    kafka.create_topic(copy, partitions=2)
    with pytest.raises(StoreError, match=re.escape(f"s3://{bucket}/{key} is missing: the manifest records it")):
        lakesink.restore(spark, cfg, to_topic=copy)
    assert end_offsets(kafka, copy) == [0, 0]


def test_cli_restore_dry_run_json_run_text_and_bad_where(kafka, archives, tmp_path):
    cfg, topic, want = archives["blockgzip"]
    path = write_config(tmp_path, cfg.as_dict(redact=False))
    # a path manifest on a local master: no JVM at all (the Spark jars are nowhere to be found, and nothing asks)
    no_spark = {"PYTHONFAULTHANDLER": "1", "LAKESINK_JARS_DIR": str(tmp_path / "no-spark-jars")}
    rc, out = run_cli(["--format", "json", "restore", "--config", path, "--topic-map", r"src-(.*)=copy2_\1",
                       "--dry-run", "--master", "local[1]"], env_extra=no_spark)
    assert rc == 0, (rc, out[-3000:])
    doc = json.loads(out.strip().splitlines()[-1])
    copy = "copy2_" + topic[len("src-"):]
    assert (doc["dry_run"], doc["objects"], doc["records"], doc["produced"]) == (True, 6, N, 0)
    assert {p["topic"] for p in doc["partitions"]} == {copy}
    kafka.create_topic(copy, partitions=2)
    rc, out = run_cli(["restore", "--config", path, "--topic-map", r"src-(.*)=copy2_\1", "--master", "local[1]"],
                      env_extra=no_spark)
    assert rc == 0, (rc, out[-3000:])
    assert f"{N} record(s) produced, 0 already restored, 2 partition(s)" in out
    assert f"{topic}-0" in out and f"{copy}-1" in out
    check_copy(kafka, "blockgzip", want, copy)
    rc, out = run_cli(["restore", "--config", path, "--where", "nope > 1", "--to-topic", "x", "--master", "local[1]"],
                      env_extra=no_spark)
    errors = [ln for ln in out.splitlines() if ln.startswith("lakesink:")]
    assert rc == 2, out[-3000:]
    assert len(errors) == 1 and "nope" in errors[0] and "Traceback" not in out, out[-3000:]


def test_blockgzip_cut_fetches_only_the_needed_chunks_from_s3(s3, tmp_path):
    """A cut inside a Block-GZIP object on (moto) S3: only the index and the chunks holding the cut are fetched,
    by ranged GETs; the bytes counted are what S3 returned."""
    from support.archive_helpers import BASE_TS, CountingStore, archive, batch

    from lakesink import wiring
    from lakesink.executor.readback import ArchivedObject, Cut, read_records
    from lakesink.objects.formats.blockgzip import parse_index, plan_chunk_reads
    from lakesink.store import open_store

    n = 300
    bucket = s3.create_bucket(f"bgz-{uuid.uuid4().hex[:10]}")
    cfg = SinkConfig.from_dict({
        "name": "j", "topics": "t", "format.class": "blockgzip", "flush.size": str(n), "blockgzip.block.size": "400",
        "s3.bucket.name": bucket, "s3.region": "us-east-1", "store.url": s3.endpoint_url,
        "aws.access.key.id": "testing", "aws.secret.access.key": "testing",
        "manifest.location": str(tmp_path / "m"), "kafka.bootstrap.servers": "localhost:9"})
    values = [f"line {i} {'z' * (i % 23)} é".encode() for i in range(n)]
    (row,) = archive(cfg, [batch(values, list(range(n)), [BASE_TS + i for i in range(n)], [0] * n)], 0, n)
    obj = ArchivedObject.from_row(row)
    store = CountingStore(open_store(wiring.store_settings(cfg)))
    index = parse_index(store.store.read(obj.side("index")["key"]))
    size = store.store.head(obj.object_key).size
    got = read_records(store, wiring.value_format(cfg), obj, cut=Cut(from_offset=150, to_offset=154))
    assert [(r.offset, r.value) for r in got] == [(i, values[i]) for i in range(150, 155)]
    ranged = [br for k, br in store.reads if k == obj.object_key]
    want = plan_chunk_reads(index, range(150, 155))
    assert ranged == [(r.byte_start, r.byte_end) for r in want]
    value_bytes = store.fetched - sum(len(store.store.read(k)) for k, br in store.reads if k != obj.object_key)
    assert value_bytes == sum(b - a + 1 for a, b in ranged) and value_bytes < size / 5, (value_bytes, size)


@pytest.fixture(scope="module")
def local_runner():
    """Two local worker processes: the runner the local engine gives restore and read_archive."""
    from lakesink.runners.local import LocalRunner

    with LocalRunner(2) as runner:
        yield runner


def _record_tuples(rows) -> list[tuple]:
    # the instant: Arrow gives an aware UTC datetime, Spark's collect a naive local one (both .timestamp() alike)
    return sorted((r["partition"], r["offset"], r["key"], r["value"], r["timestamp"].timestamp(), r["timestamp_type"],
                   [(h["key"], h["value"]) for h in (r["headers"] or [])]) for r in rows)


@pytest.mark.parametrize("fmt", ["avro", "parquet"])
def test_read_archive_reads_the_same_records_on_every_runner(spark, archives, local_runner, fmt):
    """read_archive takes a runner: local worker processes give an Arrow table of exactly the records Spark's
    DataFrame holds (same columns, same bytes)."""
    import pyarrow as pa

    cfg, _topic, _want = archives[fmt]
    on_spark = lakesink.read_archive(spark, cfg)
    local = lakesink.read_archive(spark, cfg, runner=local_runner)
    assert isinstance(local, pa.Table) and local.column_names == on_spark.columns
    spark_rows = [r.asDict(recursive=True) for r in on_spark.collect()]
    assert len(spark_rows) == local.num_rows == N
    assert _record_tuples(local.to_pylist()) == _record_tuples(spark_rows)
    empty = lakesink.read_archive(spark, cfg, where="kafka_partition = 9", runner=local_runner)
    assert empty.num_rows == 0 and empty.column_names == on_spark.columns


def test_restore_runs_on_the_local_runner(spark, kafka, archives, local_runner):
    """restore takes a runner: its tasks in local worker processes produce the same copy, exactly once."""
    cfg, topic, want = archives["bytearray"]
    copy = f"local_copy_of_{topic}"
    kafka.create_topic(copy, partitions=2)
    rep = lakesink.restore(spark, cfg, to_topic=copy, runner=local_runner)
    assert rep.produced == N and [p.produced for p in rep.partitions] == [N // 2, N // 2]
    check_copy(kafka, "bytearray", want, copy)
    again = lakesink.restore(spark, cfg, to_topic=copy, runner=local_runner)
    assert (again.produced, again.skipped) == (0, N)
    check_copy(kafka, "bytearray", want, copy)


def test_time_window_dry_run_is_exact_and_the_window_restore_reads_only_its_objects(spark, kafka, archives,
                                                                                       local_runner):
    """A time window inside objects (issue #30 item 2): the dry run counts its records exactly from the metadata
    side files (it said "at most" the objects' whole counts); the restore reads only the objects the manifest's
    timestamp bounds let the window reach and produces exactly the window's records, on the local runner."""
    cfg, topic, want = archives["avro"]
    base = want[0][0][3]  # record 0's timestamp; record i's is base + 1000 i (60 s earlier when i % 4 == 1)
    lo, hi = base + 3000, base + 10_000
    inside = {p: [r for r in recs if lo <= r[3] <= hi] for p, recs in want.items()}
    assert sum(map(len, inside.values())) == 6
    rep = lakesink.restore(spark, cfg, to_topic="never-created", dry_run=True, from_time=lo, to_time=hi)
    assert rep.exact and rep.records == 6 and rep.objects == 4  # 2 of the 6 objects are outside the window
    copy = f"window_of_{topic}"
    kafka.create_topic(copy, partitions=2)
    run = lakesink.restore(spark, cfg, to_topic=copy, from_time=lo, to_time=hi, runner=local_runner)
    assert (run.produced, run.objects_read) == (6, 4)
    check_copy(kafka, "avro", inside, copy)
