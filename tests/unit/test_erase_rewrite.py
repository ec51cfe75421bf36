"""``lakesink.executor.rewrite``: each format's file cut to the kept positions, in the same format and codec, read back
with the format's own reader (and, for Avro and Parquet, with fastavro / pyarrow as any Confluent reader would)."""
from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakesink.executor.rewrite import metadata_bytes, rewrite_file, rewrite_metadata
from lakesink.objects import formats
from lakesink.objects.formats.base import RecordView
from lakesink.objects.formats.blockgzip import INDEX_SUFFIX, parse_index
from lakesink.objects.formats.metadata import MetadataFormat
from lakesink.objects.records import SinkRecord

OFFSETS = [10, 11, 13, 14, 15]  # a gap at 12 (a transaction marker)
KEEP = [0, 2, 4]


def _written(fmt, values, view=RecordView.VALUE) -> tuple[bytes, dict]:
    out = io.BytesIO()
    w = fmt.open_writer(out, view)
    w.write_many([SinkRecord("t", 0, o, 1000 + o, f"k{o}", v) for o, v in zip(OFFSETS, values)])
    w.close()
    return out.getvalue(), w.side_files()


@pytest.mark.parametrize("name,options,values", [
    ("json", {}, [{"id": i, "s": "é\n"} for i in range(5)]),
    ("json", {"compression": "gzip"}, [{"id": i} for i in range(5)]),
    ("bytearray", {}, [bytes([0, 255, i]) for i in range(5)]),
    ("bytearray", {"compression": "gzip"}, [b"v%d" % i for i in range(5)]),
    ("blockgzip", {"block_size": 8}, [f"line {i}" for i in range(5)]),  # a chunk per record or two
])
def test_line_formats_keep_their_records_codec_and_index(name, options, values):
    fmt = formats.create(name, **options)
    data, sides = _written(fmt, values)
    new, new_sides = rewrite_file(fmt, RecordView.VALUE, data, KEEP, OFFSETS, "t", 0)
    got = list(fmt.read(io.BytesIO(new)))
    want = list(fmt.read(io.BytesIO(data)))
    assert got == [want[i] for i in KEEP]
    if options.get("compression") == "gzip":
        assert new[:2] == b"\x1f\x8b"  # still gzip
    if name == "blockgzip":  # the index names the kept records' offsets and counts
        index = parse_index(new_sides[INDEX_SUFFIX])
        assert sum(c.num_records for c in index) == 3 and index[0].first_record_offset == 10
        assert {c.first_record_offset for c in index} <= {10, 13, 15}
        for c in index:  # every chunk reads on its own, as a ranged reader reads it
            assert fmt.read_chunk(new, c)
    else:
        assert new_sides == {}


def test_json_keys_and_headers_side_files():
    fmt = formats.create("json")
    data, _ = _written(fmt, list(range(5)), RecordView.KEYS)
    new, _ = rewrite_file(fmt, RecordView.KEYS, data, KEEP, OFFSETS)
    assert list(fmt.read(io.BytesIO(new), RecordView.KEYS)) == ["k10", "k13", "k15"]


def test_avro_keeps_schema_codec_and_header_metadata():
    schema = {"type": "record", "name": "Order", "namespace": "x", "connect.name": "x.Order",
              "fields": [{"name": "id", "type": "long"},
                         {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), [{"id": i, "at": 1000 * i} for i in range(5)],
                    codec="deflate", metadata={"connect.meta": "kept"})
    new, _ = rewrite_file(formats.create("avro"), RecordView.VALUE, out.getvalue(), KEEP, OFFSETS)
    reader = fastavro.reader(io.BytesIO(new))
    assert reader.codec == "deflate" and reader.metadata["connect.meta"] == "kept"
    assert json.loads(reader.metadata["avro.schema"])["connect.name"] == "x.Order"
    assert [r["id"] for r in reader] == [0, 2, 4]


def test_parquet_keeps_rows_compression_and_schema_metadata():
    table = pa.table({"id": list(range(5))}).replace_schema_metadata({"k": "v"})
    out = io.BytesIO()
    pq.write_table(table, out, compression="gzip")
    new, _ = rewrite_file(formats.create("parquet"), RecordView.VALUE, out.getvalue(), KEEP, OFFSETS)
    pf = pq.ParquetFile(io.BytesIO(new))
    assert pf.metadata.row_group(0).column(0).compression == "GZIP"
    assert pf.read().column("id").to_pylist() == [0, 2, 4] and pf.schema_arrow.metadata[b"k"] == b"v"


def test_record_metadata_is_cut_in_step_or_written_anew():
    data = metadata_bytes(OFFSETS, [1, None, 3, 4, 5], [0, -1, 1, 0, 0])
    md = MetadataFormat().read_columns(io.BytesIO(rewrite_metadata(data, KEEP)))
    assert (md.offsets, md.timestamps, md.timestamp_types) == ([10, 13, 15], [1, 3, 5], [0, 1, 0])


def test_an_unknown_format_is_refused_in_one_line():
    class Odd:
        name = "odd"

        def open_writer(self, out, view):
            return None

    with pytest.raises(ValueError, match="format 'odd': lakesink erase cannot rewrite its objects"):
        rewrite_file(Odd(), RecordView.VALUE, b"", [], [])
