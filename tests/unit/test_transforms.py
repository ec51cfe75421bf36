"""lakesink.transforms: SQL (DuckDB over Arrow batches) and Python record transforms, their rotation groups and
the executor body with them (records dropped advance the offsets, one record made many stays in one commit group)."""
import json

import pyarrow as pa
import pytest

from lakesink.wiring import task_parts
from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.errors import ConfigError, InvalidArgumentError, PartitionError, TransformError
from lakesink.executor.archiver import BatchContext
from lakesink.executor.task import PartitionStatus, archive_partitions, decode_result
from lakesink.objects.records import SinkRecord, ValueSchema
from lakesink.objects.rotation import Advance, AppendMany, Commit, Rotator, RotationPolicy
from lakesink.objects.partitioners import DefaultPartitioner
from lakesink.transforms import (PythonTransform, Record, SqlTransform, check_python, check_sql, load_callable,
                                 sql_query)

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def batch(values, start=10, key=True, headers=True, partition=3):
    n = len(values)
    cols = {"value": pa.array(values, pa.binary()), "partition": pa.array([partition] * n, pa.int32()),
            "offset": pa.array(range(start, start + n), pa.int64()),
            "ts": pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64())}
    if key:
        cols["key"] = pa.array([b"k%d" % i for i in range(n)], pa.binary())
    if headers:
        cols["headers"] = pa.array([[{"key": "h", "value": b"%d" % i}] for i in range(n)], HEADERS)
    return pa.RecordBatch.from_pydict(cols)


def js(**kw):
    return json.dumps(kw).encode()


# ----------------------------------------------------------------------------- SQL


def test_sql_query_forms():
    assert sql_query("SELECT * FROM records") == "SELECT * FROM records"
    assert sql_query("  with x as (select 1) select * from x;") == "with x as (select 1) select * from x"
    assert sql_query("key IS NOT NULL") == "SELECT * FROM records WHERE (key IS NOT NULL)"
    with pytest.raises(InvalidArgumentError):
        sql_query("  ")


def test_sql_filter_keeps_layout_and_offsets():
    b = batch([js(t="a"), js(t="hb"), js(t="b"), js(t="hb")])
    out = SqlTransform("json_extract_string(decode(value), '$.t') <> 'hb'").apply(b, "t", 3)
    assert out.schema == b.schema
    assert out.column("offset").to_pylist() == [10, 12]
    assert out.column("key").to_pylist() == [b"k0", b"k2"]
    assert out.column("ts").to_pylist() == [1_700_000_000_000, 1_700_000_000_002]
    assert out.column("headers").to_pylist()[1] == [{"key": "h", "value": b"2"}]


def test_sql_one_to_many_keeps_the_query_order_and_the_rest_of_the_record():
    b = batch([js(e=["x", "y", "z"]), js(e=[]), js(e=["w"])])
    q = ("SELECT kafka_offset, encode(unnest(from_json(json_extract(decode(value), '$.e'), '[\"VARCHAR\"]'))) "
         "AS value FROM records")
    out = SqlTransform(q).apply(b, "t", 3)
    assert out.column("offset").to_pylist() == [10, 10, 10, 12]
    assert out.column("value").to_pylist() == [b"x", b"y", b"z", b"w"]
    assert out.column("key").to_pylist() == [b"k0", b"k0", b"k0", b"k2"]  # left out: the input record's


def test_sql_may_replace_key_headers_timestamp():
    b = batch([b"a", b"b"])
    q = ("SELECT kafka_offset, value, encode('new') AS key, [] AS headers, "
         "timestamp + INTERVAL 1 SECOND AS timestamp FROM records")
    out = SqlTransform(q).apply(b, "t", 3)
    assert out.column("key").to_pylist() == [b"new", b"new"]
    assert out.column("headers").to_pylist() == [[], []]
    assert out.column("ts").to_pylist() == [1_700_000_001_000, 1_700_000_001_001]


def test_sql_without_key_column_reads_null_keys():
    b = batch([b"a", b"b"], key=False, headers=False)
    out = SqlTransform("key IS NULL").apply(b, "t", 3)
    assert out.column("offset").to_pylist() == [10, 11] and out.schema == b.schema


def test_sql_error_names_the_record():
    b = batch([js(a=1), b"not json", js(a=2)])
    with pytest.raises(TransformError) as ei:
        SqlTransform("decode(value)::JSON->>'a' = '1'").apply(b, "t", 3)
    e = ei.value
    assert (e.topic, e.partition, e.offset) == ("t", 3, 11) and e.exit_code == 6
    assert str(e).startswith("record t-3@11: transforms.sql failed: ") and "JSON" in str(e)


@pytest.mark.parametrize("query, message", [
    ("SELECT value FROM records", "no kafka_offset column"),
    ("SELECT kafka_offset + 100 AS kafka_offset, value FROM records", "not a record of the batch"),
    ("SELECT kafka_offset, kafka_partition + 1 AS kafka_partition FROM records", "cannot move records"),
    ("SELECT kafka_offset, 42 AS value FROM records", "column value is int32, the record's value is binary"),
    ("SELECT kafka_offset, 'text' AS value FROM records", None),  # text is its UTF-8 bytes
])
def test_sql_results_that_are_not_records_of_the_batch(query, message):
    b = batch([b"a", b"b"])
    if message is None:
        out = SqlTransform(query).apply(b, "t", 3)
        assert out.column("value").to_pylist() == [b"text", b"text"]
        return
    with pytest.raises(TransformError, match=message) as ei:
        SqlTransform(query).apply(b, "t", 3)
    assert ei.value.offset == 10


def test_sql_transform_pickles_without_its_connection():
    import pickle

    t = SqlTransform("true")
    t.apply(batch([b"a"]), "t", 3)
    t2 = pickle.loads(pickle.dumps(t))
    assert t2.apply(batch([b"a"]), "t", 3).num_rows == 1


def test_check_sql_and_python():
    assert check_sql("decode(value) LIKE '%x%'") is None
    assert "nope" in check_sql("nope = 1").lower()
    assert "syntax" in check_sql("SELECT FROM WHERE").lower()
    assert "kafka_offset" in check_sql("SELECT value FROM records")
    assert check_python("json:dumps") is None and check_python("json.dumps") is None
    assert "cannot import" in check_python("no_such_module_xyz:f")
    assert "has no" in check_python("json:nope")


# ----------------------------------------------------------------------------- Python


def explode(rec: Record):
    """Drops records whose value has drop=true, makes one record per item of 'items'."""
    if rec.value.get("drop"):
        return None
    if "items" in rec.value:
        return [rec.replace(value={"item": i}) for i in rec.value["items"]]
    return rec


def boom(rec: Record):
    if rec.offset == 11:
        raise ValueError("bad record")
    return rec


def test_python_transform_maps_records():
    sch = ValueSchema({"type": "record"}, "fp")
    recs = [SinkRecord("t", 0, 10, 1, b"k", {"drop": True}, raw_value=b"x"),
            SinkRecord("t", 0, 11, 2, b"k", {"items": [1, 2]}, raw_value=b"y", value_schema=sch, raw_avro=sch),
            SinkRecord("t", 0, 12, 3, b"k", {"a": 1}, raw_value=b"z")]
    out = PythonTransform(f"{__name__}:explode").map_records(recs)
    assert [(r.offset, r.value) for r in out] == [(11, {"item": 1}), (11, {"item": 2}), (12, {"a": 1})]
    assert out[0].raw_value is None and out[0].raw_avro is None and out[0].value_schema is sch
    assert out[2] is recs[2]  # unchanged: the very record (raw bytes may be copied)


def test_python_transform_errors_name_the_record():
    recs = [SinkRecord("t", 0, o, 1, None, {"a": o}) for o in (10, 11)]
    with pytest.raises(TransformError, match=r"record t-0@11: transforms.python .*boom raised ValueError: bad record"):
        PythonTransform(f"{__name__}.boom").map_records(recs)
    with pytest.raises(TransformError, match="cannot move records"):
        PythonTransform(f"{__name__}:moves").map_records(recs)
    with pytest.raises(TransformError, match="expected a lakesink.transforms.Record"):
        PythonTransform("builtins:str").map_records(recs)
    with pytest.raises(InvalidArgumentError):
        load_callable("nomodule")


def moves(rec: Record):
    return rec.replace(offset=rec.offset + 1)


# ----------------------------------------------------------------------------- rotation groups


def rec(off, v="x", schema=None):
    return SinkRecord("t", 0, off, 1_000 + off, None, v, value_schema=schema)


def test_groups_stay_in_one_commit_group():
    rot = Rotator(RotationPolicy(flush_size=2), DefaultPartitioner(), 0)
    events = rot.process_groups([rec(0), rec(1), rec(1), rec(1), rec(2), rec(3)])
    commits = [e for e in events if isinstance(e, Commit)]
    # flush.size 2 is reached inside offset 1's group: the commit waits for its last record
    assert [(c.range_start, c.range_end, c.files[0].record_count) for c in commits] == [(0, 1, 4), (2, 3, 2)]
    with pytest.raises(InvalidArgumentError):
        rot.process(rec(3))  # a repeated offset outside a group is still out of order


def test_skip_through_advances_over_dropped_offsets():
    rot = Rotator(RotationPolicy(flush_size=2), DefaultPartitioner(), 0)
    events = rot.process_many([rec(0), rec(1)])
    rot.skip_through(5)  # 2..5 dropped by a transform
    events += rot.finish()
    assert [(type(e), e.range_start, e.range_end) for e in events if not isinstance(e, AppendMany)] == \
        [(Commit, 0, 1), (Advance, 2, 5)]


def test_a_group_that_needs_a_rotation_inside_fails_naming_the_record():
    a, b = ValueSchema({"type": "string"}, "a"), None
    rot = Rotator(RotationPolicy(flush_size=10), DefaultPartitioner(), 0)
    with pytest.raises(PartitionError, match="record t-0@1: the records a transform made") as ei:
        rot.process_groups([rec(0, schema=a), rec(1, schema=a), rec(1, schema=b)])
    assert ei.value.offset == 1


# ----------------------------------------------------------------------------- the executor body


def config(tmp_path, **extra):
    return SinkConfig.from_dict({
        "name": "j", "topics": "t", "format.class": "json", "flush.size": "3", "s3.bucket.name": "bkt",
        "store.url": f"file://{tmp_path}/store", "manifest.location": str(tmp_path / "m"),
        "kafka.bootstrap.servers": "localhost:9", **extra})


def run(cfg, batches, start=10, end=None):
    ctx = BatchContext(job="j", run_id="r", batch_id=0, cluster_id=None, topic_ids={}, flush_tail=False)
    plans = {("t", 3): (start, end or 10_000)}
    columnar = None
    from lakesink.executor.columnar import ColumnarPlan

    plan = ColumnarPlan.for_parts(task_parts(cfg))
    columnar = plan.for_direct_reader() if plan else None
    out = list(archive_partitions(iter(batches), task_parts(cfg), ctx, plans, columnar))
    return [decode_result(r) for r in out[0].column("row").to_pylist()] if out else []


ONE_TO_MANY = ("SELECT kafka_offset, encode(unnest(from_json(json_extract(decode(value), '$.e'), '[\"VARCHAR\"]'))) "
               "AS value FROM records WHERE json_extract_string(decode(value), '$.t') <> 'hb'")


@pytest.mark.parametrize("fmt", ["json", "bytearray"])  # json: record path; bytearray: columnar path for filters
def test_filter_and_one_to_many_offsets_exact(tmp_path, fmt):
    vals = [js(t="a", e=["1"]), js(t="hb", e=[]), js(t="a", e=["2", "3", "4"]), js(t="a", e=["5"]),
            js(t="hb", e=[]), js(t="a", e=["6"]), js(t="hb", e=[]), js(t="hb", e=[])]
    cfg = config(tmp_path, **{"transforms.sql": ONE_TO_MANY, "format.class": fmt})  # "1" is valid JSON too
    results = run(cfg, [batch(vals[:3]), batch(vals[3:], start=13)], end=18)
    status = results.pop()
    # the second batch (offsets 13 and 15 kept, one record each) is archived a column at a time
    assert status == PartitionStatus("t", 3, read=8, first_offset=10, last_offset=17, columnar=2)
    rows = [r.row for r in results]
    objs = [(r.kind, r.range_start, r.range_end, r.first_offset, r.last_offset, r.record_count) for r in rows]
    # flush.size 3: offset 10 (1 record) + offset 12 (3 records, one group) → one file of 4; 13 and 15 stay open;
    # the dropped offset 11 lies inside the file's span: the group's filtered row notes it
    assert objs == [("object", 10, 12, 10, 12, 4), ("filtered", 11, 11, 11, 11, 1)]
    store = tmp_path / "store" / "bkt"
    body = (store / rows[0].object_key).read_bytes()
    assert body.split(b"\n")[:4] == [b"1", b"2", b"3", b"4"]


def test_all_dropped_advances(tmp_path):
    cfg = config(tmp_path, **{"transforms.sql": "false"})
    results = run(cfg, [batch([b"{}"] * 4), batch([b"{}"] * 2, start=14)])
    status = results.pop()
    assert status.read == 6
    assert [(r.row.kind, r.row.range_start, r.row.range_end) for r in results] == [("advance", 10, 15)]


def test_python_transform_in_the_executor(tmp_path):
    cfg = config(tmp_path, **{"transforms.python": f"{__name__}:explode", "flush.size": "2"})
    vals = [js(drop=True), js(items=[1, 2, 3]), js(a=1), js(drop=True)]
    results = run(cfg, [batch(vals)])
    results.pop()
    rows = [r.row for r in results]
    assert [(r.range_start, r.range_end, r.first_offset, r.last_offset, r.record_count) for r in rows] == \
        [(10, 11, 11, 11, 3)]
    lines = (tmp_path / "store" / "bkt" / rows[0].object_key).read_text().splitlines()
    assert [json.loads(x) for x in lines] == [{"item": 1}, {"item": 2}, {"item": 3}]


def test_transform_error_in_the_executor_names_the_record(tmp_path):
    cfg = config(tmp_path, **{"transforms.python": f"{__name__}:boom"})
    with pytest.raises(TransformError, match="record t-3@11"):
        run(cfg, [batch([js(a=1), js(a=2)])])


# ----------------------------------------------------------------------------- config


BASE = {"name": "j", "topics": "t", "format.class": "json", "flush.size": "3", "s3.bucket.name": "bkt",
        "manifest.location": "/tmp/m", "kafka.bootstrap.servers": "localhost:9"}


def test_config_keys():
    c = SinkConfig.from_dict({**BASE, "transforms.sql": "key IS NOT NULL", "transforms.python": "json:loads",
                              "metrics.location": "/tmp/metrics"})
    assert (c.transforms_sql, c.transforms_python, c.metrics_location) == ("key IS NOT NULL", "json:loads",
                                                                          "/tmp/metrics")
    t = wiring.transforms(c)
    assert t.record_path and t.reads() == (True, True)
    assert wiring.transforms(SinkConfig.from_dict(BASE)) is None
    only_sql = wiring.transforms(SinkConfig.from_dict({**BASE, "transforms.sql": "decode(value) <> ''"}))
    assert not only_sql.record_path and only_sql.reads() == (False, False)


def test_bad_transforms_are_config_errors_naming_the_key():
    with pytest.raises(ConfigError) as ei:
        SinkConfig.from_dict({**BASE, "transforms.sql": "no_such_column = 1", "transforms.python": "nomod_xyz:f"})
    text = str(ei.value)
    assert "transforms.sql" in text and "no_such_column" in text and "transforms.python" in text


def test_connect_smts_are_named_with_the_equivalent():
    c = SinkConfig.from_dict({**BASE, "transforms": "drop", "transforms.drop.type": "x.Filter"})
    assert any(w.startswith("transforms=drop: Connect SMTs are not applied") and "transforms.sql" in w
               for w in c.warnings)
    assert dict(c.ignored_keys)["transforms.drop.type"].startswith("Connect SMTs are not applied")


def test_a_filter_keeps_the_columnar_path(tmp_path, monkeypatch):
    from lakesink.executor.archiver import PartitionArchiver

    taken = []
    orig = PartitionArchiver.process_run

    def spy(self, offsets, *a, **kw):
        ok = orig(self, offsets, *a, **kw)
        taken.append((list(offsets), ok))
        return ok

    monkeypatch.setattr(PartitionArchiver, "process_run", spy)
    cfg = config(tmp_path, **{"format.class": "bytearray", "transforms.sql": "value <> 'hb'"})
    results = run(cfg, [batch([b"a", b"hb", b"b", b"c", b"hb", b"hb"])], end=16)
    results.pop()
    assert taken == [([10, 12, 13], True)]
    assert [(r.row.range_start, r.row.range_end, r.row.first_offset, r.row.last_offset, r.row.record_count)
            for r in results] == [(10, 13, 10, 13, 3), (11, 11, 11, 11, 1),  # 11: dropped inside the file
                                  (14, 15, None, None, 0)]  # the dropped tail advances


# ----------------------------------------------------------------------------- dropped offsets inside objects


def test_dropped_offsets_and_runs():
    from lakesink.manifest.rows import filtered_row, offset_runs
    from lakesink.transforms import dropped_offsets

    assert dropped_offsets([1, 2, 3, 4], [1, 2, 3, 4]) == []
    assert dropped_offsets([1, 2, 3, 4, 5], [2, 2, 2, 5]) == [1, 3, 4]  # one-to-many repeats 2; order kept
    assert dropped_offsets([1, 2, 3], [3, 1]) == [2]  # a query may reorder its rows
    assert offset_runs([1, 2, 3, 7, 9, 10]) == [(1, 3), (7, 7), (9, 10)]
    row = filtered_row("t", 3, [14, 8, 15])
    assert (row.kind, row.range_start, row.range_end, row.first_offset, row.last_offset, row.record_count) == \
        ("filtered", 8, 15, 8, 15, 3)
    assert row.note == "3 offsets a transform dropped inside archived objects' spans (2 runs): 8, 14-15"
    many = filtered_row("t", 3, list(range(0, 200, 2)))
    assert many.record_count == 100 and many.note.endswith(", 98, … (50 more runs)")


def test_filtered_row_per_commit_group_only_inside_object_spans(tmp_path):
    # offsets 10..21, flush.size 3; hb dropped at 10 (before the first file: an unarchived hole of the gaps
    # view), 12 and 14 (inside file [11, 15]), 17-18 (inside file [16, 20]) and 21 (the dropped tail: advance)
    ts = ["hb", "a", "hb", "a", "hb", "a", "a", "hb", "hb", "a", "a", "hb"]
    cfg = config(tmp_path, **{"transforms.sql": "json_extract_string(decode(value), '$.t') <> 'hb'",
                              "format.class": "bytearray"})
    vals = [js(t=t) for t in ts]
    results = run(cfg, [batch(vals[:7]), batch(vals[7:], start=17)], end=22)
    results.pop()
    rows = [(r.row.kind, r.row.range_start, r.row.range_end, r.row.first_offset, r.row.last_offset,
             r.row.record_count) for r in results]
    assert rows == [("object", 10, 15, 11, 15, 3), ("filtered", 12, 14, 12, 14, 2),
                    ("object", 16, 20, 16, 20, 3), ("filtered", 17, 18, 17, 18, 2), ("advance", 21, 21, None, None, 0)]
    notes = [r.row.note for r in results if r.row.kind == "filtered"]
    assert notes[0].endswith("(2 runs): 12, 14") and notes[1].endswith("(1 run): 17-18")


def keep_odd(rec: Record):
    return rec if rec.offset % 2 else None


def test_sql_and_python_drops_of_one_batch_are_merged_in_order(tmp_path):
    # SQL drops 14, the Python transform drops the even offsets it sees (10, 12): noted out of order, kept sorted
    cfg = config(tmp_path, **{"transforms.sql": "kafka_offset <> 14", "transforms.python": f"{__name__}:keep_odd",
                              "flush.size": "3"})
    results = run(cfg, [batch([js(a=i) for i in range(7)])])  # offsets 10..16
    results.pop()
    rows = [(r.row.kind, r.row.range_start, r.row.range_end, r.row.record_count) for r in results]
    # records 11, 13, 15 make the file [11, 15]; 10 is before it (a hole), 12 and 14 inside it
    assert rows == [("object", 10, 15, 3), ("filtered", 12, 14, 2), ("advance", 16, 16, 0)]


def test_filtered_offsets_inside_interleaved_files_are_noted_once(tmp_path):
    # FieldPartitioner: files p=x [10, 14] and p=y [11, 15] of one commit group interleave; 12 and 13 (dropped)
    # lie inside both spans and are noted once; flush.size 4 (records of the whole partition) closes the group
    cfg = config(tmp_path, **{"transforms.sql": "json_extract_string(decode(value), '$.t') <> 'hb'",
                              "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
                              "partition.field.name": "p", "flush.size": "4", "value.decoder": "json"})
    vals = [js(t="a", p="x"), js(t="a", p="y"), js(t="hb", p="x"), js(t="hb", p="x"), js(t="a", p="x"),
            js(t="a", p="y")]
    results = run(cfg, [batch(vals)])
    results.pop()
    rows = sorted((r.row.kind, r.row.first_offset, r.row.last_offset, r.row.record_count) for r in results)
    assert rows == [("filtered", 12, 13, 2), ("object", 10, 14, 2), ("object", 11, 15, 2)]
