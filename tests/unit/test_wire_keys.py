"""Keys decoded from Confluent wire-format Avro (key.decoder=avro) and stored in an Avro .keys side file: the file
is written with the key's registry schema and names its id in the container metadata, a new key schema starts
new files, and read-back re-frames each key in wire format -- byte-identical to the key Kafka held."""
from __future__ import annotations

import json
import uuid

import fastavro
import pyarrow as pa
import pytest

from lakesink.wiring import task_parts
from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.executor.archiver import ArchivedRow, BatchContext
from lakesink.executor.readback import ArchivedObject, read_records
from lakesink.executor.task import archive_partitions, decode_result
from lakesink.objects.formats.avro import KEY_SCHEMA_ID
from lakesink.objects.records import SinkRecord, ValueSchema
from lakesink.objects.partitioners import DefaultPartitioner
from lakesink.objects.rotation import Commit, Rotator, RotationPolicy
from lakesink.schemas.registry import shared_registry_client
from lakesink.store import open_store

K1 = {"type": "record", "name": "Key", "fields": [{"name": "id", "type": "long"}]}
K2 = {**K1, "fields": K1["fields"] + [{"name": "region", "type": ["null", "string"], "default": None}]}


@pytest.fixture
def registry():
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    url = f"mock://{uuid.uuid4().hex}"
    client = shared_registry_client(url)

    def keys(values, schema):
        ser = AvroSerializer(client, json.dumps(schema))
        return [ser(v, SerializationContext("t", MessageField.KEY)) for v in values]

    return url, keys


def config(tmp_path, url, **extra):
    return SinkConfig.from_dict({
        "name": "j", "topics": "t", "format.class": "json", "flush.size": "100", "s3.bucket.name": "bkt",
        "store.url": f"file://{tmp_path}/store", "manifest.location": str(tmp_path / "m"),
        "kafka.bootstrap.servers": "localhost:9", "schema.registry.url": url, "key.decoder": "avro",
        "store.kafka.keys": "true", **extra})


def archive(cfg, keys, start=10):
    n = len(keys)
    batch = pa.RecordBatch.from_pydict({
        "value": pa.array([b'{"v":%d}' % i for i in range(n)], pa.binary()),
        "partition": pa.array([3] * n, pa.int32()), "offset": pa.array(range(start, start + n), pa.int64()),
        "ts": pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64()), "key": pa.array(keys, pa.binary())})
    ctx = BatchContext(job="j", run_id="r", batch_id=0, cluster_id=None, topic_ids={}, flush_tail=True)
    out = list(archive_partitions(iter([batch]), task_parts(cfg), ctx, {("t", 3): (start, start + n)}, None))
    results = [decode_result(r) for r in out[0].column("row").to_pylist()]
    return [r.row for r in results if isinstance(r, ArchivedRow) and r.row.kind == "object"]


def restored_keys(cfg, rows):
    store = open_store(wiring.store_settings(cfg))
    out = []
    for row in sorted(rows, key=lambda r: r.first_offset):
        out += [r.key for r in read_records(store, wiring.value_format(cfg), ArchivedObject.from_row(row),
                                            keys_format=wiring.keys_format(cfg), key_decoder="avro")]
    return out


def keys_file_meta(tmp_path, row):
    side = next(s for s in row.side_files if s.view == "keys")
    with open(tmp_path / "store" / "bkt" / side.key, "rb") as f:
        r = fastavro.reader(f)
        return r.metadata.get(KEY_SCHEMA_ID), r.writer_schema, list(r)


def test_wire_avro_keys_restore_byte_identical(tmp_path, registry):
    url, make = registry
    keys = make([{"id": i} for i in range(6)], K1)
    cfg = config(tmp_path, url)
    (row,) = archive(cfg, keys)
    sid, schema, datums = keys_file_meta(tmp_path, row)
    assert int(sid) == int.from_bytes(keys[0][1:5], "big") and schema["name"] == "Key"
    assert datums == [{"id": i} for i in range(6)]  # Confluent's layout: the key datums with the key's schema
    assert restored_keys(cfg, [row]) == keys


def test_a_new_key_schema_starts_new_files(tmp_path, registry):
    url, make = registry
    keys = make([{"id": 0}, {"id": 1}], K1) + make([{"id": 2, "region": "eu"}], K2) + make([{"id": 3}], K1)
    cfg = config(tmp_path, url)
    rows = archive(cfg, keys)
    assert [(r.first_offset, r.last_offset) for r in rows] == [(10, 11), (12, 12), (13, 13)]
    ids = [int(keys_file_meta(tmp_path, r)[0]) for r in rows]
    assert ids == [int.from_bytes(keys[i][1:5], "big") for i in (0, 2, 3)] and ids[0] != ids[1]
    assert restored_keys(cfg, rows) == keys


def test_keys_files_without_the_id_read_as_json(tmp_path, registry):
    # an archive written before the id was recorded (or Protobuf keys): compact JSON, as before
    url, make = registry
    cfg = config(tmp_path, url)
    rows = archive(cfg, make([{"id": 1}], K1))
    side = next(s for s in rows[0].side_files if s.view == "keys")
    path = tmp_path / "store" / "bkt" / side.key
    buf = path.open("wb")
    fastavro.writer(buf, fastavro.parse_schema(K1), [{"id": 1}])
    buf.close()
    import dataclasses
    import hashlib

    etag = hashlib.md5(path.read_bytes()).hexdigest()
    row = dataclasses.replace(rows[0], side_files=tuple(dataclasses.replace(s, etag=etag, size_bytes=path.stat().st_size)
                                                        if s.view == "keys" else s for s in rows[0].side_files))
    assert restored_keys(cfg, [row]) == [b'{"id":1}']


def test_rotator_commits_on_a_key_schema_change():
    a = ValueSchema(K1, "fa", "t-key", 1, 1)
    a_again = ValueSchema(K1, "fa", "t-key", 1, 1)  # another object, the same id and fingerprint
    b = ValueSchema(K2, "fb", "t-key", 2, 2)
    rot = Rotator(RotationPolicy(flush_size=100, rotate_on_key_schema=True), DefaultPartitioner(), 0)
    events = []
    for off, ks in enumerate([a, a_again, b, b]):
        events += rot.process(SinkRecord("t", 0, off, 1, {"id": off}, b"v", (), None, extra={"key_schema": ks}))
    commits = [e for e in events if isinstance(e, Commit)]
    assert [(c.range_start, c.range_end) for c in commits] == [(0, 1)]
    off_policy = Rotator(RotationPolicy(flush_size=100), DefaultPartitioner(), 0)
    assert not [e for off, ks in enumerate([a, b])
                for e in off_policy.process(SinkRecord("t", 0, off, 1, {}, b"v", (), None, extra={"key_schema": ks}))
                if isinstance(e, Commit)]
