"""Reading an Avro headers side file's blocks into Arrow columns: the byte-parallel numpy scan
(``avro_scan.headers_block``) against the walk that notes spans only (``avro_scan.headers_positions``), per record,
on shapes of headers from one small one to two of ~25 B, no Spark, no Kafka. ``read_headers_arrays`` picks the walk
from ``POSITIONS_FROM_BYTES`` bytes per record on; both readers' columns are compared.

    .venv/bin/python bench/headers_read.py [--records 50000] [--repeat 5]

CPU time (``time.process_time``), best of ``--repeat``, in µs per record.
"""
from __future__ import annotations

import argparse
import io
import sys
import time

import fastavro

from lakesink.objects.formats.avro import HEADERS_SCHEMA
from lakesink.objects.formats.avro_scan import POSITIONS_FROM_BYTES, headers_block, headers_positions

SHAPES = {
    "one header 'i' = the record number (~10 B)": lambda i: [("i", str(i))],
    "two headers, ~25 B each (bench/sink.py's)": lambda i: [("source", "bench-producer"),
                                                             ("trace-id", "%016x" % (i * 2654435761 % (1 << 64)))],
    "one traceparent header (~65 B)": lambda i: [("traceparent", "00-%032x-%016x-01" % (i, i * 7))],
    "five headers of ~8 B": lambda i: [(f"h{j}", str(i + j)) for j in range(5)],
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    n = a.records

    def best(fn) -> float:
        out = float("inf")
        for _ in range(a.repeat):
            t = time.process_time()
            fn()
            out = min(out, time.process_time() - t)
        return out * 1e6 / n

    print(f"{n:,} records; µs per record, best of {a.repeat}; the walk is taken from {POSITIONS_FROM_BYTES} B a record")
    print("| headers | B per record | numpy scan | walk | taken |")
    print("|---|---:|---:|---:|---|")
    for name, make in SHAPES.items():
        buf = io.BytesIO()
        fastavro.writer(buf, fastavro.parse_schema(HEADERS_SCHEMA),
                        [[{"key": k, "value": v} for k, v in make(i)] for i in range(n)], codec="null")
        blocks = [(b.bytes_.getvalue(), b.num_records) for b in fastavro.block_reader(io.BytesIO(buf.getvalue()))]
        for (data, count) in blocks:
            x, y = headers_block(data, count), headers_positions(data, count)
            assert (x[0] == y[0]).all() and x[1].equals(y[1]) and x[2].equals(y[2]), name
        size = sum(len(d) for d, _ in blocks) / n
        scan = best(lambda: [headers_block(d, c) for d, c in blocks])
        walk = best(lambda: [headers_positions(d, c) for d, c in blocks])
        print(f"| {name} | {size:.0f} | {scan:.2f} | {walk:.2f} | {'walk' if size >= POSITIONS_FROM_BYTES else 'scan'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
