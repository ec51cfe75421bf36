"""Executor hot path throughput without Spark or Kafka: records/s of ``archive_partitions``.

    PYTHONPATH=. .venv/bin/python bench/archiver.py [--records N] [--flush-size F] [--formats avro,json,..]
    PYTHONPATH=. .venv/bin/python bench/archiver.py --columnar --partitioner daily   # freshness.py's config
    LAKESINK_SRC=/path/to/other/checkout .venv/bin/python bench/archiver.py   # the same on another tree

One Kafka partition of N records (the values of ``bench/sink.py``: bare Avro of its ``AVRO_SCHEMA`` read
with an inline ``value.schema`` for avro/parquet; compact JSON text for json/bytearray; null keys, no
headers) is built once as Arrow record batches shaped like Spark's Kafka source (10,000 rows each, what
``mapInArrow`` hands the function by default), then fed to ``lakesink.executor.task.archive_partitions`` with a
``file://`` store in a temp dir: decoding, record building, rotation, format writers, object uploads and
manifest rows, i.e. everything an executor does. Best of ``--repeat``. Prints records/s per format and,
with ``--check``, a digest of the objects and manifest rows (to compare two source trees byte for byte).
"""
from __future__ import annotations

import argparse
import hashlib
import io
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = os.environ.get("LAKESINK_SRC", str(HERE.parent))
_spec = importlib.util.spec_from_file_location("bench_sink", HERE / "sink.py")
bench_sink = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_sink)  # puts this checkout first on sys.path
sys.path.insert(0, SRC)

import fastavro  # noqa: E402
import pyarrow as pa  # noqa: E402

TOPIC_OF = bench_sink.TOPIC_OF
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def make_batches(fmt: str, n: int, chunk: int = 10_000, kh: bool = False,
                 columnar: bool = False) -> list[pa.RecordBatch]:
    """Spark-shaped batches; ``columnar`` adds the canonical-Avro column Spark computes for the
    columnar avro path (here by a fastavro round trip, outside the timed section)."""
    topic = TOPIC_OF[fmt]
    canonical = None
    if topic == "bench-avro":
        parsed = fastavro.parse_schema(bench_sink.AVRO_SCHEMA)
        values = [bench_sink.avro_value(parsed, i) for i in range(n)]
        if columnar:
            canonical = [bench_sink.avro_value(parsed, i) == fastavro_roundtrip(parsed, v) for i, v in enumerate(values)]
    else:
        values = [bench_sink.json_value(i) for i in range(n)]
    out = []
    for s in range(0, n, chunk):
        v = values[s:s + chunk]
        m = len(v)
        out.append(pa.RecordBatch.from_pydict({
            "key": pa.array([b"k%d" % i if kh else None for i in range(s, s + m)], pa.binary()),
            "value": pa.array(v, pa.binary()),
            "topic": pa.array([topic] * m, pa.string()),
            "partition": pa.array([0] * m, pa.int32()),
            "offset": pa.array(range(s, s + m), pa.int64()),
            "ts": pa.array([1_700_000_000_000 + i for i in range(s, s + m)], pa.int64()),
            "headers": pa.array([[{"key": "h", "value": b"v%d" % i}, {"key": "n", "value": None}] if kh else None
                                 for i in range(s, s + m)], HEADERS_TYPE),
        }))
        if canonical is not None:
            from lakesink.executor.columnar import CANONICAL

            out[-1] = out[-1].append_column(CANONICAL, pa.array(canonical[s:s + m], pa.bool_()))
    return out


def fastavro_roundtrip(parsed, datum: bytes) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, fastavro.schemaless_reader(io.BytesIO(datum), parsed, None))
    return out.getvalue()


def digest(store_dir: Path, rows: list) -> str:
    h = hashlib.sha256()
    for p in sorted(store_dir.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(store_dir)).encode())
            if p.suffix == ".avro":  # the sync marker is random: compare the bytes without it
                data = p.read_bytes()
                sync = fastavro.reader(io.BytesIO(data))._header["sync"]
                h.update(data.replace(sync, b"<sync-marker-16>"))
            else:
                h.update(p.read_bytes())
    for r in rows:
        d = json.loads(r)
        d = d.get("row", d)  # result rows: {"row": ...} once, the row itself now
        for k in ("etag", "object_uri"):  # etag: random Avro sync markers; uri: the temp dir
            d.pop(k, None)
        for side in d.get("side_files") or []:
            side.pop("etag", None)
        h.update(json.dumps(d, sort_keys=True).encode())
    return h.hexdigest()[:16]


def run_once(fmt: str, batches, n: int, flush_size: int, extra: dict | None = None, columnar: bool = False):
    from lakesink.executor.archiver import BatchContext
    from lakesink.executor.columnar import ColumnarPlan
    from lakesink.config import SinkConfig
    from lakesink.executor.task import archive_partitions
    from lakesink.wiring import task_parts

    work = Path(tempfile.mkdtemp(prefix="lakesink-bench-arch-"))
    try:
        cfg = SinkConfig.from_dict(bench_sink.sink_config(
            fmt, f"arch-{fmt}", "localhost:9", f"file://{work}/store", str(work / "manifest"), flush_size, extra))
        ctx = BatchContext(job=cfg.name, run_id="bench", batch_id=0, cluster_id=None, topic_ids={},
                           flush_tail=True)
        t = time.process_time()  # CPU time: robust to other load on the machine
        plan = ColumnarPlan.for_parts(task_parts(cfg)) if columnar else None
        out = list(archive_partitions(iter(batches), task_parts(cfg), ctx, {(TOPIC_OF[fmt], 0): (0, n)}, plan))
        dt = time.process_time() - t
        rows = out[0].column("row").to_pylist() if out else []
        return dt, rows, digest(work / "store", [r for r in rows if "status" not in json.loads(r)])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--flush-size", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--formats", default=",".join(bench_sink.FORMATS))
    ap.add_argument("--check", action="store_true", help="print a digest of objects + manifest rows")
    ap.add_argument("--columnar", action="store_true",
                    help="the columnar path (lakesink.executor.columnar) where the config allows it, as the sink takes it")
    ap.add_argument("--keys-headers", action="store_true",
                    help="records with keys and headers, stored as .keys/.headers objects too")
    ap.add_argument("--partitioner", default="default", choices=("default", "daily", "hourly"),
                    help="daily/hourly: timestamp.extractor=Record (bench/freshness.py's config), the records 1 ms "
                         "apart from 2023-11-14 22:13:20 UTC")
    ap.add_argument("--timezone", default="UTC", help="the time-based partitioners' timezone")
    ap.add_argument("--rotate-ms", type=int, default=10_000,
                    help="rotate.interval.ms under daily/hourly (-1: none); bench/freshness.py uses 10000")
    a = ap.parse_args(argv)
    import lakesink

    time_extra = {} if a.partitioner == "default" else {
        "partitioner.class": a.partitioner, "timestamp.extractor": "Record", "timezone": a.timezone, "locale": "en",
        "rotate.interval.ms": str(a.rotate_ms)}
    print(f"lakesink from {os.path.dirname(lakesink.__file__)}; {a.records:,} records, flush.size {a.flush_size}"
          + (f", {a.partitioner} partitioner ({a.timezone}, Record timestamps, rotate.interval.ms {a.rotate_ms})"
             if time_extra else ""))
    for fmt in a.formats.split(","):
        batches = make_batches(fmt, a.records, kh=a.keys_headers, columnar=a.columnar)
        extra = {"store.kafka.keys": "true", "store.kafka.headers": "true"} if a.keys_headers else {}
        extra = {**extra, **time_extra} or None
        best, dig, objects = None, None, 0
        for _ in range(a.repeat):
            dt, rows, dig = run_once(fmt, batches, a.records, a.flush_size, extra, a.columnar)
            best = dt if best is None else min(best, dt)
            objects = sum(1 for r in rows if '"kind": "object"' in r)
        line = f"{fmt:10s} {a.records / best:>10,.0f} rec/s  ({best:.3f}s, {objects} objects)"
        if a.check:
            line += f"  digest {dig}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
