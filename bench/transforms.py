"""What a record transform costs on the executor hot path (``archive_partitions``, no Spark or Kafka).

    PYTHONPATH=. .venv/bin/python bench/transforms.py [--records N] [--formats json,bytearray] [--repeat R]

The batches and configs of ``bench/archiver.py`` (one Kafka partition, 10,000-row Arrow batches, a ``file://``
store), each format run without a transform (the baseline) and with:

* ``sql keep-all``  — ``transforms.sql=value IS NOT NULL``: DuckDB's fixed cost per batch (every record kept);
* ``sql filter``    — a DuckDB filter on a JSON field that keeps about half (``$.order_id`` even);
* ``sql 1-to-2``    — every record twice (``unnest([value, value])``): the grouped record path;
* ``python``        — ``transforms.python`` returning each record unchanged: the per-record path it forces.

Prints CPU records/s (records read per second) and the ratio to the baseline of the same run. Best of ``--repeat``.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_archiver", HERE / "archiver.py")
bench_archiver = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_archiver)

CASES = {
    "none": None,
    "sql keep-all": {"transforms.sql": "value IS NOT NULL"},
    "sql filter": {"transforms.sql": "CAST(json_extract(decode(value), '$.order_id') AS BIGINT) % 2 = 0"},
    "sql 1-to-2": {"transforms.sql": "SELECT kafka_offset, unnest([value, value]) AS value FROM records"},
    "python": {"transforms.python": "lakesink.transforms:Record"},  # replaced below by an identity function
}


def identity(record):
    """``transforms.python`` for the benchmark: every record unchanged."""
    return record


def run_once(fmt: str, batches, n: int, flush_size: int, extra: dict | None):
    """CPU seconds of ``archive_partitions`` over ``batches`` (columnar plan as the sink takes it), and its rows."""
    import shutil
    import tempfile
    import time

    from lakesink.config import SinkConfig
    from lakesink.executor.archiver import BatchContext
    from lakesink.executor.columnar import ColumnarPlan
    from lakesink.executor.task import archive_partitions
    from lakesink.wiring import task_parts

    bench_sink = bench_archiver.bench_sink
    work = Path(tempfile.mkdtemp(prefix="lakesink-bench-tr-"))
    try:
        cfg = SinkConfig.from_dict(bench_sink.sink_config(
            fmt, f"tr-{fmt}", "localhost:9", f"file://{work}/store", str(work / "manifest"), flush_size, extra))
        ctx = BatchContext(job=cfg.name, run_id="bench", batch_id=0, cluster_id=None, topic_ids={}, flush_tail=True)
        t = time.process_time()
        out = list(archive_partitions(iter(batches), task_parts(cfg), ctx, {(bench_archiver.TOPIC_OF[fmt], 0): (0, n)},
                                      ColumnarPlan.for_parts(task_parts(cfg))))
        dt = time.process_time() - t
        return dt, out[0].column("row").to_pylist() if out else []
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--flush-size", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--formats", default="json,bytearray")
    a = ap.parse_args(argv)
    sys.modules.setdefault("bench_transforms", sys.modules[__name__])
    CASES["python"] = {"transforms.python": "bench_transforms:identity"}
    print(f"{a.records:,} records, flush.size {a.flush_size}, best of {a.repeat} (CPU time)")
    for fmt in a.formats.split(","):
        batches = bench_archiver.make_batches(fmt, a.records)
        base = None
        for name, extra in CASES.items():
            best, objects, written = None, 0, 0
            for _ in range(a.repeat):
                dt, rows = run_once(fmt, batches, a.records, a.flush_size, extra)
                best = dt if best is None else min(best, dt)
                objects = sum(1 for r in rows if '"kind": "object"' in r)
            base = best if base is None else base
            print(f"{fmt:10s} {name:13s} {a.records / best:>10,.0f} rec/s  x{base / best:5.2f} of none  "
                  f"({best:.3f}s, {objects} objects)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
