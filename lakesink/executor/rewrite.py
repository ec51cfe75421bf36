"""Rewriting one archived file without some of its records (``lakesink erase``), in the format it was written in.

:func:`rewrite_file` takes the bytes of one file of an object (the value object or a side file: keys, headers,
record metadata) and the positions of the records to keep, and returns the bytes of the same file holding only
those records, in the same format and codec, so a Confluent reader reads it as before:

* JSON and ByteArray: the kept records' lines / values handed to the format's own writer
  (:meth:`~lakesink.objects.formats.base.FormatWriter.write_payloads`), with the object's compression;
* Block-GZIP: the kept lines through its writer, with their Kafka offsets, so the ``.index.json`` side file it
  returns (``side_files``) indexes the new chunks;
* Avro: the container file decoded and written again with fastavro with its own writer schema, codec and
  header metadata (``connect.*`` schema properties included: the schema JSON is copied as it is);
* Parquet: the table read with pyarrow, the kept rows written with the file's compression and schema metadata;
* the record-metadata side file: the kept offsets, timestamps and timestamp types.

Every view of one object is cut at the same positions: a side file's entry ``i`` belongs to the value's record ``i``.
"""
from __future__ import annotations

import io
from typing import Any, Sequence

from lakesink.errors import InvalidArgumentError
from lakesink.objects.formats.base import RecordView

__all__ = ["REWRITABLE", "rewrite_file", "rewrite_metadata"]

#: The value formats :func:`rewrite_file` can rewrite (every format lakesink writes).
REWRITABLE = ("json", "bytearray", "blockgzip", "avro", "parquet")


def rewrite_metadata(data: bytes, keep: Sequence[int]) -> bytes:
    """The record-metadata side file ``data`` holding only the records at positions ``keep``."""
    from lakesink.objects.formats.metadata import MetadataFormat

    fmt = MetadataFormat()
    md = fmt.read_columns(io.BytesIO(data))
    return metadata_bytes([md.offsets[i] for i in keep], [md.timestamps[i] for i in keep],
                          [md.timestamp_types[i] for i in keep])


def metadata_bytes(offsets: Sequence[int], timestamps: Sequence[int | None],
                   types: Sequence[int | None] | None) -> bytes:
    """A record-metadata side file of these records."""
    from lakesink.objects.formats.metadata import MetadataFormat

    out = io.BytesIO()
    w = MetadataFormat().open_writer(out)
    w.write_columns(list(offsets), list(timestamps), None if types is None else list(types))
    w.close()
    return out.getvalue()


def rewrite_file(fmt: Any, view: RecordView, data: bytes, keep: Sequence[int], offsets: Sequence[int],
                 topic: str = "", partition: int = 0) -> tuple[bytes, dict[str, bytes]]:
    """``(bytes, side_files)`` of file ``data`` (format ``fmt``, a built :class:`Format`, holding ``view``) with
    only the records at positions ``keep`` (ascending); ``offsets``: every record's Kafka offset (Block-GZIP's
    index names them). ``side_files``: the Block-GZIP index (suffix ``.index.json``), else empty."""
    name = fmt.name
    if view is RecordView.METADATA:
        return rewrite_metadata(data, keep), {}
    if name == "avro":
        return _avro(data, keep), {}
    if name == "parquet":
        return _parquet(data, keep), {}
    out = io.BytesIO()
    w = fmt.open_writer(out, view)
    if name == "json":
        lines = list(fmt.read_lines(io.BytesIO(data)))
        w.write_payloads([lines[i].decode("utf-8") for i in keep])
    elif name == "bytearray":
        import pyarrow as pa

        values = list(fmt.read(io.BytesIO(data), view))
        w.write_payloads(pa.array([bytes(values[i]) for i in keep], pa.binary()))
    elif name == "blockgzip":
        from lakesink.objects.records import SinkRecord

        lines = list(fmt.read(io.BytesIO(data), view))
        w.write_many([SinkRecord(topic, partition, int(offsets[i]), None, None, lines[i]) for i in keep])
    else:
        raise InvalidArgumentError(f"format {name!r}: lakesink erase cannot rewrite its objects (it rewrites "
                                   f"{', '.join(REWRITABLE)})")
    w.close()
    return out.getvalue(), w.side_files()


def _avro(data: bytes, keep: Sequence[int]) -> bytes:
    import json

    import fastavro

    reader = fastavro.reader(io.BytesIO(data))
    schema = fastavro.parse_schema(json.loads(reader.metadata["avro.schema"]))
    codec = reader.metadata.get("avro.codec", "null")
    extra = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    records = list(reader)
    out = io.BytesIO()
    fastavro.writer(out, schema, [records[i] for i in keep], codec=codec, metadata=extra or None)
    return out.getvalue()


def _parquet(data: bytes, keep: Sequence[int]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(io.BytesIO(data))
    codec = "snappy"
    if pf.metadata.num_row_groups and pf.metadata.num_columns:
        codec = pf.metadata.row_group(0).column(0).compression.lower()
    table = pf.read()
    kept = table.take(pa.array(list(keep), pa.int64()))
    out = io.BytesIO()
    pq.write_table(kept, out, compression="none" if codec == "uncompressed" else codec)
    return out.getvalue()
