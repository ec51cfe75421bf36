"""Output formats with Confluent S3-sink file layouts: a registry keyed by name.

>>> fmt = create("json", compression="gzip")
>>> fmt.extension
'.json.gz'
"""
from __future__ import annotations

from typing import Any, NamedTuple

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


def format_kind(name: str) -> str:
    """``format`` (a writable format) or ``import_format`` (a read-only format of another connector's objects,
    :mod:`lakesink.objects.formats.foreign`) for a format name a manifest row or config gives."""
    if plugins.canonical("format", name) is None and plugins.canonical("import_format", name) is not None:
        return "import_format"
    return "format"


def create(name: str, **options) -> Format:
    """Build a configured :class:`Format` by name (or Confluent class name).

    Raises ValueError for an unknown name, an unknown option or a bad option value.
    """
    kind = format_kind(name)
    cls = plugins.load(kind, name)  # ValueError: unknown format ...
    key = plugins.canonical(kind, name)
    try:
        return cls(**options)
    except TypeError as e:  # unexpected keyword
        raise InvalidArgumentError(f"format {key!r}: {e}") from None


class FormatSpec(NamedTuple):
    """A format as a plain value (name, constructor options) a task builds with :meth:`build`: what
    :func:`lakesink.wiring.format_spec` gives, so tasks receive settings, not the config."""

    name: str
    options: dict[str, Any]

    def build(self, compression: str | None = None) -> Format:
        """The format; ``compression`` (an object's manifest row) replaces the configured file compression of
        formats whose reader needs it (:attr:`Format.reads_object_compression`)."""
        opts = self.options
        if compression and plugins.load(format_kind(self.name), self.name).reads_object_compression:
            opts = {**opts, "compression": compression}
        return create(self.name, **opts)


__all__ = ["create", "format_kind", "FormatSpec", "FORMAT_NAMES", "Format", "FormatWriter", "RecordView", "CountingSink",
           "AvroFormat", "JsonFormat", "ByteArrayFormat", "ParquetFormat", "BlockGzipFormat"]
