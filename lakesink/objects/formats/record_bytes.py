"""Record bytes of Avro and Parquet objects: the bytes a producer sends again, rebuilt from an archived file.

Used by :meth:`AvroFormat.record_bytes <lakesink.objects.formats.avro.AvroFormat.record_bytes>` and
:meth:`ParquetFormat.record_bytes <lakesink.objects.formats.parquet.ParquetFormat.record_bytes>` (the read side
of the archive: :mod:`lakesink.executor.readback`). Avro datums are sliced out of their blocks as stored, never
re-encoded; Parquet rows are re-encoded as Avro binary with the file's own Avro schema. Both are framed in
Confluent's wire format (magic 0 + 4-byte schema id) when the object's manifest row names a schema id.
"""
from __future__ import annotations

import io
import json
from typing import Any

from lakesink.errors import ArchiveReadError, CorruptObjectError
from lakesink.objects.formats.base import RecordView
from lakesink.objects.records import SOURCE_ATTR
from lakesink.schemas.avro import raw_parsed_schema, value_converter


def wire_prefix(schema_id: int | None) -> bytes:
    """Confluent's wire-format prefix for ``schema_id`` (empty for None)."""
    return b"" if schema_id is None else b"\x00" + int(schema_id).to_bytes(4, "big")


def value_prefix(schema_id: int | None, writer_schema: Any, where: str) -> bytes:
    """The wire prefix of an object's values (none without a schema id). Records whose Avro schema lakesink
    mapped from Protobuf cannot be given back as the bytes Kafka held: refused, naming the object ``where``."""
    if isinstance(writer_schema, dict) and SOURCE_ATTR in writer_schema:
        raise ArchiveReadError(f"{where}: its records came from {writer_schema[SOURCE_ATTR]} values, "
                               f"archived as Avro; their original bytes cannot be rebuilt (read the object "
                               f"with Spark's reader for its format, or archive such topics as JSON)")
    return wire_prefix(schema_id)


def avro_datums(blocks: Any, schema: Any, prefix: bytes) -> list[bytes]:
    """Each datum of an Avro file's ``blocks`` (a ``fastavro.block_reader``) as stored (sliced, not
    re-encoded), after ``prefix``."""
    import fastavro

    reader = fastavro.schemaless_reader
    out: list[bytes] = []
    for block in blocks:
        buf = block.bytes_
        raw = buf.getbuffer()
        for _ in range(block.num_records):
            start = buf.tell()
            reader(buf, schema, None)
            out.append(prefix + bytes(raw[start:buf.tell()]))
        del raw
    return out


def avro_values(data: bytes, schema_id: int | None, where: str) -> list[bytes]:
    """The values of an Avro container file as record bytes: the datums as stored, framed when the row has a
    schema id; a schemaless file (writer schema ``bytes``/``string``) gives each value's own bytes."""
    import fastavro

    blocks = fastavro.block_reader(io.BytesIO(data))
    writer_schema = blocks.writer_schema
    schema = raw_parsed_schema(writer_schema)
    if writer_schema in ("bytes", "string"):  # schemaless values (bytes / string decoder): their own bytes
        reader = fastavro.schemaless_reader
        out: list[bytes] = []
        for block in blocks:
            buf = block.bytes_
            for _ in range(block.num_records):
                v = reader(buf, schema, None)
                out.append(v.encode("utf-8") if isinstance(v, str) else bytes(v))
        return out
    prefix = value_prefix(schema_id, json.loads(blocks.metadata.get("avro.schema", "null")), where)
    return avro_datums(blocks, schema, prefix)


def wire_framed_keys(data: bytes, schema_id_key: str) -> list[bytes] | None:
    """The keys of an Avro ``.keys`` file written from wire-format Avro keys (its metadata ``schema_id_key``
    names their schema's registry id): each stored datum framed in Confluent wire format again,
    byte-identical to the key as read from Kafka. None for a file without that id (older archives,
    Protobuf keys)."""
    import fastavro

    blocks = fastavro.block_reader(io.BytesIO(data))
    sid = blocks.metadata.get(schema_id_key)
    if sid is None:
        return None
    return avro_datums(blocks, raw_parsed_schema(blocks.writer_schema), wire_prefix(int(sid)))


def parquet_values(fmt: Any, data: bytes, schema_id: int | None, where: str) -> list[bytes]:
    """Each row of the Parquet object ``data`` (read with ``fmt``) re-encoded as Avro binary with the file's
    ``parquet.avro.schema`` footer, framed when the row has a schema id."""
    import fastavro
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(io.BytesIO(data)).schema_arrow.metadata or {}
    text = meta.get(b"parquet.avro.schema")
    if text is None:
        raise CorruptObjectError(f"{where}: the Parquet file has no parquet.avro.schema footer")
    avro = json.loads(text)
    parsed = fastavro.parse_schema(avro)  # with logical types: the reader returns Decimals for decimals
    fix = value_converter(avro, lambda node: None, maps_from_pairs=True)  # Arrow maps back to dicts
    write = fastavro.schemaless_writer
    prefix = value_prefix(schema_id, avro, where)
    out: list[bytes] = []
    buf = io.BytesIO()
    for row in fmt.read(io.BytesIO(data), RecordView.VALUE):
        if fix is not None:
            row = fix(row)
        buf.seek(0)
        buf.truncate()
        write(buf, parsed, row)
        out.append(prefix + buf.getvalue())
    return out
