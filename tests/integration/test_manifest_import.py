"""`lakesink manifest import` on a bucket laid out exactly as Confluent's S3 sink quickstart writes it (topic
``s3_topic``, Avro, ``flush.size=3``: three objects of three records in partition 0), plus an overlapping object, a
gap and a foreign key in partition 1; afterwards read_archive and restore work on it."""
from __future__ import annotations

import io
import json
import uuid

import fastavro
from support.archive_checks import base_config, run_cli, write_config

import lakesink
from lakesink.config import SinkConfig

SCHEMA = fastavro.parse_schema({"type": "record", "name": "myrecord", "fields": [{"name": "f1", "type": "string"}]})


def avro_object(values: list[str]) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, SCHEMA, [{"f1": v} for v in values], codec="null")  # Confluent's default avro.codec
    return buf.getvalue()


def test_import_a_confluent_quickstart_bucket_then_read_and_restore(spark, kafka, s3, tmp_path):
    bucket = s3.create_bucket(f"quickstart-{uuid.uuid4().hex[:8]}")
    client = s3.client()
    t = "s3_topic"
    objects = {f"topics/{t}/partition=0/{t}+0+{o:010d}.avro": [f"value{i}" for i in range(o + 1, o + 4)]
               for o in (0, 3, 6)}
    objects[f"topics/{t}/partition=1/{t}+1+{0:010d}.avro"] = ["a0", "a1", "a2"]
    objects[f"topics/{t}/partition=1/{t}+1+{2:010d}.avro"] = ["b2", "b3"]  # overlaps the object before it
    objects[f"topics/{t}/partition=1/{t}+1+{10:010d}.avro"] = ["c10", "c11", "c12"]  # offsets 3..9: a gap
    for key, values in objects.items():
        client.put_object(Bucket=bucket, Key=key, Body=avro_object(values))
    client.put_object(Bucket=bucket, Key=f"topics/{t}/partition=0/notes.txt", Body=b"not an archive object")
    cfg_dict = base_config(kafka, s3, bucket, t, **{"format.class": "avro", "flush.size": "3"})
    path = write_config(tmp_path, cfg_dict)

    rc, out = run_cli(["--format", "json", "manifest", "import", "--config", path], timeout=120)
    assert rc == 0, out[-3000:]
    doc = json.loads(out.strip().splitlines()[-1])
    assert (doc["objects"], doc["records"], doc["batch_id"]) == (5, 15, 0), doc
    assert [(o["partition"], o["first_offset"], o["last_offset"]) for o in doc["imported"]] == \
           [(0, 0, 2), (0, 3, 5), (0, 6, 8), (1, 0, 2), (1, 10, 12)]
    assert len(doc["overlaps"]) == 1 and f"{t}+1+0000000002.avro: offsets 2..3 overlap" in doc["overlaps"][0]
    assert doc["gaps"] == [f"{t}-1: offsets 3..9 are in no object (before s3://{bucket}/topics/{t}/partition=1/"
                           f"{t}+1+0000000010.avro)"]
    assert doc["unrecognized"] == [f"s3://{bucket}/topics/{t}/partition=0/notes.txt"]
    rc, out = run_cli(["manifest", "import", "--config", path], timeout=120)  # again: nothing new
    assert rc == 0 and "imported 0 object(s), 0 record(s); 5 already in the manifest" in out, out[-3000:]

    cfg = SinkConfig.from_dict(cfg_dict)
    rows = sorted(lakesink.read_archive(spark, cfg, where="kafka_partition = 0").collect(), key=lambda r: r.offset)
    assert [r.offset for r in rows] == list(range(9)) and all(r.timestamp is None for r in rows)
    assert [fastavro.schemaless_reader(io.BytesIO(r.value), SCHEMA, None)["f1"] for r in rows] == \
           [f"value{i}" for i in range(1, 10)]

    copy = f"copy_of_{t}_{uuid.uuid4().hex[:6]}"
    kafka.create_topic(copy, partitions=2)
    rep = lakesink.restore(spark, cfg, to_topic=copy)
    assert rep.produced == 15 and [p.produced for p in rep.partitions] == [9, 6]
