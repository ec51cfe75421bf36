"""The executor body (lakesink.executor.task.archive_partitions) on Arrow batches with a local store:
its manifest rows and objects are those the pure rotation state machine predicts."""
import json

import pyarrow as pa
import pytest

from lakesink.wiring import task_parts
from lakesink import wiring
from lakesink.executor.archiver import BatchContext
from lakesink.config import SinkConfig
from lakesink.errors import PartitionError
from lakesink.objects.records import SinkRecord
from lakesink.objects.rotation import Commit, Rotator
from lakesink.executor.task import PartitionStatus, archive_partitions, decode_result

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def batches(values, chunk):
    out = []
    for s in range(0, len(values), chunk):
        v = values[s:s + chunk]
        m = len(v)
        out.append(pa.RecordBatch.from_pydict({
            "key": pa.array([b"k%d" % i for i in range(s, s + m)], pa.binary()),
            "value": pa.array(v, pa.binary()),
            "topic": pa.array(["t"] * m, pa.string()),
            "partition": pa.array([3] * m, pa.int32()),
            "offset": pa.array(range(10 + s, 10 + s + m), pa.int64()),
            "ts": pa.array([1_700_000_000_000 + i for i in range(s, s + m)], pa.int64()),
            "headers": pa.array([[{"key": "h", "value": b"%d" % i}] for i in range(s, s + m)], HEADERS),
        }))
    return out


def config(tmp_path, **extra):
    return SinkConfig.from_dict({
        "name": "j", "topics": "t", "format.class": "json", "flush.size": "4", "s3.bucket.name": "bkt",
        "store.url": f"file://{tmp_path}/store", "manifest.location": str(tmp_path / "m"),
        "kafka.bootstrap.servers": "localhost:9", "partitioner.class": "FieldPartitioner",
        "partition.field.name": "f", "behavior.on.null.values": "ignore", "store.kafka.keys": "true",
        **extra})


def run(cfg, values, chunk):
    ctx = BatchContext(job="j", run_id="r", batch_id=0, cluster_id=None, topic_ids={}, flush_tail=True)
    out = list(archive_partitions(iter(batches(values, chunk)), task_parts(cfg), ctx, {("t", 3): (10, 10 + len(values))}))
    return [decode_result(r) for r in out[0].column("row").to_pylist()]


def values(n):
    out = []
    for i in range(n):
        out.append(None if i % 7 == 3 else json.dumps({"f": (i // 3) % 3, "i": i}).encode())
    return out


@pytest.mark.parametrize("chunk", [1, 5, 1000])
def test_rows_match_the_rotation_state_machine(tmp_path, chunk):
    cfg = config(tmp_path / str(chunk))
    vals = values(60)
    results = run(cfg, vals, chunk)
    status = results.pop()
    assert status == PartitionStatus("t", 3, read=60, first_offset=10, last_offset=69)
    assert all(not r.pending for r in results)
    rows = [r.row.to_json() for r in results]  # timestamps as epoch ms, as the rotator reports them
    rot = Rotator(wiring.rotation_policy(cfg), wiring.partitioner(cfg), 10)
    events = []
    for i, v in enumerate(vals):
        events += rot.process(SinkRecord("t", 3, 10 + i, 1_700_000_000_000 + i, b"k%d" % i,
                                         None if v is None else json.loads(v)))
    events += rot.finish(flush_tail=True)
    want = sorted((c.range_start, c.range_end, f.encoded_partition, f.start_offset, f.last_offset, f.record_count,
                   f.min_timestamp, f.max_timestamp) for c in events if isinstance(c, Commit) for f in c.files)
    got = sorted((r["range_start"], r["range_end"], r["encoded_partition"], r["first_offset"], r["last_offset"],
                  r["record_count"], r["min_timestamp"], r["max_timestamp"]) for r in rows if r["kind"] == "object")
    assert got == want
    # every object holds its records' values, in offset order
    store = tmp_path / str(chunk) / "store" / "bkt"
    for r in rows:
        if r["kind"] != "object":
            continue
        lines = (store / r["object_key"]).read_text().splitlines()
        got_vals = [json.loads(x) for x in lines]
        assert [g["i"] + 10 for g in got_vals][0] == r["first_offset"] and len(got_vals) == r["record_count"]
        assert all(g["f"] == int(r["encoded_partition"].split("=")[1]) for g in got_vals)
        assert (store / r["keys_key"]).exists()


def test_errors_name_the_record(tmp_path):
    vals = values(20)
    vals[13] = json.dumps({"no_f": 1}).encode()
    with pytest.raises(PartitionError, match="t-3.*23|23.*t-3|offset 23") as ei:
        run(config(tmp_path), vals, 5)
    assert ei.value.offset == 23
    vals = values(20)
    with pytest.raises(PartitionError) as ei:
        run(config(tmp_path / "fail", **{"behavior.on.null.values": "fail"}), vals, 5)
    assert ei.value.offset == 13  # the first tombstone (i=3)


AVRO_SCHEMA = {"type": "record", "name": "V", "fields": [{"name": "f", "type": "long"}, {"name": "i", "type": "long"}]}


def _avro_datum(doc: dict) -> bytes:
    import io

    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO_SCHEMA), doc)
    return out.getvalue()


@pytest.mark.parametrize("fmt,extra", [
    ("json", {}),
    ("avro", {"value.schema": json.dumps(AVRO_SCHEMA)}),
    ("bytearray", {"value.decoder": "bytes"}),
    ("parquet", {"value.schema": json.dumps(AVRO_SCHEMA)}),
])
def test_tombstones_written_as_keys_headers_and_metadata_only_and_read_back(tmp_path, fmt, extra):
    """behavior.on.null.values=write (spec §5): a file of tombstones has no value object, only its side files under
    ``<topic>/tombstone/``; its row says so, and reading the archive back gives each tombstone's key, headers,
    offset and a null value, in offset order with the other records."""
    from lakesink.executor.archive_tasks import ObjectReader
    from lakesink.executor.readback import ArchivedObject
    from lakesink.manifest.rows import TOMBSTONES_NOTE

    cfg = config(tmp_path, **{"format.class": fmt, "partitioner.class": "DefaultPartitioner",
                              "behavior.on.null.values": "write", "store.kafka.headers": "true",
                              "headers.format.class": "json", **extra})
    vals = values(30)
    if fmt in ("avro", "parquet"):
        vals = [None if v is None else _avro_datum(json.loads(v)) for v in vals]
    results = run(cfg, vals, 7)
    results.pop()  # the partition status
    rows = [r.row.to_json() for r in results if r.row.kind == "object"]
    store = tmp_path / "store" / "bkt"
    tombs = [r for r in rows if r["encoded_partition"] == "tombstone"]
    assert sum(r["record_count"] for r in tombs) == vals.count(None) > 0
    for r in tombs:
        assert r["note"] == TOMBSTONES_NOTE and r["size_bytes"] == 0 and r["etag"] is None
        assert r["object_key"].startswith("topics/t/tombstone/t+3+") and not (store / r["object_key"]).exists()
        assert sorted(s["view"] for s in r["side_files"]) == ["headers", "keys", "metadata"]
        assert all((store / s["key"]).exists() for s in r["side_files"])
    assert all(r["note"] is None and (store / r["object_key"]).exists() for r in rows if r not in tombs)
    reader = ObjectReader(task_parts(cfg))
    got = sorted((rec.offset, rec.key, rec.value is None, rec.headers)
                 for r in rows for rec in reader.records(ArchivedObject.from_row(r)))
    assert got == [(10 + i, b"k%d" % i, v is None, [("h", b"%d" % i)]) for i, v in enumerate(vals)]


def test_an_erase_matching_tombstones_is_refused_in_one_line(tmp_path):
    """``lakesink erase`` rewrites value objects; a file of tombstones has none: a predicate that matches one is
    refused, naming it, and nothing changes (a predicate matching only other records still works)."""
    from lakesink.driver.erase import erase
    from lakesink.errors import InvalidArgumentError
    from lakesink.manifest.deltars import DeltaRsManifest

    cfg = config(tmp_path, **{"partitioner.class": "DefaultPartitioner", "behavior.on.null.values": "write"})
    results = run(cfg, values(20), 7)
    results.pop()
    m = DeltaRsManifest(cfg.manifest_location)
    m.ensure()
    m.commit("j", 0, "r", [r.row for r in results])
    before = m.arrow(job="j").num_rows
    with pytest.raises(InvalidArgumentError, match=r"matches 1 tombstone\(s\) in topics/t/tombstone/t\+3\+\d+\.json, "
                                                   r"a file of tombstones only .* not supported yet"):
        erase(cfg, "key = 'k3'", execute=True)  # values(20)[3] is a tombstone
    assert m.arrow(job="j").num_rows == before
    plan = erase(cfg, "key = 'k4'")  # a record with a value: the dry run plans it
    assert plan.records == 1
