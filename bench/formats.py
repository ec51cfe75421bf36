"""Format writer throughput vs the bare library doing the same encoding, in the same run.

    .venv/bin/python bench/formats.py [--records N] [--repeat R]

Input records (decoded values + Confluent wire bytes) are built once, outside timing; only the
encoding into a discarding sink is timed (best of R). MB/s is over the records' wire bytes (the
same denominator for every row). ratio = ours / baseline records/s; the target is >= 0.85.
Prints, never asserts.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import fastavro  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from isal import igzip  # noqa: E402

from lakesink.formats import create  # noqa: E402
from lakesink.records import SinkRecord  # noqa: E402
from lakesink.schema import avro_to_arrow_schema, value_schema  # noqa: E402

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "bench",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "email", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string"},
        {"name": "created_ms", "type": "long"},
        {"name": "status", "type": "string"},
        {"name": "items", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": ["null", "string"]},
    ],
}


class Discard:
    """Counting sink standing in for a multipart upload."""

    def __init__(self):
        self.n = 0

    def write(self, b):
        self.n += len(b)
        return len(b)

    def flush(self):
        pass


def build(n: int):
    vs = value_schema(SCHEMA, subject="orders-value", id=1, version=1)
    parsed = fastavro.parse_schema(SCHEMA)
    statuses = ["NEW", "PAID", "SHIPPED", "CANCELLED"]
    values, wires, lines, recs, text_recs, byte_recs = [], [], [], [], [], []
    for i in range(n):
        v = {"order_id": 10_000_000 + i, "customer": f"customer-{i % 9973:05d}",
             "email": f"user{i % 9973}@example.com", "amount": round((i % 10000) * 1.37, 2), "currency": "EUR",
             "created_ms": 1_700_000_000_000 + i * 17, "status": statuses[i % 4],
             "items": [f"sku-{(i * 7) % 1000:04d}", f"sku-{(i * 13) % 1000:04d}"][: 1 + i % 2],
             "note": None if i % 3 else f"deliver after {i % 24}:00, ring twice"}
        buf = io.BytesIO()
        buf.write(b"\x00" + struct.pack(">I", 1))
        fastavro.schemaless_writer(buf, parsed, v)
        w = buf.getvalue()
        line = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
        values.append(v)
        wires.append(w)
        lines.append(line)
        recs.append(SinkRecord("orders", 0, i, None, None, v, (), vs, w))
        text_recs.append(SinkRecord("orders", 0, i, None, None, line, (), None, None))
        byte_recs.append(SinkRecord("orders", 0, i, None, None, line.encode(), (), None, None))
    return vs, parsed, values, wires, lines, recs, text_recs, byte_recs


def timed(fn, repeat: int) -> tuple[float, int]:
    best, size = float("inf"), 0
    for _ in range(repeat):
        t = time.perf_counter()
        size = fn()
        best = min(best, time.perf_counter() - t)
    return best, size


def ours(fmt_name, opts, records):
    def run():
        sink = Discard()
        w = create(fmt_name, **opts).open_writer(sink)
        for r in records:
            w.write(r)
        w.close()
        return sink.n
    return run


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    n = a.records
    vs, parsed, values, wires, lines, recs, text_recs, byte_recs = build(n)
    wire_mb = sum(map(len, wires)) / 1e6
    print(f"{n} records, {wire_mb / n * 1e6:.0f} B wire / {sum(map(len, lines)) / n:.0f} B JSON per record "
          f"(MB/s over {wire_mb:.1f} MB of wire bytes), best of {a.repeat}\n")

    decoded = [SinkRecord(r.topic, r.partition, r.offset, None, None, r.value, (), vs, None) for r in recs]
    arrow_schema = avro_to_arrow_schema(SCHEMA)

    def fa(codec):
        def run():
            b = io.BytesIO()
            fastavro.writer(b, parsed, values, codec=codec, sync_interval=64000)
            return b.tell()
        return run

    def json_join(gz):
        def run():
            data = ("\n".join(json.dumps(v, separators=(",", ":"), ensure_ascii=False) for v in values) + "\n").encode()
            return len(igzip.compress(data, 1)) if gz else len(data)
        return run

    def bytes_join():
        return len(b"".join(r.value + b"\n" for r in byte_recs))

    def gzip_lines():
        return len(igzip.compress(("\n".join(lines) + "\n").encode(), 1))

    def pq_table():
        b = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(values, schema=arrow_schema), b, compression="snappy",
                       row_group_size=65536)
        return b.tell()

    rows = [
        ("avro null (wire fast path)", ours("avro", {}, recs), "fastavro.writer null", fa("null")),
        ("avro null (encode)", ours("avro", {}, decoded), "fastavro.writer null", fa("null")),
        ("avro deflate (fast path)", ours("avro", {"codec": "deflate"}, recs), "fastavro.writer deflate", fa("deflate")),
        ("avro deflate (encode)", ours("avro", {"codec": "deflate"}, decoded), "fastavro.writer deflate", fa("deflate")),
        ("avro snappy (fast path)", ours("avro", {"codec": "snappy"}, recs), "fastavro.writer snappy", fa("snappy")),
        ("avro snappy (encode)", ours("avro", {"codec": "snappy"}, decoded), "fastavro.writer snappy", fa("snappy")),
        ("json", ours("json", {}, recs), "json.dumps + join", json_join(False)),
        ("json gzip", ours("json", {"compression": "gzip"}, recs), "json.dumps + join + isal", json_join(True)),
        ("bytearray", ours("bytearray", {}, byte_recs), "b''.join", bytes_join),
        ("parquet snappy", ours("parquet", {}, recs), "Table.from_pylist + write_table", pq_table),
        ("blockgzip", ours("blockgzip", {}, text_recs), "isal gzip of joined lines", gzip_lines),
    ]
    hdr = f"{'format':28} {'ours rec/s':>11} {'MB/s':>7} {'out MB':>7} | {'baseline':32} {'rec/s':>11} {'MB/s':>7} | ratio"
    print(hdr)
    print("-" * len(hdr))
    for label, mine, base_label, base in rows:
        t1, s1 = timed(mine, a.repeat)
        t2, _ = timed(base, a.repeat)
        print(f"{label:28} {n / t1:11,.0f} {wire_mb / t1:7.1f} {s1 / 1e6:7.2f} | {base_label:32} "
              f"{n / t2:11,.0f} {wire_mb / t2:7.1f} | {t2 / t1:5.2f}")


if __name__ == "__main__":
    main()
