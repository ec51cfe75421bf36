"""Archive fixtures shared by the readback, Block-GZIP range and restore tests: a small Avro schema, value
bytes per format, a file-store config, Arrow batches shaped like the reader's, and the archiver run on them."""
from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa

from lakesink.wiring import task_parts
from lakesink.config import SinkConfig
from lakesink.executor.archiver import ArchivedRow, BatchContext
from lakesink.executor.columnar import ColumnarPlan
from lakesink.executor.task import archive_partitions, decode_result

SCHEMA = {"type": "record", "name": "R", "namespace": "t",
          "fields": [{"name": "id", "type": "long"}, {"name": "s", "type": "string"},
                     {"name": "tags", "type": {"type": "array", "items": "string"}},
                     {"name": "opt", "type": ["null", "double"], "default": None}]}
PARSED = fastavro.parse_schema(SCHEMA)
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
BASE_TS = 1_700_000_000_000


def avro_datum(i: int) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, PARSED, {"id": i, "s": "é" * (i % 5), "tags": ["a"] * (i % 3),
                                             "opt": None if i % 3 else i / 8})
    return out.getvalue()


def value_bytes(fmt: str, i: int) -> bytes:
    if fmt in ("avro", "parquet"):
        return avro_datum(i)
    if fmt == "json":
        return json.dumps({"i": i, "s": "ü" * (i % 3), "n": None}, separators=(",", ":"), ensure_ascii=False).encode()
    if fmt == "blockgzip":
        return f"line {i} ✓".encode()
    return b"\x00\xffraw-%d" % i  # bytearray: any bytes but the separator


def config(tmp_path, fmt: str, **extra) -> SinkConfig:
    cfg = {"name": "j", "topics": "t", "format.class": fmt, "flush.size": "4", "s3.bucket.name": "bkt",
           "store.url": f"file://{tmp_path}/store", "manifest.location": str(tmp_path / "m"),
           "kafka.bootstrap.servers": "localhost:9"}
    if fmt in ("avro", "parquet"):
        cfg["value.schema"] = json.dumps(SCHEMA)
    cfg.update({k.replace("_", "."): v for k, v in extra.items()})
    return SinkConfig.from_dict(cfg)


def headers_of(i: int):
    # duplicates, an empty value and a null value
    return [("h", b"%d" % i), ("h", b"dup"), ("empty", b""), ("null", None)]


def batch(values, offsets, timestamps, types=None, keys=None, headers=None) -> pa.RecordBatch:
    m = len(values)
    cols = {"value": pa.array(values, pa.binary()), "partition": pa.array([3] * m, pa.int32()),
            "offset": pa.array(offsets, pa.int64()), "ts": pa.array(timestamps, pa.int64())}
    if keys is not None:
        cols["key"] = pa.array(keys, pa.binary())
    if headers is not None:
        cols["headers"] = pa.array([[{"key": k, "value": v} for k, v in h] for h in headers], HEADERS)
    if types is not None:
        cols["ts_type"] = pa.array(types, pa.int32())
    return pa.RecordBatch.from_pydict(cols)


def archive(cfg, batches, start: int, end: int, columnar: bool = False) -> list:
    ctx = BatchContext(job="j", run_id="r", batch_id=0, cluster_id=None, topic_ids={}, flush_tail=True)
    plan = ColumnarPlan.for_parts(task_parts(cfg)) if columnar else None
    out = list(archive_partitions(iter(batches), task_parts(cfg), ctx, {("t", 3): (start, end)}, plan))
    results = [decode_result(r) for r in out[0].column("row").to_pylist()]
    return [r.row for r in results if isinstance(r, ArchivedRow) and r.row.kind == "object"]



class CountingStore:
    """The real local store, counting the bytes each read returns (what an S3 GET would transfer)."""

    def __init__(self, store):
        self.store, self.fetched, self.reads = store, 0, []

    def read(self, key, etag=None, version_id=None, byte_range=None):
        data = self.store.read(key, etag=etag, version_id=version_id, byte_range=byte_range)
        self.fetched += len(data)
        self.reads.append((key, byte_range))
        return data

    def __getattr__(self, name):
        return getattr(self.store, name)
