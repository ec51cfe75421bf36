"""Adopted history read back whole (issue #31 item 4b): Aiven's jsonl lines give their keys, headers, offsets and
timestamps through Format.record_parts, and a Confluent bucket's tombstone files (keys only, no value object) are
adopted as rows of their own; both read back through the readers read_archive and restore use
(lakesink.executor.readback), on a file:// store and a path manifest."""
from __future__ import annotations

import gzip
import json

import pytest

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.driver.import_formats import foreign_naming
from lakesink.driver.manifest_import import import_archive
from lakesink.errors import CorruptObjectError
from lakesink.executor.archive_tasks import ObjectReader, arrow_record_schema
from lakesink.executor.readback import ArchivedObject, Cut, read_produce_columns, read_record_batch, read_records
from lakesink.objects.formats import FormatSpec
from lakesink.objects.formats.foreign import iso_instant_ms
from lakesink.store import open_store

from support.archive_helpers import archive, batch

AIVEN = {"connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector", "topics": "t",
         "aws.s3.bucket.name": "bkt", "aws.s3.prefix": "raw/", "format.output.type": "jsonl",
         "format.output.fields": "key,value,offset,timestamp,headers", "file.compression.type": "gzip"}

# lines as Aiven's JsonLinesOutputWriter writes them (Jackson, fields in a HashMap's order): a string key
# (StringConverter), a JSON key (JsonConverter struct), a null key; string, JSON and null header values; an
# ISO_INSTANT timestamp with and without milliseconds and a record without one; a tombstone
LINES = [
    {"headers": [{"key": "h", "value": "v0"}, {"key": "n", "value": None}], "offset": 5, "value": {"n": 0},
     "key": "k0", "timestamp": "2026-11-27T10:00:00.123Z"},
    {"headers": [], "offset": 6, "value": "plain text", "key": {"id": 1}, "timestamp": "2026-11-27T10:00:01Z"},
    {"headers": [{"key": "num", "value": 42}], "offset": 8, "value": None, "key": "k2", "timestamp": None},
    {"headers": [{"key": "h", "value": "ü"}], "offset": 9, "value": [1, 2], "key": None,
     "timestamp": "2026-11-27T10:00:03.5Z"},
]
T0 = 1_795_773_600_000  # 2026-11-27T10:00:00Z


def jsonl(lines) -> bytes:
    return b"".join(json.dumps(ln).encode() + b"\n" for ln in lines)


def cfg_of(tmp_path, **extra) -> SinkConfig:
    return SinkConfig.from_dict({"name": "j", "topics": "t", "format.class": "json", "flush.size": "4",
                                 "s3.bucket.name": "bkt", "store.url": f"file://{tmp_path}/store",
                                 "manifest.location": str(tmp_path / "m"), "kafka.bootstrap.servers": "localhost:9",
                                 **extra})


def test_iso_instant_as_aiven_writes_it():
    assert iso_instant_ms("1970-01-01T00:00:00Z") == 0
    assert iso_instant_ms("2026-11-27T10:00:00.123Z") == T0 + 123
    assert iso_instant_ms("2026-11-27T10:00:00.5Z") == T0 + 500
    assert iso_instant_ms("1969-12-31T23:59:59.999Z") == -1
    assert iso_instant_ms(T0) == T0 and iso_instant_ms(None) is None
    with pytest.raises(ValueError, match="not an ISO-8601 instant"):
        iso_instant_ms("2026-11-27 10:00:00")


def test_aiven_jsonl_record_parts():
    parts = FormatSpec("aiven_jsonl", {}).build("gzip").record_parts(gzip.compress(jsonl(LINES)))
    assert parts.values == [b'{"n":0}', b"plain text", None, b"[1,2]"]
    assert parts.keys == [b"k0", b'{"id":1}', b"k2", None]
    assert parts.headers == [[("h", b"v0"), ("n", None)], [], [("num", b"42")], [("h", "ü".encode())]]
    assert parts.offsets == [5, 6, 8, 9]
    assert parts.timestamps == [T0 + 123, T0 + 1000, None, T0 + 3500]
    assert parts.timestamp_types == [0, 0, -1, 0]  # CreateTime; none recorded: NoTimestampType
    only = FormatSpec("aiven_jsonl", {}).build("none").record_parts(b'{"value": "a"}\n{"value": "b"}\n')
    assert (only.values, only.keys, only.headers, only.offsets, only.timestamps) == ([b"a", b"b"], None, None, None,
                                                                                     None)
    with pytest.raises(ValueError, match="line 1: offset '5' is not a number"):
        FormatSpec("aiven_jsonl", {}).build("none").record_parts(b'{"value": "a", "offset": "5"}\n')


@pytest.fixture(scope="module")
def aiven_archive(tmp_path_factory):
    """An Aiven bucket (two objects of partition 0, the second with offsets 5..9 and a compaction gap) adopted by
    ``manifest import --from``."""
    tmp_path = tmp_path_factory.mktemp("aiven")
    cfg = cfg_of(tmp_path)
    store = open_store(wiring.store_settings(cfg))
    first = [{"key": f"a{o}", "value": f"v{o}", "offset": o, "timestamp": "2026-11-27T09:00:00Z",
              "headers": [{"key": "i", "value": str(o)}]} for o in range(5)]
    store.put_bytes("raw/t-0-0.gz", gzip.compress(jsonl(first)))
    store.put_bytes("raw/t-0-5.gz", gzip.compress(jsonl(LINES)))
    report = import_archive(None, cfg, naming=foreign_naming(AIVEN))
    return cfg, report, objects(cfg)


def objects(cfg) -> list[ArchivedObject]:
    """The manifest's object rows, as the readers take them, in offset order."""
    rows = wiring.manifest(cfg, None).arrow(job=cfg.name, kind="object").to_pylist()
    return sorted((ArchivedObject.from_row(r) for r in rows), key=lambda o: (o.kafka_partition, o.first_offset))


def test_import_takes_offsets_and_timestamps_from_aiven_lines(aiven_archive):
    _cfg, report, objs = aiven_archive
    assert report.refused == [] and report.gaps == []
    assert [(o.first_offset, o.last_offset, o.records) for o in report.imported] == [(0, 4, 5), (5, 9, 4)]
    assert [(o.format, o.compression, o.side_files) for o in objs] == [("aiven_jsonl", "gzip", ())] * 2
    assert [(o.min_timestamp_ms, o.max_timestamp_ms) for o in objs] == [(T0 - 3_600_000,) * 2, (T0 + 123, T0 + 3500)]


def test_read_archive_and_restore_readers_give_aiven_keys_headers_timestamps(aiven_archive):
    cfg, _report, objs = aiven_archive
    reader = ObjectReader(wiring.task_parts(cfg))
    recs = [r for o in objs for r in reader.records(o)]
    assert [r.offset for r in recs] == [0, 1, 2, 3, 4, 5, 6, 8, 9]
    assert [r.key for r in recs] == [b"a0", b"a1", b"a2", b"a3", b"a4", b"k0", b'{"id":1}', b"k2", None]
    assert [r.headers for r in recs][4:] == [[("i", b"4")], [("h", b"v0"), ("n", None)], [], [("num", b"42")],
                                             [("h", "ü".encode())]]
    assert [r.timestamp for r in recs][4:] == [T0 - 3_600_000, T0 + 123, T0 + 1000, None, T0 + 3500]
    assert [r.timestamp_type for r in recs][5:] == ["CreateTime", "CreateTime", "NoTimestampType", "CreateTime"]
    assert recs[7].value is None  # a tombstone
    batch_ = read_record_batch(reader.store, reader.value_format(objs[1]), objs[1], arrow_record_schema())
    assert batch_.column("key").to_pylist() == [b"k0", b'{"id":1}', b"k2", None]
    # restore's column reader, with an offset cut inside the object
    cols = read_produce_columns(reader.store, reader.value_format(objs[1]), objs[1], cut=Cut(from_offset=6))
    assert cols.offsets.tolist() == [6, 8, 9] and cols.keys == [b'{"id":1}', b"k2", None]
    assert cols.timestamps == [T0 + 1000, 0, T0 + 3500] and cols.headers == [None, [("num", b"42")],
                                                                             [("h", "ü".encode())]]
    # a time cut inside the object: the lines' timestamps decide
    got = read_records(reader.store, reader.value_format(objs[1]), objs[1], cut=Cut(from_ts=T0 + 500))
    assert [r.offset for r in got] == [6, 9]


def test_aiven_lines_that_disagree_with_the_row_are_named(aiven_archive):
    import dataclasses

    cfg, _report, objs = aiven_archive
    reader = ObjectReader(wiring.task_parts(cfg))
    obj = dataclasses.replace(objs[1], first_offset=4)
    with pytest.raises(CorruptObjectError, match=r"offsets 5\.\.9 .* disagree with the manifest's 4\.\.9"):
        reader.records(obj)


@pytest.mark.parametrize("metadata", ["false", "true"])
def test_confluent_tombstone_files_are_adopted(tmp_path, metadata):
    """The sink's own writer in Confluent's layout with behavior.on.null.values=write: the tombstones' keys file
    (and, with store.kafka.metadata=true, lakesink's metadata file) under <topic>/tombstone/, no value object; no
    manifest. The import adopts it, so its offsets are no gap, and it reads back as null values with its keys."""
    cfg = cfg_of(tmp_path, **{"behavior.on.null.values": "write", "store.kafka.keys": "true", "flush.size": "3",
                              "store.kafka.metadata": metadata})
    values = [b'{"i":0}', b'{"i":1}', b'{"i":2}', None, None, None, b'{"i":6}']
    rows = archive(cfg, [batch(values, list(range(10, 17)), [T0 + i for i in range(7)],
                               keys=[b"k%d" % i for i in range(7)])], 10, 17)
    tomb = [r for r in rows if r.note]
    assert len(tomb) == 1 and "/t/tombstone/t+3+0000000013.keys." in tomb[0].keys_key
    store = open_store(wiring.store_settings(cfg))
    assert store.head(tomb[0].object_key) is None

    report = import_archive(None, cfg)
    assert (report.gaps, report.overlaps, report.unrecognized) == ([], [], [])
    assert [(o.first_offset, o.last_offset, o.records) for o in report.imported] == [(10, 12, 3), (13, 15, 3),
                                                                                    (16, 16, 1)]
    objs = objects(cfg)
    assert [o.value_omitted for o in objs] == [False, True, False] and objs[1].object_key == tomb[0].object_key
    reader = ObjectReader(wiring.task_parts(cfg))
    got = [rec for o in objs for rec in reader.records(o)]
    assert [(r.offset, r.key, r.value) for r in got] == [(10 + i, b"k%d" % i, v) for i, v in enumerate(values)]
    assert import_archive(None, cfg).imported == []  # again: nothing new
