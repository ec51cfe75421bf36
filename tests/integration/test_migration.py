"""Migrating from another connector (issue #31 item 4), on the local engine (no Spark: nothing here is engine
specific; the sink's engines are covered elsewhere, and restore's reader is one function for both): the translated
job starts where the old connector's Kafka Connect group stopped (`manifest handover`), and `manifest import` adopts
objects in the old connectors' own naming, built here from their specs (Aiven's README and its jsonl writers,
DeviantArt's block-gzip README, Zooz's README), so `read_archive`, `restore` and `gaps` cover the history: each
adopted archive is restored to a new topic and compared record by record (Aiven's keys, headers and timestamps
too)."""
from __future__ import annotations

import json
import uuid

from support.archive_checks import archived_values, check_chains, manifest_rows, produce, run_cli

from lakesink.config import load_config


def _translate(tmp_path, old: dict, extra: dict) -> tuple[str, str]:
    """``lakesink check --translate`` of the old connector's Connect JSON, plus the keys a user adds (the
    bootstrap servers, the withheld secrets); returns (the translated .properties path, the translation text)."""
    src = tmp_path / "old.json"
    src.write_text(json.dumps(old))
    rc, out = run_cli(["check", "--translate", str(src)], timeout=60)
    assert rc == 0, out[-3000:]
    dst = tmp_path / "lakesink.properties"
    dst.write_text(out + "".join(f"{k}={v}\n" for k, v in extra.items()))
    return str(dst), out


def _group_commit(kafka, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for ``group`` as a Kafka Connect sink task does (a plain offset commit)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def test_handover_starts_the_translated_job_at_the_connect_group(kafka, s3, tmp_path):
    topic = f"handover_{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=2)
    bucket = s3.create_bucket(f"handover-{uuid.uuid4().hex[:8]}")
    sent = produce(kafka, topic, [json.dumps({"i": i}).encode() for i in range(30)], partition_of=lambda i: i % 2)
    assert [len(sent[p]) for p in (0, 1)] == [15, 15]
    name = f"old-{uuid.uuid4().hex[:6]}"
    _group_commit(kafka, f"connect-{name}", {(topic, 0): 10, (topic, 1): 4})
    old = {"name": name, "config": {
        "connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector", "topics": topic,
        "aws.s3.bucket.name": bucket, "aws.s3.endpoint": s3.endpoint_url, "aws.s3.region": "us-east-1",
        "aws.access.key.id": "testing", "aws.secret.access.key": "testing", "format.output.type": "jsonl",
        "file.max.records": "4", "file.compression.type": "none", "tasks.max": "2"}}
    path, text = _translate(tmp_path, old, {"kafka.bootstrap.servers": kafka.bootstrap_servers,
                                            "aws.access.key.id": "testing", "aws.secret.access.key": "testing",
                                            "manifest.engine": "delta-rs"})
    assert f"--from-group connect-{name}" in text and "flush.size=4 carried over from file.max.records" in text

    rc, out = run_cli(["--format", "json", "manifest", "handover", "--config", path, "--from-group",
                       f"connect-{name}"], timeout=120)
    assert rc == 0, out[-3000:]
    doc = json.loads(out.strip().splitlines()[-1])
    assert [(a["partition"], a["range_start"], a["range_end"]) for a in doc["advanced"]] == [(0, 0, 9), (1, 0, 3)]
    rc, out = run_cli(["sink", "--config", path, "--once", "--flush-tail", "--engine", "local"], timeout=240)
    assert rc == 0, out[-3000:]

    cfg = load_config(path)
    rows = manifest_rows(None, cfg)
    assert check_chains(rows) == {(topic, 0): 15, (topic, 1): 15}
    firsts = {p: min(r.first_offset for r in rows if r.kind == "object" and r.kafka_partition == p) for p in (0, 1)}
    assert firsts == {0: 10, 1: 4}  # exactly at the group's offsets: nothing the old connector had is archived again
    values = archived_values(None, cfg)
    assert values[(topic, 0)] == [json.loads(v) for _o, _k, v in sent[0][10:]]
    assert values[(topic, 1)] == [json.loads(v) for _o, _k, v in sent[1][4:]]

    rc, out = run_cli(["--format", "json", "sql", "--engine", "duckdb", "--config", path,
                       "SELECT kafka_partition, start_offset, end_offset, kind, reason FROM gaps "
                       "ORDER BY kafka_partition"], timeout=120)
    assert rc == 0, out[-3000:]
    gaps = json.loads(out.strip().splitlines()[-1])["rows"]
    assert [(g["kafka_partition"], g["start_offset"], g["end_offset"], g["kind"]) for g in gaps] == \
        [(0, 0, 9, "advance"), (1, 0, 3, "advance")]
    assert all(f"Kafka Connect consumer group connect-{name}" in g["reason"] and "handed over" in g["reason"]
               for g in gaps)

    # run again: the manifest already starts there, nothing is committed twice
    rc, out = run_cli(["manifest", "handover", "--config", path, "--from-group", f"connect-{name}"], timeout=120)
    assert rc == 0 and "0 partition(s) advanced" in out and f"left as it is: {topic}-0" in out, out[-3000:]


# -- objects in the old connectors' own naming, built from their specs ---------------------------------------------

def _config(kafka, s3, bucket: str, topic: str, fmt: str) -> dict:
    return {"name": f"adopt-{topic}", "topics": topic, "flush.size": "100", "format.class": fmt,
            "s3.bucket.name": bucket, "s3.region": "us-east-1", "store.url": s3.endpoint_url,
            "aws.access.key.id": "testing", "aws.secret.access.key": "testing", "manifest.engine": "delta-rs",
            "manifest.location": f"s3a://{bucket}/_lakesink/manifest", "kafka.bootstrap.servers": kafka.bootstrap_servers}


def _block_gzip(lines: list[bytes], first_offset: int, per_chunk: int) -> tuple[bytes, bytes]:
    """A DeviantArt Block-GZIP object and its .index.json, as its README describes them: concatenated gzip members
    of ``per_chunk`` newline-terminated records, each chunk's byte_offset, byte_length, byte_length_uncompressed,
    num_records and first_record_offset."""
    import gzip

    body, chunks = b"", []
    for i in range(0, len(lines), per_chunk):
        raw = b"".join(v + b"\n" for v in lines[i:i + per_chunk])
        member = gzip.compress(raw)
        chunks.append({"byte_length_uncompressed": len(raw), "num_records": len(lines[i:i + per_chunk]),
                       "byte_length": len(member), "byte_offset": len(body), "first_record_offset": first_offset + i})
        body += member
    return body, json.dumps({"chunks": chunks}).encode()


def _import(tmp_path, cfg: dict, old: dict, name: str) -> tuple[str, dict]:
    path = str(tmp_path / f"{name}.json")
    (tmp_path / f"{name}.json").write_text(json.dumps(cfg))
    (tmp_path / f"{name}-old.json").write_text(json.dumps(old))
    rc, out = run_cli(["--format", "json", "manifest", "import", "--config", path, "--from",
                       str(tmp_path / f"{name}-old.json")], timeout=120)
    assert rc == 0, out[-3000:]
    return path, json.loads(out.strip().splitlines()[-1])


def _read_local(path: str, whole: bool = False) -> list[tuple]:
    """The adopted archive through read_archive (local engine): (partition, offset, value), or with ``whole`` each
    record's (partition, offset, key, value, headers, timestamp ms or None, timestamp type)."""
    import lakesink
    from lakesink.runners.local import LocalRunner

    with LocalRunner(1) as runner:
        table = lakesink.read_archive(None, load_config(path), runner=runner)
    if not whole:
        return sorted((r["partition"], r["offset"], r["value"]) for r in table.to_pylist())
    return sorted((r["partition"], r["offset"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]],
                   None if r["timestamp"] is None else int(r["timestamp"].timestamp() * 1000), r["timestamp_type"])
                  for r in table.to_pylist())


def _restore_compare(kafka, path: str, records: list[tuple], partitions: int) -> None:
    """Restore the adopted archive to a new topic (local engine) and compare it record by record with ``records``
    (:func:`_read_local` with ``whole``): each partition's keys, values and headers in order, the archived CreateTime
    timestamps as they were (a record without one gets the broker's time)."""
    import lakesink
    from lakesink.runners.local import LocalRunner
    from support.archive_checks import consume

    copy = f"restored_{uuid.uuid4().hex[:8]}"
    kafka.create_topic(copy, partitions=partitions)
    with LocalRunner(1) as runner:
        rep = lakesink.restore(None, load_config(path), to_topic=copy, runner=runner)
    assert rep.produced == len(records)
    for p in range(partitions):
        want = [r for r in records if r[0] == p]
        got = consume(kafka, copy, p)
        assert [(k, v, h) for k, v, h, _ts, _tt in got] == [(r[2], r[3], r[4]) for r in want]
        create_time = 1  # confluent_kafka.TIMESTAMP_CREATE_TIME
        assert [(ts, tt) for (_k, _v, _h, ts, tt), r in zip(got, want) if r[5] is not None] == \
            [(r[5], create_time) for r in want if r[5] is not None]


def test_import_adopts_deviantart_block_gzip_objects_with_their_index(kafka, s3, tmp_path):
    topic = f"da_{uuid.uuid4().hex[:6]}"
    bucket = s3.create_bucket(f"da-{uuid.uuid4().hex[:8]}")
    client = s3.client()
    values = [f"da-{i}".encode() for i in range(8)]
    for first, part, vals in ((0, 0, values[:5]), (5, 0, values[5:]), (0, 1, values[:2])):
        body, index = _block_gzip(vals, first, per_chunk=3)
        base = f"connect/2026-11-27/{topic}-{part:05d}-{first:012d}"
        client.put_object(Bucket=bucket, Key=base + ".gz", Body=body)
        if part == 0:  # partition 1's object has no index: refused, not imported
            client.put_object(Bucket=bucket, Key=base + ".index.json", Body=index)
    client.put_object(Bucket=bucket, Key=f"connect/last_chunk_index.{topic}-00000.txt", Body=b"x")
    old = {"connector.class": "com.spredfast.kafka.connect.s3.sink.S3SinkConnector", "topics": topic,
           "s3.bucket": bucket, "s3.prefix": "connect", "format": "text"}
    path, doc = _import(tmp_path, _config(kafka, s3, bucket, topic, "blockgzip"), old, "da")
    assert [(o["partition"], o["first_offset"], o["last_offset"], o["records"]) for o in doc["imported"]] == \
        [(0, 0, 4, 5), (0, 5, 7, 3)]
    assert all(o["side_files"] == [o["key"][:-3] + ".index.json"] for o in doc["imported"])
    assert doc["refused"] == [f"s3://{bucket}/connect/2026-11-27/{topic}-00001-000000000000.gz: not imported: no "
                              f".index.json next to it"]
    assert doc["unrecognized"] == [f"s3://{bucket}/connect/last_chunk_index.{topic}-00000.txt"]
    records = _read_local(path, whole=True)
    assert records == [(0, i, None, v, [], None, None) for i, v in enumerate(values)]
    _restore_compare(kafka, path, records, partitions=1)

    rc, out = run_cli(["--format", "json", "sql", "--engine", "duckdb", "--config", path,
                       "SELECT (SELECT count(*) FROM objects) AS objects, (SELECT count(*) FROM gaps) AS gaps"],
                      timeout=120)
    assert rc == 0, out[-3000:]
    assert json.loads(out.strip().splitlines()[-1])["rows"] == [{"objects": 2, "gaps": 0}]


def test_import_adopts_aiven_objects(kafka, s3, tmp_path):
    import base64
    import gzip

    import zstandard

    topic = f"aiven_{uuid.uuid4().hex[:6]}"
    bucket = s3.create_bucket(f"aiven-{uuid.uuid4().hex[:8]}")
    client = s3.client()

    import datetime as dt

    now = int(dt.datetime.now(dt.timezone.utc).timestamp()) * 1000 - 60_000  # inside the topic's retention

    def iso(ms: int) -> str:  # DateTimeFormatter.ISO_INSTANT, as Aiven's TimestampBuilder writes it
        t = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
        return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{ms % 1000:03d}" if ms % 1000 else "") + "Z"

    def line(o: int) -> dict:  # a string key (a null one at offset 2), a string and a JSON header, a timestamp
        return {"key": None if o == 2 else f"k{o}", "value": {"n": o}, "offset": o, "timestamp": iso(now + o * 7),
                "headers": [{"key": "src", "value": f"h{o}"}, {"key": "n", "value": o}]}

    def jsonl(first: int, n: int) -> bytes:
        return b"".join(json.dumps(line(o)).encode() + b"\n" for o in range(first, first + n))

    # jsonl, Aiven's default file name template under aws.s3.prefix, gzip and zstd
    client.put_object(Bucket=bucket, Key=f"raw/{topic}-0-0.gz", Body=gzip.compress(jsonl(0, 4)))
    client.put_object(Bucket=bucket, Key=f"raw/{topic}-0-4.zst", Body=zstandard.ZstdCompressor().compress(jsonl(4, 3)))
    client.put_object(Bucket=bucket, Key=f"raw/{topic}-1-0.snappy", Body=b"\x82SNAPPY\x00")
    client.put_object(Bucket=bucket, Key=f"raw/{topic}-1-7.gz", Body=gzip.compress(jsonl(3, 2)))  # lines say 3, 4
    old = {"name": "orders-s3", "config": {
        "connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector", "topics": topic,
        "aws.s3.bucket.name": bucket, "aws.s3.prefix": "raw/", "format.output.type": "jsonl",
        "format.output.fields": "key,value,offset,timestamp,headers", "file.compression.type": "gzip"}}
    path, doc = _import(tmp_path, _config(kafka, s3, bucket, topic, "json"), old, "aiven")
    assert [(o["partition"], o["first_offset"], o["last_offset"]) for o in doc["imported"]] == [(0, 0, 3), (0, 4, 6)]
    assert len(doc["refused"]) == 2 and "snappy" in doc["refused"][0] and \
        "(3..4) do not ascend from 7, the offset its name gives" in doc["refused"][1], doc["refused"]
    records = _read_local(path, whole=True)  # keys, headers and timestamps as the Aiven sink recorded them
    assert records == [(0, o, None if o == 2 else f"k{o}".encode(), json.dumps({"n": o}, separators=(",", ":")).encode(),
                        [("src", f"h{o}".encode()), ("n", str(o).encode())], now + o * 7, "CreateTime")
                       for o in range(7)]
    _restore_compare(kafka, path, records, partitions=1)

    # csv with the value alone, base64 (Aiven's default output), named by a padded template
    csv_topic = f"aivencsv_{uuid.uuid4().hex[:6]}"
    client.put_object(Bucket=bucket, Key=f"csv/{csv_topic}/0/{0:020d}",
                      Body=b"".join(base64.b64encode(f"c{i}".encode()) + b"\n" for i in range(3)) + b"\n")
    old_csv = {"connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector", "topics": csv_topic,
               "aws.s3.bucket.name": bucket, "aws.s3.prefix": "csv/",
               "file.name.template": "{{topic}}/{{partition}}/{{start_offset:padding=true}}"}
    csv_path, doc = _import(tmp_path, _config(kafka, s3, bucket, csv_topic, "json"), old_csv, "aivencsv")
    assert [(o["first_offset"], o["last_offset"]) for o in doc["imported"]] == [(0, 3)]
    assert _read_local(csv_path) == [(0, 0, b"c0"), (0, 1, b"c1"), (0, 2, b"c2"), (0, 3, None)]


def test_import_adopts_zooz_hourly_objects(kafka, s3, tmp_path):
    import gzip

    topic = f"zooz_{uuid.uuid4().hex[:6]}"
    bucket = s3.create_bucket(f"zooz-{uuid.uuid4().hex[:8]}")
    client = s3.client()
    client.put_object(Bucket=bucket, Key="out/date=2026-11-27/hour=10/0_0.json", Body=b"z0\nz1\nz2\n")
    client.put_object(Bucket=bucket, Key="out/date=2026-11-27/hour=11/0_3.json.gz", Body=gzip.compress(b"z3\nz4\n"))
    client.put_object(Bucket=bucket, Key="out/date=2026-11-27/hour=11/1_0.json", Body=b"y0\n")
    old = {"KAFKA_HOST": kafka.bootstrap_servers, "SOURCE_KAFKA_TOPIC": topic, "S3_BUCKET_NAME": bucket}
    cfg = _config(kafka, s3, bucket, topic, "bytearray")
    (tmp_path / "zooz.json").write_text(json.dumps(cfg))
    (tmp_path / "zooz.env").write_text("".join(f"{k}={v}\n" for k, v in old.items()))
    rc, out = run_cli(["--format", "json", "manifest", "import", "--config", str(tmp_path / "zooz.json"), "--from",
                       str(tmp_path / "zooz.env"), "--prefix", "out/"], timeout=120)
    assert rc == 0, out[-3000:]
    doc = json.loads(out.strip().splitlines()[-1])
    assert [(o["partition"], o["first_offset"], o["last_offset"]) for o in doc["imported"]] == \
        [(0, 0, 2), (0, 3, 4), (1, 0, 0)]
    records = _read_local(str(tmp_path / "zooz.json"), whole=True)
    assert [(p, o, v) for p, o, _k, v, *_ in records] == \
        [(0, 0, b"z0"), (0, 1, b"z1"), (0, 2, b"z2"), (0, 3, b"z3"), (0, 4, b"z4"), (1, 0, b"y0")]
    _restore_compare(kafka, str(tmp_path / "zooz.json"), records, partitions=2)


def test_import_refuses_what_cannot_be_adopted_in_one_line(kafka, s3, tmp_path):
    bucket = s3.create_bucket(f"refuse-{uuid.uuid4().hex[:8]}")
    cfg = _config(kafka, s3, bucket, "t1", "json")
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    old = {"connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector", "topics": "t1",
           "aws.s3.bucket.name": bucket, "format.output.fields": "key,value"}
    (tmp_path / "old.json").write_text(json.dumps(old))
    rc, out = run_cli(["manifest", "import", "--config", str(tmp_path / "c.json"), "--from",
                       str(tmp_path / "old.json")], timeout=120)
    lines = out.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith(
        "lakesink: error: Aiven csv objects with format.output.fields=key,value cannot be adopted"), out

    # an Aiven jsonl line whose timestamp is not the ISO-8601 instant Aiven writes: named, nothing committed
    s3.client().put_object(Bucket=bucket, Key="t1-0-0", Body=b'{"value": "v", "timestamp": "yesterday"}\n')
    (tmp_path / "old.json").write_text(json.dumps({**old, "format.output.type": "jsonl",
                                                   "format.output.fields": "value,timestamp",
                                                   "file.compression.type": "none"}))
    rc, out = run_cli(["manifest", "import", "--config", str(tmp_path / "c.json"), "--from",
                       str(tmp_path / "old.json")], timeout=120)
    lines = out.strip().splitlines()
    assert rc == 1 and len(lines) == 1 and lines[0] == (
        f"lakesink: error: s3://{bucket}/t1-0-0: cannot be read as aiven_jsonl: ValueError: line 1: timestamp "
        f"'yesterday' is not an ISO-8601 instant (2020-01-01T00:00:01Z)"), out
    assert "_lakesink/" not in "".join(
        o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket).get("Contents", []))
