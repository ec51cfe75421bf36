"""Output formats with Confluent S3-sink file layouts: a registry keyed by name.

>>> fmt = create("json", compression="gzip")
>>> fmt.extension
'.json.gz'
"""
from __future__ import annotations

from lakesink.objects.formats.avro import AvroFormat
from lakesink.objects.formats.base import CountingSink, Format, FormatWriter, RecordView
from lakesink.objects.formats.blockgzip import BlockGzipFormat
from lakesink.objects.formats.bytearray import ByteArrayFormat
from lakesink.objects.formats.json import JsonFormat
from lakesink.objects.formats.parquet import ParquetFormat

_FORMATS: dict[str, type[Format]] = {
    "avro": AvroFormat,
    "json": JsonFormat,
    "bytearray": ByteArrayFormat,
    "parquet": ParquetFormat,
    "blockgzip": BlockGzipFormat,
}
FORMAT_NAMES: tuple[str, ...] = tuple(_FORMATS)

#: Confluent ``format.class`` names (and DeviantArt's) accepted as aliases.
ALIASES = {
    "io.confluent.connect.s3.format.avro.AvroFormat": "avro",
    "io.confluent.connect.s3.format.json.JsonFormat": "json",
    "io.confluent.connect.s3.format.bytearray.ByteArrayFormat": "bytearray",
    "io.confluent.connect.s3.format.parquet.ParquetFormat": "parquet",
    "block-gzip": "blockgzip",
    "block_gzip": "blockgzip",
}


def create(name: str, **options) -> Format:
    """Build a configured :class:`Format` by name (or Confluent class name).

    Raises ValueError for an unknown name, an unknown option or a bad option value.
    """
    key = ALIASES.get(name, name.lower() if isinstance(name, str) else name)
    try:
        cls = _FORMATS[key]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; expected one of {list(FORMAT_NAMES)}") from None
    try:
        return cls(**options)
    except TypeError as e:  # unexpected keyword
        raise ValueError(f"format {key!r}: {e}") from None


__all__ = ["create", "FORMAT_NAMES", "Format", "FormatWriter", "RecordView", "CountingSink",
           "AvroFormat", "JsonFormat", "ByteArrayFormat", "ParquetFormat", "BlockGzipFormat"]
