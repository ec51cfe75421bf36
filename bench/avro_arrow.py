"""The column-at-once Avro -> Arrow decode (lakesink.schemas.avro_arrow.decode_column) against the record path
it replaces for Parquet on the direct reader, in the same run: fastavro decoding every datum
(``AvroDecoder.decode_many``) and the rows converted to Arrow columns as ``ParquetFormatWriter`` converts them
(one ``itemgetter`` list per column, ``pa.array`` in the file's type).

    .venv/bin/python bench/avro_arrow.py [--values 10000] [--batches 10]

Values: a record of a long, a ~20 B string, a ~150 B string and a nullable double (a third of them null), in
Arrow batches of ``--values`` (the sink's batch size); one core, best of 5. Prints microseconds per value of
the decode alone and of the whole Parquet write (decode, writer, snappy, into memory), the ratios (> 1: the
column decode is faster), and whether the two paths' files are byte-identical.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
from operator import itemgetter

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import fastavro  # noqa: E402
import pyarrow as pa  # noqa: E402

from json_copy import best  # noqa: E402

from lakesink.decoders import create_decoder  # noqa: E402
from lakesink.objects.formats.parquet import ParquetFormat  # noqa: E402
from lakesink.objects.records import SinkRecord  # noqa: E402
from lakesink.schemas.avro import avro_to_arrow_schema, raw_parsed_schema  # noqa: E402
from lakesink.schemas.avro_arrow import decode_column  # noqa: E402

SCHEMA = {"type": "record", "name": "Event", "namespace": "bench", "fields": [
    {"name": "event_id", "type": "long"},
    {"name": "user", "type": "string"},
    {"name": "payload", "type": "string"},
    {"name": "score", "type": ["null", "double"], "default": None}]}


def value(parsed, i: int) -> bytes:
    b = io.BytesIO()
    fastavro.schemaless_writer(b, parsed, {
        "event_id": 1_700_000_000_000 + i * 7919, "user": f"user-{i % 50_000:06d}@example.org"[:20],
        "payload": (f"page=/p/{i % 977}&ref=search&q=" + "ü" * (i % 5) + "x" * 150)[:150],
        "score": None if i % 3 == 0 else i / 13})
    return b.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", type=int, default=10_000, help="values per Arrow batch (default 10,000)")
    ap.add_argument("--batches", type=int, default=10)
    a = ap.parse_args(argv)
    parsed = fastavro.parse_schema(SCHEMA)
    raws = [[value(parsed, b * a.values + i) for i in range(a.values)] for b in range(a.batches)]
    columns = [pa.array(r, pa.binary()) for r in raws]
    schema = raw_parsed_schema(SCHEMA)
    decoder = create_decoder("avro", schema=json.dumps(SCHEMA), wire_format=False)
    vs = decoder.fixed_schema
    arrow_schema = avro_to_arrow_schema(SCHEMA)
    getters = [itemgetter(name) for name in arrow_schema.names]
    n = a.values * a.batches

    def columnar():
        for c in columns:
            assert isinstance(decode_column(c, schema), pa.Table)

    def record_path():
        for r in raws:
            rows = [v for v, _vs in decoder.decode_many(r, "t", 0, range(len(r)))]
            pa.Table.from_arrays([pa.array(list(map(get, rows)), type=f.type) for get, f in zip(getters, arrow_schema)],
                                 schema=arrow_schema)

    def columnar_file() -> bytes:
        out = io.BytesIO()
        w = ParquetFormat().open_writer(out)
        for c in columns:
            w.write_payloads(decode_column(c, schema), vs)
        w.close()
        return out.getvalue()

    def record_file() -> bytes:
        out = io.BytesIO()
        w = ParquetFormat().open_writer(out)
        for r in raws:
            decoded = decoder.decode_many(r, "t", 0, range(len(r)))
            w.write_many([SinkRecord("t", 0, i, 0, None, v, (), vs, raw, None, {}, vs)
                          for i, ((v, _vs), raw) in enumerate(zip(decoded, r))])
        w.close()
        return out.getvalue()

    same = columnar_file() == record_file()
    t_col, t_rec = best(columnar), best(record_path)
    t_col_file, t_rec_file = best(columnar_file), best(record_file)
    print(f"{n:,} bare-Avro values (~{sum(map(len, raws[0])) / a.values:.0f} B) in batches of {a.values:,}")
    print(f"decode to Arrow:  decode_column {t_col / n * 1e6:6.2f} µs/value   "
          f"record path {t_rec / n * 1e6:6.2f} µs/value   ratio {t_rec / t_col:.1f}x")
    print(f"Parquet file:     columnar      {t_col_file / n * 1e6:6.2f} µs/value   "
          f"record path {t_rec_file / n * 1e6:6.2f} µs/value   ratio {t_rec_file / t_col_file:.1f}x")
    print(f"(> 1: the column decode is faster) the two Parquet files are {'byte-identical' if same else 'DIFFERENT'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
