"""Read-only formats of objects other S3 archivers wrote, adopted by ``lakesink manifest import`` (their manifest
rows name these formats; lakesink never writes them). Registered under the ``import_format`` kind of
:mod:`lakesink.plugins`, apart from the writable formats a config's ``format.class`` may name.

* ``aiven_jsonl``: Aiven's S3 sink with ``format.output.type=jsonl``: one JSON object per line with the fields of
  ``format.output.fields`` (``value``, ``key``, ``offset``, ``timestamp``, ``headers``). A value is the record's
  bytes again as its converter gave it: a string as UTF-8, any other JSON value as its compact JSON text, null as
  null (a tombstone).
* ``aiven_csv``: Aiven's default ``csv`` with ``format.output.fields=value`` and the default base64 value encoding:
  one base64 value per line, an empty line for null.
* ``lines``: newline-delimited values (Zooz's kafka-s3-connector copying records "as is").

The file compression (Aiven: gzip ``.gz``, zstd ``.zst``; Zooz: gzip ``.gz``) is the manifest row's
``compression`` (:attr:`Format.reads_object_compression`).
"""
from __future__ import annotations

import base64
import binascii
import gzip
import io
import json
from typing import Any, BinaryIO, Iterator

from lakesink.errors import InvalidArgumentError
from lakesink.objects.formats.base import Format, FormatWriter, RecordView

__all__ = ["AivenJsonlFormat", "AivenCsvFormat", "LinesFormat", "COMPRESSIONS", "decompress"]

#: the file compressions these readers take (snappy is not: Aiven's snappy files use snappy-java's own stream)
COMPRESSIONS = ("none", "gzip", "zstd")


def decompress(data: bytes, compression: str) -> bytes:
    if compression == "gzip":
        return gzip.decompress(data)
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
    return data


class _ReadOnly(Format):
    reads_object_compression = True

    def __init__(self, compression: str | None = "none"):
        self.compression = (compression or "none").lower()
        if self.compression not in COMPRESSIONS:
            raise InvalidArgumentError(f"format {self.name!r}: compression {compression!r} is not one of "
                                       f"{', '.join(COMPRESSIONS)}")

    @classmethod
    def supports_view(cls, view: RecordView) -> bool:
        return view is RecordView.VALUE

    def open_writer(self, out: BinaryIO, view: RecordView = RecordView.VALUE) -> FormatWriter:
        raise InvalidArgumentError(f"format {self.name!r} is read-only: objects another connector wrote, adopted by "
                                   f"`lakesink manifest import`")

    def _lines(self, stream: BinaryIO) -> list[bytes]:
        text = decompress(stream.read(), self.compression)
        lines = text.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        return [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]

    def read(self, stream: BinaryIO, view: RecordView = RecordView.VALUE) -> Iterator[Any]:
        self._check_view(view)
        return iter(self.record_bytes(stream.read()))


class AivenJsonlFormat(_ReadOnly):
    name = "aiven_jsonl"
    extension = ".jsonl"
    record_bytes_rule = "the line's value field: a string as UTF-8, other JSON as compact JSON text"

    def record_bytes(self, data: bytes, *, schema_id: int | None = None, where: str = "",
                     value_decoder: str | None = None) -> list[bytes | None]:
        out: list[bytes | None] = []
        for i, line in enumerate(self._lines(io.BytesIO(data))):
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError(f"line {i + 1} is not a JSON object (Aiven's jsonl writes one per record)")
            v = obj.get("value")
            out.append(None if v is None else v.encode("utf-8") if isinstance(v, str)
                       else json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        return out


class AivenCsvFormat(_ReadOnly):
    name = "aiven_csv"
    extension = ".csv"
    record_bytes_rule = "the base64-decoded value of the line (an empty line: null)"

    def record_bytes(self, data: bytes, *, schema_id: int | None = None, where: str = "",
                     value_decoder: str | None = None) -> list[bytes | None]:
        out: list[bytes | None] = []
        for i, line in enumerate(self._lines(io.BytesIO(data))):
            if b"," in line:
                raise ValueError(f"line {i + 1} has more than one field (aiven_csv reads format.output.fields=value)")
            try:
                out.append(base64.b64decode(line, validate=True) if line else None)
            except binascii.Error as e:
                raise ValueError(f"line {i + 1} is not base64: {e}") from None
        return out


class LinesFormat(_ReadOnly):
    name = "lines"
    extension = ""
    record_bytes_rule = "the line's bytes"

    def record_bytes(self, data: bytes, *, schema_id: int | None = None, where: str = "",
                     value_decoder: str | None = None) -> list[bytes]:
        return self._lines(io.BytesIO(data))
