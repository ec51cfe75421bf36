"""Output formats with Confluent S3-sink file layouts: a registry keyed by name.

>>> fmt = create("json", compression="gzip")
>>> fmt.extension
'.json.gz'
"""
from __future__ import annotations

from lakesink import plugins
from lakesink.objects.formats.avro import AvroFormat
from lakesink.objects.formats.base import CountingSink, Format, FormatWriter, RecordView
from lakesink.objects.formats.blockgzip import BlockGzipFormat
from lakesink.objects.formats.bytearray import ByteArrayFormat
from lakesink.objects.formats.json import JsonFormat
from lakesink.objects.formats.parquet import ParquetFormat
from lakesink.errors import InvalidArgumentError

#: The registered format names (see :mod:`lakesink.plugins`, which also holds the one alias table:
#: Confluent ``format.class`` names, ``lakesink.formats.BlockGzipFormat``, ``avroformat``, ...).
FORMAT_NAMES: tuple[str, ...] = plugins.names("format")


def create(name: str, **options) -> Format:
    """Build a configured :class:`Format` by name (or Confluent class name).

    Raises ValueError for an unknown name, an unknown option or a bad option value.
    """
    cls = plugins.load("format", name)  # ValueError: unknown format ...
    key = plugins.canonical("format", name)
    try:
        return cls(**options)
    except TypeError as e:  # unexpected keyword
        raise InvalidArgumentError(f"format {key!r}: {e}") from None


__all__ = ["create", "FORMAT_NAMES", "Format", "FormatWriter", "RecordView", "CountingSink",
           "AvroFormat", "JsonFormat", "ByteArrayFormat", "ParquetFormat", "BlockGzipFormat"]
