"""Records read back (lakesink.executor.readback) from objects the archiver wrote with the real writers: every
value format and codec the sink writes, with and without keys/headers/metadata side files; offsets, timestamps
and their types from the .metadata.avro side file; cuts; the failures that name the object."""
from __future__ import annotations

import dataclasses
import io
import json

import fastavro
import pytest

from lakesink import wiring
from lakesink.errors import (CorruptObjectError, MissingRecordMetadataError, ObjectChangedError,
                             RecordCountMismatchError)
from lakesink.executor.archive_tasks import arrow_record_schema, records_batch
from lakesink.executor.readback import ArchivedObject, Cut, read_object, read_record_batch, read_records
from lakesink.objects.formats.base import RecordView
from lakesink.objects.formats.metadata import METADATA_SCHEMA, MetadataFormat
from lakesink.objects.naming import KeyExtensions, NamingSettings, parse_key
from lakesink.store import open_store

from support.archive_helpers import (BASE_TS, HEADERS, PARSED, SCHEMA, archive, avro_datum, batch, config, headers_of,
                                     value_bytes)

def formats(cfg):
    keys = wiring.keys_format(cfg) if cfg.store_kafka_keys else None
    headers = wiring.headers_format(cfg) if cfg.store_kafka_headers else None
    return wiring.value_format(cfg), keys, headers


def read_all(cfg, rows, **kw) -> list:
    """Every record of ``rows``' objects; read_record_batch (read_archive's column-at-a-time path) must give the
    same records as read_records."""
    store = open_store(wiring.store_settings(cfg))
    vfmt, kfmt, hfmt = formats(cfg)
    schema = arrow_record_schema()
    kw = {"key_decoder": cfg.key_decoder, **kw}
    out = []
    for row in sorted(rows, key=lambda r: r.first_offset):
        obj = ArchivedObject.from_row(row)
        recs = read_records(store, vfmt, obj, keys_format=kfmt, headers_format=hfmt, **kw)
        got = read_record_batch(store, vfmt, obj, schema, keys_format=kfmt, headers_format=hfmt, **kw)
        if recs:
            assert got.equals(records_batch(recs, schema)), (got.to_pylist()[:2], records_batch(recs).to_pylist()[:2])
        else:
            assert got is None or got.num_rows == 0
        out += recs
    return out


def sample(fmt: str, n: int = 11, gap: bool = True):
    offsets = [10 + i + (3 if gap and i >= 5 else 0) for i in range(n)]  # a gap of 3 after the 5th record
    timestamps = [BASE_TS + 1000 * i - (50_000 if i == 2 else 0) for i in range(n)]  # not monotonic
    types = [1 if i == 7 else 0 for i in range(n)]
    values = [value_bytes(fmt, i) for i in range(n)]
    keys = [b"k\x00%d" % i for i in range(n)]
    headers = [headers_of(i) for i in range(n)]
    return offsets, timestamps, types, values, keys, headers


VALUE_CONFIGS = {
    "bytearray": ("bytearray", {}),
    "bytearray-gzip": ("bytearray", {"s3.compression.type": "gzip"}),
    "json": ("json", {}),
    "json-gzip": ("json", {"s3.compression.type": "gzip"}),
    "blockgzip": ("blockgzip", {}),
    "blockgzip-bzip2": ("blockgzip", {"blockgzip.compression": "bzip2"}),
    "avro-null": ("avro", {}),
    "avro-deflate": ("avro", {"avro.codec": "deflate"}),
    "avro-snappy": ("avro", {"avro.codec": "snappy"}),
    "avro-bzip2": ("avro", {"avro.codec": "bzip2"}),
    "avro-xz": ("avro", {"avro.codec": "xz"}),
    "parquet-snappy": ("parquet", {}),
    "parquet-none": ("parquet", {"parquet.codec": "none"}),
    "parquet-gzip": ("parquet", {"parquet.codec": "gzip"}),
    "parquet-zstd": ("parquet", {"parquet.codec": "zstd"}),
    "parquet-lz4_raw": ("parquet", {"parquet.codec": "lz4_raw"}),
    "parquet-brotli": ("parquet", {"parquet.codec": "brotli"}),
}


@pytest.mark.parametrize("name", sorted(VALUE_CONFIGS))
def test_round_trip_every_format_and_codec_with_metadata(tmp_path, name):
    fmt, extra = VALUE_CONFIGS[name]
    cfg = config(tmp_path, fmt, **extra)
    offsets, tss, types, values, keys, headers = sample(fmt)
    rows = archive(cfg, [batch(values, offsets, tss, types, keys, headers)], 10, offsets[-1] + 1)
    assert len(rows) == 3 and all(any(s.view == "metadata" for s in r.side_files) for r in rows)
    got = read_all(cfg, rows)
    assert [r.offset for r in got] == offsets
    assert [r.timestamp for r in got] == tss
    assert [r.timestamp_type for r in got] == ["LogAppendTime" if t else "CreateTime" for t in types]
    assert [r.value for r in got] == values
    assert [r.key for r in got] == [None] * len(values) and [r.headers for r in got] == [[]] * len(values)
    assert {(r.topic, r.partition) for r in got} == {("t", 3)}


@pytest.mark.parametrize("keys_fmt,headers_fmt", [("avro", "avro"), ("json", "json"), ("parquet", "parquet"),
                                                  ("bytearray", "avro")])
def test_keys_and_headers_side_files(tmp_path, keys_fmt, headers_fmt):
    cfg = config(tmp_path, "json", store_kafka_keys="true", store_kafka_headers="true",
                 keys_format_class=keys_fmt, headers_format_class=headers_fmt)
    offsets, tss, types, values, keys, headers = sample("json")
    if keys_fmt == "bytearray":
        keys = [k.replace(b"\n", b"") for k in keys]
    rows = archive(cfg, [batch(values, offsets, tss, types, keys, headers)], 10, offsets[-1] + 1)
    assert {s.view for s in rows[0].side_files} == {"keys", "headers", "metadata"}
    got = read_all(cfg, rows)
    assert [r.key for r in got] == keys
    assert [r.headers for r in got] == headers
    assert [r.value for r in got] == values and [r.offset for r in got] == offsets


def test_string_keys_and_values(tmp_path):
    cfg = config(tmp_path, "json", store_kafka_keys="true", keys_format_class="json", key_decoder="string",
                 value_decoder="string")
    offsets, tss, types, _values, _keys, headers = sample("json", gap=False)
    values = [f"plain text {i} ✓".encode() for i in range(len(offsets))]
    keys = [f"clé-{i}".encode() for i in range(len(offsets))]
    rows = archive(cfg, [batch(values, offsets, tss, types, keys)], 10, offsets[-1] + 1)
    got = read_all(cfg, rows, value_decoder="string")
    assert [r.value for r in got] == values and [r.key for r in got] == keys


def test_avro_framed_in_wire_format_when_the_row_has_a_schema_id(tmp_path):
    cfg = config(tmp_path, "avro")
    offsets, tss, types, values, _k, _h = sample("avro", n=4, gap=False)
    (row,) = archive(cfg, [batch(values, offsets, tss, types)], 10, 14)
    store = open_store(wiring.store_settings(cfg))
    obj = dataclasses.replace(ArchivedObject.from_row(row), schema_id=258)
    got = read_records(store, wiring.value_format(cfg), obj)
    assert [r.value for r in got] == [b"\x00\x00\x00\x01\x02" + v for v in values]


def _minimal(n: int) -> bytes:
    """A decimal's unscaled value as Java's BigInteger.toByteArray writes it (Parquet keeps the value, not
    the bytes, so only this minimal two's-complement form comes back byte for byte)."""
    return n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)


def test_parquet_with_maps_enums_decimals_and_fixed(tmp_path):
    schema = {"type": "record", "name": "P", "fields": [
        {"name": "m", "type": {"type": "map", "values": "long"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "o", "type": ["null", {"type": "array", "items": {"type": "map", "values": "string"}}]}]}
    parsed = fastavro.parse_schema(schema)

    def datum(i):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, {"m": {"a": i, "b": -i}, "e": "AB"[i % 2],
                                                 "d": _minimal(i * 101), "ts": BASE_TS + i, "f": b"ab",
                                                 "o": None if i % 2 else [{"x": "y"}, {}]})
        return out.getvalue()
    cfg = config(tmp_path, "parquet", value_schema=json.dumps(schema))
    values = [datum(i) for i in range(5)]
    rows = archive(cfg, [batch(values, list(range(5)), [BASE_TS] * 5, [0] * 5)], 0, 5)
    assert [r.value for r in read_all(cfg, rows)] == values


def test_record_path_and_columnar_path_write_the_same_metadata(tmp_path):
    values = [value_bytes("bytearray", i) for i in range(30)]
    offsets = list(range(100, 130))
    tss = [BASE_TS + 7 * i for i in range(30)]
    types = [i % 2 for i in range(30)]
    files = []
    for columnar in (False, True):
        cfg = config(tmp_path / str(columnar), "bytearray", flush_size="7")
        rows = archive(cfg, [batch(values[:13], offsets[:13], tss[:13], types[:13]),
                             batch(values[13:], offsets[13:], tss[13:], types[13:])], 100, 130, columnar)
        store = open_store(wiring.store_settings(cfg))
        files.append([(s.key, store.read(s.key)) for r in rows for s in r.side_files if s.view == "metadata"])
        got = read_all(cfg, rows)
        assert [(r.offset, r.timestamp, r.timestamp_type) for r in got] == \
            [(o, t, ("CreateTime", "LogAppendTime")[y]) for o, t, y in zip(offsets, tss, types)]
    assert files[0] == files[1] and len(files[0]) == 5


def test_metadata_side_file_is_plain_avro_with_the_documented_schema(tmp_path):
    cfg = config(tmp_path, "json")
    offsets, tss, types, values, _k, _h = sample("json", n=3)
    (row,) = archive(cfg, [batch(values, offsets, tss, [0, -1, 1])], 10, offsets[-1] + 1)
    side = next(s for s in row.side_files if s.view == "metadata")
    assert side.key == row.object_key[:-len(".json")] + ".metadata.avro" and side.etag and side.size_bytes
    data = open_store(wiring.store_settings(cfg)).read(side.key)
    reader = fastavro.reader(io.BytesIO(data))
    assert reader.metadata["avro.codec"] == "deflate"
    assert json.loads(reader.metadata["avro.schema"]) == METADATA_SCHEMA
    assert list(reader) == [{"offset": 10, "timestamp": tss[0], "timestamp_type": "CreateTime"},
                            {"offset": 11, "timestamp": tss[1], "timestamp_type": "NoTimestampType"},
                            {"offset": 12, "timestamp": tss[2], "timestamp_type": "LogAppendTime"}]
    parsed = parse_key(side.key, NamingSettings(), KeyExtensions(".json", metadata=".avro"))
    assert (parsed.view, parsed.start_offset) == ("metadata", 10)
    assert read_object(open_store(wiring.store_settings(cfg)), wiring.value_format(cfg),
                       ArchivedObject.from_row(row), RecordView.METADATA) == [(10, tss[0], 0), (11, tss[1], -1),
                                                                               (12, tss[2], 1)]


def test_null_timestamps(tmp_path):
    cfg = config(tmp_path, "bytearray")
    values = [b"a", b"b", b"c"]
    rows = archive(cfg, [batch(values, [0, 1, 2], [BASE_TS, None, BASE_TS + 2], [0, -1, 0])], 0, 3)
    got = read_all(cfg, rows)
    assert [(r.timestamp, r.timestamp_type) for r in got] == [(BASE_TS, "CreateTime"), (None, "NoTimestampType"),
                                                              (BASE_TS + 2, "CreateTime")]
    assert [r.value for r in read_all(cfg, rows, cut=Cut(from_ts=0))] == [b"a", b"c"]


# ------------------------------------------------------------------------------------------------ cuts


def test_cut_by_offset_and_time(tmp_path):
    cfg = config(tmp_path, "json")
    offsets, tss, types, values, _k, _h = sample("json")
    rows = archive(cfg, [batch(values, offsets, tss, types)], 10, offsets[-1] + 1)
    got = read_all(cfg, rows, cut=Cut(from_offset=12, to_offset=20))
    assert [r.offset for r in got] == [o for o in offsets if 12 <= o <= 20]
    got = read_all(cfg, rows, cut=Cut(from_ts=BASE_TS + 1000, to_ts=BASE_TS + 6000))
    assert [r.timestamp for r in got] == [t for t in tss if BASE_TS + 1000 <= t <= BASE_TS + 6000]
    got = read_all(cfg, rows, cut=Cut(from_offset=11, to_ts=BASE_TS + 3000))
    assert [r.offset for r in got] == [o for o, t in zip(offsets, tss) if o >= 11 and t <= BASE_TS + 3000]
    assert read_all(cfg, rows, cut=Cut(from_offset=10_000)) == []


# ----------------------------------------------------------------------------------- without metadata


def test_without_metadata_contiguous_offsets_are_derived(tmp_path):
    cfg = config(tmp_path, "json", store_kafka_metadata="false")
    offsets, tss, types, values, _k, _h = sample("json", gap=False)
    rows = archive(cfg, [batch(values, offsets, tss, types)], 10, offsets[-1] + 1)
    assert all(not any(s.view == "metadata" for s in r.side_files) for r in rows)
    got = read_all(cfg, rows)
    assert [r.offset for r in got] == offsets and [r.value for r in got] == values
    assert {(r.timestamp, r.timestamp_type) for r in got} == {(None, None)}
    # a time cut that takes or leaves whole objects works from the manifest's min/max timestamps
    assert len(read_all(cfg, rows, cut=Cut(from_ts=0))) == len(values)
    with pytest.raises(MissingRecordMetadataError, match="time cut"):
        read_all(cfg, rows, cut=Cut(from_ts=BASE_TS + 1500))


def test_without_metadata_gaps_fail_naming_the_object_or_give_null_offsets(tmp_path):
    cfg = config(tmp_path, "json", store_kafka_metadata="false")
    offsets, tss, types, values, _k, _h = sample("json")
    rows = archive(cfg, [batch(values, offsets, tss, types)], 10, offsets[-1] + 1)
    with pytest.raises(MissingRecordMetadataError, match=r"t\+3\+0000000014\.json.*not contiguous"):
        read_all(cfg, rows)
    got = read_all(cfg, rows, offsets="null")
    assert [r.offset for r in got] == offsets[:4] + [None] * 4 + offsets[8:]
    with pytest.raises(MissingRecordMetadataError):
        read_all(cfg, rows, offsets="null", cut=Cut(from_offset=16))


# --------------------------------------------------------------------------------------------- checks


def test_a_replaced_object_or_a_wrong_count_fails(tmp_path):
    cfg = config(tmp_path, "json")
    offsets, tss, types, values, _k, _h = sample("json", n=4, gap=False)
    (row,) = archive(cfg, [batch(values, offsets, tss, types)], 10, 14)
    store = open_store(wiring.store_settings(cfg))
    vfmt = wiring.value_format(cfg)
    obj = ArchivedObject.from_row(row)
    with pytest.raises(RecordCountMismatchError):
        read_records(store, vfmt, dataclasses.replace(obj, record_count=5, last_offset=14))
    side = next(s for s in row.side_files if s.view == "metadata")
    bad = dict(vars(side), etag="0" * 32)
    with pytest.raises(ObjectChangedError):
        read_records(store, vfmt, dataclasses.replace(obj, side_files=(bad,)))
    with pytest.raises(CorruptObjectError, match="disagree"):
        read_records(store, vfmt, dataclasses.replace(obj, first_offset=9))


def test_from_row_takes_spark_style_timestamps_and_side_file_structs(tmp_path):
    cfg = config(tmp_path, "json")
    offsets, tss, types, values, _k, _h = sample("json", n=4, gap=False)
    (row,) = archive(cfg, [batch(values, offsets, tss, types)], 10, 14)
    obj = ArchivedObject.from_row(row)  # a ManifestRow: datetimes, SideFile dataclasses
    assert (obj.min_timestamp_ms, obj.max_timestamp_ms) == (min(tss), max(tss))
    assert obj.format == "json" and obj.side("metadata")["key"].endswith(".metadata.avro")
    assert ArchivedObject.from_row(row.to_json()) == obj


def test_metadata_format_refuses_value_views_and_value_formats_refuse_metadata():
    from lakesink.errors import InvalidArgumentError
    from lakesink.objects.formats import create

    with pytest.raises(InvalidArgumentError):
        MetadataFormat().open_writer(io.BytesIO(), RecordView.VALUE)
    for name in ("avro", "json", "bytearray", "parquet", "blockgzip"):
        with pytest.raises(InvalidArgumentError):
            create(name).open_writer(io.BytesIO(), RecordView.METADATA)
