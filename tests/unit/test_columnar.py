"""The columnar fast path (lakesink.executor.columnar): which configs take it, and that it writes exactly the
objects and manifest rows of the per-record path, falling back to it batch by batch."""
from __future__ import annotations

import dataclasses
import gzip
import io
import json

import fastavro
import pyarrow as pa
import pytest

from lakesink.wiring import task_parts
from lakesink.executor.archiver import ArchivedRow, BatchContext
from lakesink.executor.columnar import CANONICAL, ColumnarPlan, read_columns
from lakesink.config import SinkConfig
from lakesink.decoders import create_decoder
from lakesink.errors import DecodeError, PartitionError
from lakesink.objects.formats.avro import AvroFormat
from lakesink.objects.formats.bytearray import ByteArrayFormat
from lakesink.objects.records import SinkRecord
from lakesink.objects.rotation import AppendMany, AppendSpan, Commit, Rotator, RotationPolicy
from lakesink.objects.partitioners import DefaultPartitioner
from lakesink.executor.results import PartitionStatus
from lakesink.executor.task import archive_partitions, decode_result

SCHEMA = {"type": "record", "name": "R", "namespace": "t",
          "fields": [{"name": "id", "type": "long"}, {"name": "s", "type": "string"},
                     {"name": "tags", "type": {"type": "array", "items": "string"}},
                     {"name": "opt", "type": ["null", "double"], "default": None}]}
PARSED = fastavro.parse_schema(SCHEMA)


def avro_datum(i: int) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, PARSED, {"id": i, "s": "x" * (i % 37), "tags": ["a"] * (i % 4),
                                             "opt": None if i % 3 else i / 7})
    return out.getvalue()


def config(tmp_path, fmt: str, **extra) -> SinkConfig:
    cfg = {"name": "j", "topics": "t", "format.class": fmt, "flush.size": "7", "s3.bucket.name": "bkt",
           "store.url": f"file://{tmp_path}/store", "manifest.location": str(tmp_path / "m"),
           "kafka.bootstrap.servers": "localhost:9"}
    if fmt == "avro":
        cfg["value.schema"] = json.dumps(SCHEMA)
    if fmt == "bytearray":
        cfg["value.decoder"] = "bytes"
    cfg.update(extra)
    return SinkConfig.from_dict(cfg)


def batches(values, chunk, canonical=None, ts_null_at=None):
    """Spark-shaped batches as SinkJob._read selects them for a columnar config."""
    out = []
    for s in range(0, len(values), chunk):
        v = values[s:s + chunk]
        m = len(v)
        cols = {
            "value": pa.array(v, pa.binary()),
            "partition": pa.array([3] * m, pa.int32()),
            "offset": pa.array(range(10 + s, 10 + s + m), pa.int64()),
            "ts": pa.array([None if ts_null_at == s + i else 1_700_000_000_000 + ((s + i) * 7919) % 1000
                            for i in range(m)], pa.int64()),
        }
        if canonical is not None:
            cols[CANONICAL] = pa.array(canonical[s:s + m], pa.bool_())
        out.append(pa.RecordBatch.from_pydict(cols))
    return out


def run(cfg, batch_list, columnar: bool, flush_tail: bool = True, direct: bool = False, took: list | None = None):
    """(manifest rows, {key: bytes}) of one archive_partitions call, with or without the plan (``direct``: the
    plan as the direct reader runs it, no JVM columns). The status row's count of records that took the columnar
    path is zeroed (to compare both paths' rows), and appended to ``took``."""
    ctx = BatchContext(job="j", run_id="r", batch_id=0, cluster_id=None, topic_ids={}, flush_tail=flush_tail)
    plan = ColumnarPlan.for_parts(task_parts(cfg)) if columnar else None
    if plan is not None and direct:
        plan = plan.for_direct_reader()
    n = sum(b.num_rows for b in batch_list)
    out = list(archive_partitions(iter(batch_list), task_parts(cfg), ctx, {("t", 3): (10, 10 + n)}, plan))
    results = [decode_result(r) for r in out[0].column("row").to_pylist()] if out else []
    for r in results:
        if isinstance(r, PartitionStatus) and took is not None:
            took.append(r.columnar)
    rows = [r.row.to_json() if isinstance(r, ArchivedRow) else
            dataclasses.replace(r, columnar=0) if isinstance(r, PartitionStatus) else r for r in results]
    store = cfg.store_url[len("file://"):]
    objects = {}
    for r in rows:
        if isinstance(r, dict) and r["kind"] == "object":
            data = _stable(open(f"{store}/bkt/{r['object_key']}", "rb").read())
            if data[:2] == b"\x1f\x8b":  # gzip: compared by its text (ISA-L's bytes for one text varied once)
                data = gzip.decompress(data)
                r.pop("size_bytes")
            objects[r["object_key"]] = data
            r.pop("etag")  # Avro sync markers are random per file
            r.pop("object_uri")
    return rows, objects


def _stable(data: bytes) -> bytes:
    """Avro files with their random sync marker replaced (to compare two writes)."""
    if data[:4] != b"Obj\x01":
        return data
    sync = fastavro.block_reader(io.BytesIO(data))._header["sync"]
    return data.replace(sync, b"<sync-marker-16>")


# -------------------------------------------------------------------------------- which configs


@pytest.mark.parametrize("fmt,extra,kind", [
    ("bytearray", {}, "bytes"),
    ("avro", {}, "avro"),
    ("json", {}, "json"),
    ("json", {"behavior.on.null.values": "ignore"}, "json"),
    ("avro", {"avro.codec": "snappy"}, "avro"),
    # keys and headers side files a column at a time (lakesink.objects.formats.side_columns)
    ("json", {"store.kafka.keys": "true"}, "json"),
    ("json", {"store.kafka.headers": "true", "headers.format.class": "json"}, "json"),
    ("avro", {"store.kafka.keys": "true", "store.kafka.headers": "true", "key.decoder": "string"}, "avro"),
    ("bytearray", {"store.kafka.keys": "true", "keys.format.class": "bytearray"}, "bytes"),
])
def test_plan_for_count_only_default_partitioner_configs(tmp_path, fmt, extra, kind):
    plan = ColumnarPlan.for_parts(task_parts(config(tmp_path, fmt, **extra)))
    assert plan is not None and plan.kind == kind
    if kind == "avro":
        assert json.loads(plan.schema_json)["name"] == "R"


@pytest.mark.parametrize("fmt,extra", [
    ("json", {"partitioner.class": "FieldPartitioner", "partition.field.name": "id"}),
    ("json", {"partitioner.class": "TimeBasedPartitioner", "partition.duration.ms": "3600000",
              "path.format": "'h'=HH", "locale": "en", "timezone": "UTC"}),
    ("json", {"key.decoder": "string"}),  # a key the decoder rejects fails the record path, stored or not
    ("json", {"store.kafka.keys": "true", "keys.format.class": "parquet"}),  # formats without a column path
    ("json", {"store.kafka.headers": "true", "headers.format.class": "parquet"}),
    ("json", {"store.kafka.keys": "true", "keys.format.class": "bytearray", "key.decoder": "string"}),
    ("json", {"store.kafka.keys": "true", "key.decoder": "json"}),
    ("json", {"rotate.schedule.interval.ms": "60000", "timezone": "UTC"}),
    ("json", {"behavior.on.null.values": "write", "store.kafka.keys": "true"}),
    ("json", {"value.decoder": "string"}),
    ("parquet", {"value.schema": json.dumps({"type": "record", "name": "M", "fields": [  # Spark: a MapType
        {"name": "m", "type": {"type": "map", "values": "long"}}]})}),
    ("avro", {"schema.registry.url": "mock://lakesink-columnar"}),  # wire format: schema per record
])
def test_no_plan_where_records_need_the_per_record_path(tmp_path, fmt, extra):
    assert ColumnarPlan.for_parts(task_parts(config(tmp_path, fmt, **extra))) is None


def test_read_columns_drops_a_plan_spark_cannot_build():
    class Broken(ColumnarPlan):
        def spark_columns(self):
            raise RuntimeError("[UNRESOLVED_ROUTINE] from_avro\nstack")

    assert read_columns(Broken("avro", "{}"), df=None) == ([], None)
    assert read_columns(None, df=None) == ([], None)


# -------------------------------------------------------------------------------- same output


@pytest.mark.parametrize("chunk", [1, 5, 7, 64, 1000])
@pytest.mark.parametrize("fmt,extra", [
    ("bytearray", {}), ("bytearray", {"format.bytearray.separator": ""}),
    ("bytearray", {"s3.compression.type": "gzip"}),
    ("avro", {}), ("avro", {"avro.codec": "deflate"}),
    ("json", {}), ("json", {"s3.compression.type": "gzip"}),
])
def test_columnar_writes_the_objects_and_rows_of_the_record_path(tmp_path, fmt, extra, chunk):
    n = 150
    if fmt == "avro":
        values = [avro_datum(i) for i in range(n)]
    else:
        values = [json.dumps({"i": i, "s": "é" * (i % 5), "f": i / 3}).encode() for i in range(n)]
    canonical = [True] * n if fmt == "avro" else None
    record = run(config(tmp_path / "record", fmt, **extra), batches(values, chunk, canonical), columnar=False)
    columnar = run(config(tmp_path / "col", fmt, **extra), batches(values, chunk, canonical), columnar=True)
    assert record == columnar
    assert len(record[1]) == n // 7 + 1
    if fmt == "bytearray" and "s3.compression.type" in extra:
        first = record[1][min(record[1])]  # run() gives a gzip object's text
        assert first == b"".join(v + b"\n" for v in values[:7])


def test_avro_blocks_cut_at_sync_interval_like_the_record_path():
    """Block boundaries (records per block, bytes per block) of write_payloads equal write_many's."""
    dec = create_decoder("avro", schema=json.dumps(SCHEMA), wire_format=False)
    vs = dec.fixed_schema
    values = [avro_datum(i) for i in range(3000)]
    for sync in (1, 100, 4000):
        fmt = AvroFormat(sync_interval=sync)
        a, b = io.BytesIO(), io.BytesIO()
        w = fmt.open_writer(a)
        w.write_many([SinkRecord("t", 0, i, 0, None, dec.decode(v, "t", 0, i)[0], (), vs, v, None, {}, vs)
                      for i, v in enumerate(values)])
        w.close()
        w = fmt.open_writer(b)
        for s in range(0, 3000, 333):  # runs that end mid-block carry their tail into the next run
            w.write_payloads(pa.array(values[s:s + 333], pa.binary()), vs)
        w.close()
        shape = [[(blk.num_records, blk.size) for blk in fastavro.block_reader(io.BytesIO(x.getvalue()))]
                 for x in (a, b)]
        assert shape[0] == shape[1] and sum(c for c, _ in shape[0]) == 3000
        assert list(fastavro.reader(io.BytesIO(b.getvalue()))) == list(fastavro.reader(io.BytesIO(a.getvalue())))


def test_bytearray_payloads_equal_write_many():
    values = [b"v%d" % i * (i % 5) for i in range(500)]
    fmt = ByteArrayFormat(separator=b"||")
    a, b = io.BytesIO(), io.BytesIO()
    w = fmt.open_writer(a)
    w.write_many([SinkRecord("t", 0, i, 0, None, v) for i, v in enumerate(values)])
    w.close()
    w = fmt.open_writer(b)
    w.write_payloads(pa.array(values[:123], pa.binary()))
    w.write_payloads(pa.array(values[123:], pa.large_binary()))
    w.close()
    assert a.getvalue() == b.getvalue() and w.record_count == 500


# -------------------------------------------------------------------------------- fallbacks


def test_batches_the_fast_path_cannot_vouch_for_take_the_record_path(tmp_path):
    """A non-canonical (but valid) datum, a tombstone under ignore and a null timestamp each send
    their batch through the record path; the files are still those of the record path throughout."""
    n = 80
    values = [avro_datum(i) for i in range(n)]
    canonical = [True] * n
    canonical[33] = False  # e.g. an over-long varint: valid, copied as is by the record path
    extra = {"behavior.on.null.values": "ignore"}
    want = run(config(tmp_path / "r", "avro", **extra), batches(values, 10, canonical), columnar=False)
    got = run(config(tmp_path / "c", "avro", **extra), batches(values, 10, canonical), columnar=True)
    assert got == want

    values[45] = None  # tombstone, ignored
    canonical[45] = None
    want = run(config(tmp_path / "r2", "avro", **extra), batches(values, 10, canonical, ts_null_at=71), False)
    got = run(config(tmp_path / "c2", "avro", **extra), batches(values, 10, canonical, ts_null_at=71), True)
    assert got == want
    assert sum(r["record_count"] for r in got[0] if isinstance(r, dict) and r.get("kind") == "object") == n - 1


def test_bad_records_are_named_by_the_record_path(tmp_path):
    values = [avro_datum(i) for i in range(30)]
    values[17] = values[17] + b"\x00"  # trailing byte: Spark's round trip differs
    canonical = [True] * 30
    canonical[17] = False
    with pytest.raises(DecodeError, match="trailing bytes") as ei:
        run(config(tmp_path, "avro"), batches(values, 10, canonical), columnar=True)
    assert (ei.value.topic, ei.value.partition, ei.value.offset) == ("t", 3, 27)

    lines = [json.dumps({"i": i}).encode() for i in range(30)]
    lines[4] = b'{"i": NaN}'
    with pytest.raises(DecodeError, match="invalid JSON") as ei:
        run(config(tmp_path / "j", "json"), batches(lines, 10), columnar=True)
    assert ei.value.offset == 14

    lines[4] = b"null"  # JSON null is a tombstone: behavior.on.null.values=fail names it
    with pytest.raises(PartitionError, match="tombstone") as ei:
        run(config(tmp_path / "n", "json"), batches(lines, 10), columnar=True)
    assert ei.value.offset == 14


def test_avro_batch_without_the_spark_check_is_decoded_record_by_record(tmp_path):
    """No canonical column (Spark could not build it): every batch is decoded, errors still named."""
    values = [avro_datum(i) for i in range(20)]
    values[5] = values[5][:-1]  # truncated
    with pytest.raises(DecodeError, match="truncated or corrupt") as ei:
        run(config(tmp_path, "avro"), batches(values, 10, canonical=None), columnar=True)
    assert ei.value.offset == 15


def test_direct_reader_avro_columns_are_checked_without_decoding_and_a_bad_datum_is_named(tmp_path, monkeypatch):
    """The direct reader has no JVM check column: its batches are checked a column at a time
    (lakesink.schemas.avro_check), not decoded, and still write the record path's objects; a batch holding
    a bad datum goes to the record path, which names it."""
    from lakesink.decoders import AvroDecoder

    values = [avro_datum(i) for i in range(40)]
    want = run(config(tmp_path / "r", "avro"), batches(values, 10), columnar=False)
    decoded = []
    original = AvroDecoder.decode_many
    monkeypatch.setattr(AvroDecoder, "decode_many", lambda self, raws, *a, **k: decoded.append(len(raws)) or
                        original(self, raws, *a, **k))
    got = run(config(tmp_path / "d", "avro"), batches(values, 10), columnar=True, direct=True)
    assert got == want
    assert decoded == []  # no batch was decoded record by record

    values[25] = values[25] + b"\x00"
    with pytest.raises(DecodeError, match="trailing bytes") as ei:
        run(config(tmp_path / "b", "avro"), batches(values, 10), columnar=True, direct=True)
    assert ei.value.offset == 35
    assert decoded == [10]  # only the bad datum's batch, by the record path


# -------------------------------------------------------------------------------- rotation in bulk


@pytest.mark.parametrize("flush,runs", [(1, [5]), (3, [2, 2, 2, 5]), (10, [4, 17, 1]), (100, [30, 30])])
def test_process_run_emits_the_events_of_process_many(flush, runs):
    policy = RotationPolicy(flush_size=flush)
    a = Rotator(policy, DefaultPartitioner(), 100)
    b = Rotator(policy, DefaultPartitioner(), 100)
    off, want, got = 100, [], []
    for size in runs:
        offs = [off + 2 * k for k in range(size)]  # gaps: offsets need not be contiguous
        tss = [(o * 37) % 11 for o in offs]
        recs = [SinkRecord("t", 0, o, t, None, {"v": o}) for o, t in zip(offs, tss)]
        for ev in a.process_many(recs):
            want.append(("span", ev.encoded_partition, ev.records[0].offset, ev.records[-1].offset + 1,
                         ev.file_start_offset) if isinstance(ev, AppendMany) else ev)
        for ev in b.process_run(offs, tss, "partition=0", None):
            got.append(("span", ev.encoded_partition, offs[ev.start], offs[ev.stop - 1] + 1, ev.file_start_offset)
                       if isinstance(ev, AppendSpan) else ev)
        off = offs[-1] + 1
    want += a.finish(flush_tail=True)
    got += b.finish(flush_tail=True)
    assert got == want and any(isinstance(e, Commit) for e in got)


def test_process_run_declines_what_needs_records():
    policy = RotationPolicy(flush_size=5, behavior_on_null_values="write")
    assert Rotator(policy, DefaultPartitioner(), 0).process_run([0], [1], "partition=0", None) is None
    rot = Rotator(RotationPolicy(flush_size=5), DefaultPartitioner(), 0)
    assert rot.process_run([0, 1], [1, 1], "partition=0", None) is not None
    other = create_decoder("avro", schema=json.dumps(SCHEMA), wire_format=False).fixed_schema
    assert rot.process_run([2], [1], "partition=0", other) is None  # another schema in the open file
    with pytest.raises(ValueError, match="offset order"):
        rot.process_run([1], [1], "partition=0", None)


# -------------------------------------------------------------------------------- parquet from Spark's decode


def spark_struct(values: list[bytes]) -> pa.StructArray:
    """What Spark's from_avro column looks like in Arrow: large strings, lists with an 'element'
    child, non-null fields where Avro has no null branch."""
    rows = [fastavro.schemaless_reader(io.BytesIO(v), PARSED, None) for v in values]
    t = pa.struct([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.large_string(), nullable=False),
                   pa.field("tags", pa.list_(pa.field("element", pa.large_string(), nullable=False)), nullable=False),
                   pa.field("opt", pa.float64())])
    return pa.array(rows, type=t)


def parquet_batches(values, chunk, canonical=None):
    out = batches(values, chunk, canonical if canonical is not None else [True] * len(values))
    from lakesink.executor.columnar import DECODED

    return [b.append_column(DECODED, spark_struct(values[s:s + b.num_rows]))
            for b, s in zip(out, range(0, len(values), chunk))]


def test_parquet_plan_only_for_schemas_spark_decodes_alike(tmp_path):
    from lakesink.executor.columnar import spark_decodes_alike

    cfg = config(tmp_path, "parquet", **{"value.schema": json.dumps(SCHEMA)})
    assert ColumnarPlan.for_parts(task_parts(cfg)).kind == "parquet"
    assert not spark_decodes_alike({"type": "record", "name": "T", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]})  # Spark: micros
    assert not spark_decodes_alike({"type": "record", "name": "E", "fields": [
        {"name": "e", "type": {"type": "enum", "name": "C", "symbols": ["A"]}}]})
    assert not spark_decodes_alike({"type": "record", "name": "M", "fields": [
        {"name": "m", "type": {"type": "map", "values": "long"}}]})
    assert not spark_decodes_alike({"type": "record", "name": "U", "fields": [{"name": "u", "type": ["int", "string"]}]})
    assert spark_decodes_alike({"type": "record", "name": "N", "fields": [
        {"name": "inner", "type": ["null", {"type": "record", "name": "I", "fields": [
            {"name": "xs", "type": {"type": "array", "items": "int"}}]}]}]})
    ts_schema = {"type": "record", "name": "T", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
    assert ColumnarPlan.for_parts(task_parts(config(tmp_path, "parquet", **{"value.schema": json.dumps(ts_schema)}))) is None


@pytest.mark.parametrize("chunk", [1, 6, 64, 1000])
def test_parquet_rows_from_spark_write_the_objects_of_the_record_path(tmp_path, chunk):
    n = 150
    values = [avro_datum(i) for i in range(n)]
    canonical = [True] * n
    canonical[40] = False  # one batch decoded record by record: both kinds of rows share a file
    extra = {"value.schema": json.dumps(SCHEMA)}
    want = run(config(tmp_path / "r", "parquet", **extra), parquet_batches(values, chunk, canonical), False)
    got = run(config(tmp_path / "c", "parquet", **extra), parquet_batches(values, chunk, canonical), True)
    assert got == want and len(got[1]) == n // 7 + 1


def test_parquet_row_groups_cut_like_the_record_path():
    """Row groups of mixed per-record and columnar writes: the same boundaries, the same bytes."""
    import pyarrow.parquet as pq

    from lakesink.objects.formats.parquet import ParquetFormat

    dec = create_decoder("avro", schema=json.dumps(SCHEMA), wire_format=False)
    vs = dec.fixed_schema
    values = [avro_datum(i) for i in range(95)]
    recs = [SinkRecord("t", 0, i, 0, None, dec.decode(v, "t", 0, i)[0], (), vs, v, None, {}, vs)
            for i, v in enumerate(values)]
    fmt = ParquetFormat(row_group_size=10)
    a, b = io.BytesIO(), io.BytesIO()
    w = fmt.open_writer(a)
    w.write_many(recs)
    w.close()
    w = fmt.open_writer(b)
    w.write_many(recs[:3])
    w.write_payloads(pa.Table.from_struct_array(spark_struct(values[3:27])), vs)
    w.write(recs[27])
    w.write_many(recs[28:44])
    w.write_payloads(pa.Table.from_struct_array(spark_struct(values[44:95])), vs)
    w.close()
    assert w.record_count == 95
    assert [pq.ParquetFile(io.BytesIO(x.getvalue())).metadata.row_group(i).num_rows for x in (a,) for i in range(10)] \
        == [10] * 9 + [5]
    assert a.getvalue() == b.getvalue()


def test_direct_reader_parquet_columns_are_decoded_at_once_and_a_bad_datum_is_named(tmp_path, monkeypatch):
    """The direct reader has no JVM columns: a parquet batch's column is decoded into Arrow columns at once
    (lakesink.schemas.avro_arrow), not record by record, and writes the record path's objects; a batch holding
    a bad datum goes to the record path, which names it."""
    from lakesink.decoders import AvroDecoder

    extra = {"value.schema": json.dumps(SCHEMA)}
    plan = ColumnarPlan.for_parts(task_parts(config(tmp_path / "p", "parquet", **extra))).for_direct_reader()
    assert plan.kind == "parquet" and plan.python_check
    dec = create_decoder("avro", schema=json.dumps(SCHEMA), wire_format=False)
    values = [avro_datum(i) for i in range(40)]
    batch = batches(values, 40)[0]
    cols = {name: batch.column(name) for name in batch.schema.names}
    table, vs = plan.payloads(cols, dec, "t", 3, list(range(10, 50)))
    assert vs is dec.fixed_schema
    assert table.to_pylist() == [fastavro.schemaless_reader(io.BytesIO(v), PARSED, None) for v in values]
    bad = batches(values[:6] + [values[6] + b"\x00"] + values[7:], 40)[0]
    cols = {name: bad.column(name) for name in bad.schema.names}
    assert plan.payloads(cols, dec, "t", 3, list(range(10, 50))) is None

    want = run(config(tmp_path / "r", "parquet", **extra), batches(values, 10), columnar=False)
    decoded = []
    original = AvroDecoder.decode_many
    monkeypatch.setattr(AvroDecoder, "decode_many", lambda self, raws, *a, **k: decoded.append(len(raws)) or
                        original(self, raws, *a, **k))
    got = run(config(tmp_path / "d", "parquet", **extra), batches(values, 10), columnar=True, direct=True)
    assert got == want and len(got[1]) == 40 // 7 + 1
    assert decoded == []  # no batch was decoded record by record

    values[25] = values[25] + b"\x00"
    with pytest.raises(DecodeError, match="trailing bytes") as ei:
        run(config(tmp_path / "b", "parquet", **extra), batches(values, 10), columnar=True, direct=True)
    assert ei.value.offset == 35
    assert decoded == [10]  # only the bad datum's batch, by the record path
