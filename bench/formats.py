"""Format writer throughput vs the bare library doing the same encoding, in the same run.

    .venv/bin/python bench/formats.py [--records N] [--repeat R]

Input records (decoded values + Confluent wire bytes) are built once, outside timing; only the
encoding into a discarding sink is timed (best of R, the three contenders of a row interleaved so
load drifts hit them alike). Each row times our writer fed through ``write_many`` in runs of
``--batch`` records (how the sink calls it: each file gets runs of consecutive records; the runs
are sliced outside timing) and through per-record ``write`` (for reference), against the bare
library doing the same encoding from the same pre-built values, into the same discarding sink.
MB/s is over the records' wire bytes (the same denominator for every row). ratio = ours /
baseline records/s; the target is >= 0.85 (for write_many). Prints, never asserts.
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

from lakesink.objects.formats import create  # noqa: E402
from lakesink.objects.formats.parquet import PAGE_SIZE  # noqa: E402
from lakesink.objects.records import SinkRecord  # noqa: E402
from lakesink.schemas.avro import avro_to_arrow_schema, value_schema  # noqa: E402

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
    """Counting sink standing in for a multipart upload (for ours and the baselines alike)."""

    closed = False

    def __init__(self):
        self.n = 0

    def write(self, b):
        self.n += len(b)
        return len(b)

    def tell(self):
        return self.n

    def seekable(self):
        return False

    def writable(self):
        return True

    def flush(self):
        pass

    def close(self):
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


def timed(fns, repeat: int) -> list[tuple[float, int]]:
    """Best time and output size of each of ``fns``, run interleaved ``repeat`` times."""
    best, size = [float("inf")] * len(fns), [0] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t = time.perf_counter()
            size[k] = fn()
            best[k] = min(best[k], time.perf_counter() - t)
    return list(zip(best, size))


def ours(fmt_name, opts, records):
    """Our writer, one write() per record."""
    def run():
        sink = Discard()
        w = create(fmt_name, **opts).open_writer(sink)
        write = w.write
        for r in records:
            write(r)
        w.close()
        return sink.n
    return run


def ours_many(fmt_name, opts, records, batch):
    """Our writer, write_many() per run of ``batch`` consecutive records."""
    runs = [records[i:i + batch] for i in range(0, len(records), batch)]

    def run():
        sink = Discard()
        w = create(fmt_name, **opts).open_writer(sink)
        write_many = w.write_many
        for r in runs:
            write_many(r)
        w.close()
        return sink.n
    return run


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4096, help="records per write_many call")
    a = ap.parse_args(argv)
    n = a.records
    vs, parsed, values, wires, lines, recs, text_recs, byte_recs = build(n)
    byte_values = [r.value for r in byte_recs]
    wire_mb = sum(map(len, wires)) / 1e6
    print(f"{n} records, {wire_mb / n * 1e6:.0f} B wire / {sum(map(len, lines)) / n:.0f} B JSON per record "
          f"(MB/s over {wire_mb:.1f} MB of wire bytes), best of {a.repeat}, write_many in runs of {a.batch}\n")

    decoded = [SinkRecord(r.topic, r.partition, r.offset, None, None, r.value, (), vs, None) for r in recs]
    arrow_schema = avro_to_arrow_schema(SCHEMA)
    # the encoder configuration our json writer uses (Connect-style compact UTF-8, no NaN)
    encode_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                                   check_circular=False).encode

    def fa(codec):
        def run():
            sink = Discard()
            fastavro.writer(sink, parsed, values, codec=codec, sync_interval=64000)
            return sink.n
        return run

    def json_join(gz):
        def run():
            data = ("\n".join(map(encode_json, values)) + "\n").encode()
            return len(igzip.compress(data, 1)) if gz else len(data)
        return run

    def bytes_join():
        return len(b"\n".join(byte_values) + b"\n")

    def gzip_lines():
        return len(igzip.compress(("\n".join(lines) + "\n").encode(), 1))

    def pq_table():
        sink = Discard()
        # the file layout our writer produces: 65536-row groups, dictionary encoding, 64 KiB pages
        pq.write_table(pa.Table.from_pylist(values, schema=arrow_schema), sink, compression="snappy",
                       row_group_size=65536, use_dictionary=True, data_page_size=PAGE_SIZE)
        return sink.n

    rows = [
        ("avro null (wire fast path)", "avro", {}, recs, "fastavro.writer null", fa("null")),
        ("avro null (encode)", "avro", {}, decoded, "fastavro.writer null", fa("null")),
        ("avro deflate (fast path)", "avro", {"codec": "deflate"}, recs, "fastavro.writer deflate", fa("deflate")),
        ("avro deflate (encode)", "avro", {"codec": "deflate"}, decoded, "fastavro.writer deflate", fa("deflate")),
        ("avro snappy (fast path)", "avro", {"codec": "snappy"}, recs, "fastavro.writer snappy", fa("snappy")),
        ("avro snappy (encode)", "avro", {"codec": "snappy"}, decoded, "fastavro.writer snappy", fa("snappy")),
        ("json", "json", {}, recs, "JSONEncoder.encode + join", json_join(False)),
        ("json gzip", "json", {"compression": "gzip"}, recs, "JSONEncoder.encode + join + isal", json_join(True)),
        ("bytearray", "bytearray", {}, byte_recs, "b'\\n'.join", bytes_join),
        ("parquet snappy", "parquet", {}, recs, "Table.from_pylist + write_table", pq_table),
        ("blockgzip", "blockgzip", {}, text_recs, "isal gzip of joined lines", gzip_lines),
    ]
    hdr = (f"{'format':27} {'write_many/s':>12} {'write/s':>10} {'MB/s':>6} {'out MB':>6} | "
           f"{'baseline':33} {'rec/s':>10} {'MB/s':>6} | {'many':>5} {'write':>5}")
    print(hdr)
    print("-" * len(hdr))
    for label, name, opts, records, base_label, base in rows:
        (tm, sm), (t1, s1), (tb, _) = timed([ours_many(name, opts, records, a.batch), ours(name, opts, records), base],
                                            a.repeat)
        note = "" if sm == s1 or name in ("avro", "parquet") else "  (write_many/write sizes differ!)"
        print(f"{label:27} {n / tm:12,.0f} {n / t1:10,.0f} {wire_mb / tm:6.1f} {sm / 1e6:6.2f} | {base_label:33} "
              f"{n / tb:10,.0f} {wire_mb / tb:6.1f} | {tb / tm:5.2f} {tb / t1:5.2f}{note}")
    print("\nratios: many = write_many / baseline, write = per-record write / baseline (records/s)")


if __name__ == "__main__":
    main()
