"""The column-at-once Avro datum check (lakesink.schemas.avro_check.check_datums) against the baseline it
replaces on the direct reader, in the same run: fastavro decoding every datum (the record path's decoder,
``AvroDecoder.decode_many``).

    .venv/bin/python bench/avro_check.py [--values 10000] [--batches 20]

Values are bench/sink.py's bare-Avro orders (~190 B: longs, strings, a double, an array of strings, an int, a
boolean, a nullable string), in Arrow batches of ``--values`` (the sink's batch size); one core, best of 5.
Prints microseconds per value and the ratio (> 1: the column check is faster).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import fastavro  # noqa: E402
import pyarrow as pa  # noqa: E402

import sink as bench_sink  # noqa: E402
from json_copy import best  # noqa: E402

from lakesink.decoders import create_decoder  # noqa: E402
from lakesink.schemas.avro_check import check_datums  # noqa: E402
from lakesink.schemas.avro import raw_parsed_schema  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", type=int, default=10_000, help="values per Arrow batch (default 10,000)")
    ap.add_argument("--batches", type=int, default=20)
    a = ap.parse_args(argv)
    parsed = fastavro.parse_schema(bench_sink.AVRO_SCHEMA)
    raws = [[bench_sink.avro_value(parsed, b * a.values + i) for i in range(a.values)] for b in range(a.batches)]
    columns = [pa.array(r, pa.binary()) for r in raws]
    schema = raw_parsed_schema(bench_sink.AVRO_SCHEMA)
    decoder = create_decoder("avro", schema=json.dumps(bench_sink.AVRO_SCHEMA), wire_format=False)
    n = a.values * a.batches

    def walk():
        assert all(check_datums(c, schema) is True for c in columns)

    def decode():
        for r in raws:
            decoder.decode_many(r, "t", 0, range(len(r)))

    t_walk, t_decode = best(walk), best(decode)
    print(f"{n:,} bare-Avro values (~{sum(map(len, raws[0])) / a.values:.0f} B) in batches of {a.values:,}")
    print(f"check_datums (column walk)      {t_walk / n * 1e6:6.2f} µs/value")
    print(f"fastavro decode_many (baseline) {t_decode / n * 1e6:6.2f} µs/value")
    print(f"ratio {t_decode / t_walk:.1f}x (> 1: the column walk is faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
