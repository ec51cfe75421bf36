"""What the record-metadata side file (``store.kafka.metadata``, ``<base>.metadata.avro``) costs, no Spark.

    PYTHONPATH=. .venv/bin/python bench/metadata.py [--records 1000000]

Writes N records' offsets, timestamps and timestamp types with the metadata writer on both archiver paths
(``write_columns`` over the lists the columnar path holds; ``write_many`` over SinkRecords, in the record
path's 4,096-record batches) and reads them back, next to the value writers of the same records as the
baseline (bytearray ``write_payloads`` of 200-byte values, the cheapest columnar write; JSON ``write_many``,
a typical record-path write). CPU seconds, best of ``--repeat``; prints the ratios and the file size.
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def best(fn, repeat: int) -> tuple[float, object]:
    out, t_best = None, None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        dt = time.process_time() - t
        t_best = dt if t_best is None else min(t_best, dt)
    return t_best, out


def main(argv=None) -> int:
    import pyarrow as pa

    from lakesink.objects.formats import create
    from lakesink.objects.formats.metadata import MetadataFormat
    from lakesink.objects.records import SinkRecord

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    n = a.records
    offsets = list(range(10_000_000, 10_000_000 + n))
    timestamps = [1_760_000_000_000 + i * 3 for i in range(n)]
    types = [0] * n
    values = [json.dumps({"i": i, "pad": "x" * 180}).encode() for i in range(n)]
    records = [SinkRecord("t", 0, o, ts, None, json.loads(v), timestamp_type=0)
               for o, ts, v in zip(offsets, timestamps, values)]
    payloads = pa.array(values, pa.binary())
    fmt = MetadataFormat()
    chunk, batch = 10_000, 4096

    def meta_columns():
        out = io.BytesIO()
        w = fmt.open_writer(out)
        for s in range(0, n, chunk):
            w.write_columns(offsets[s:s + chunk], timestamps[s:s + chunk], types[s:s + chunk])
        w.close()
        return out.getvalue()

    def meta_records():
        out = io.BytesIO()
        w = fmt.open_writer(out)
        for s in range(0, n, batch):
            w.write_many(records[s:s + batch])
        w.close()
        return out.getvalue()

    def bytearray_payloads():
        out = io.BytesIO()
        w = create("bytearray").open_writer(out)
        for s in range(0, n, chunk):
            w.write_payloads(payloads.slice(s, chunk))
        w.close()
        return out.getvalue()

    def json_records():
        out = io.BytesIO()
        w = create("json").open_writer(out)
        for s in range(0, n, batch):
            w.write_many(records[s:s + batch])
        w.close()
        return out.getvalue()

    t_cols, data = best(meta_columns, a.repeat)
    t_recs, data2 = best(meta_records, a.repeat)
    assert data == data2, "the two paths must write identical bytes"
    t_read, md = best(lambda: fmt.read_columns(io.BytesIO(data)), a.repeat)
    assert md.offsets == offsets and md.timestamps == timestamps
    t_ba, _ = best(bytearray_payloads, a.repeat)
    t_json, _ = best(json_records, a.repeat)
    print(f"{n:,} records; metadata file {len(data):,} bytes ({len(data) / n:.2f} B/record)")
    print(f"metadata write_columns (columnar path) {t_cols:.3f}s   baseline bytearray write_payloads {t_ba:.3f}s "
          f"(x{t_cols / t_ba:.2f})")
    print(f"metadata write_many (record path)      {t_recs:.3f}s   baseline json write_many          {t_json:.3f}s "
          f"(x{t_recs / t_json:.2f})")
    print(f"metadata read_columns                  {t_read:.3f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
