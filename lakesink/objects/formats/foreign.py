"""Read-only formats of objects other S3 archivers wrote, adopted by ``lakesink manifest import`` (their manifest
rows name these formats; lakesink never writes them). Registered under the ``import_format`` kind of
:mod:`lakesink.plugins`, apart from the writable formats a config's ``format.class`` may name.

* ``aiven_jsonl``: Aiven's S3 sink with ``format.output.type=jsonl``: one JSON object per line (Jackson, ``\n``
  between lines) with the fields of ``format.output.fields``: ``value``, ``key``, ``offset``, ``timestamp``,
  ``headers``. Read from Aiven's writers (commons-for-apache-kafka-connect, ``output/jsonwriter``): the key and the
  value are what a ``JsonConverter`` with ``schemas.enable=false`` makes of the record's Connect key/value, so a
  string (``StringConverter``) is a JSON string, read back as its UTF-8 bytes; any other JSON (``JsonConverter``,
  ``AvroConverter`` structs) is read back as its compact JSON text; null (or no field) is null -- a null key stays
  null, a null value is a tombstone. (A ``ByteArrayConverter`` key or value is written by that converter as a
  base64 JSON string, and no line says which converter wrote it: it comes back as that base64 text.) ``headers``
  is an array of ``{"key": <string>, "value": <the header through JsonConverter>}``: a string value reads back as
  its UTF-8 bytes, null as null, other JSON as its compact text. ``offset`` is the record's Kafka offset (a
  number). ``timestamp`` is the record's timestamp in ``DateTimeFormatter.ISO_INSTANT`` form
  (``2020-01-01T00:00:01Z``, ``...:01.123Z``; epoch milliseconds as a number are read too), null when the record
  had none; Aiven does not write the timestamp type, so a timestamp is read as ``CreateTime`` (what a producer
  gives, Kafka's default ``message.timestamp.type``). :meth:`AivenJsonlFormat.record_parts` gives them all
  (:attr:`Format.holds_record_parts`), so ``read_archive`` shows and ``restore`` produces the keys, headers and
  timestamps the Aiven sink recorded.
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
import re
from typing import Any, BinaryIO, Iterator

from lakesink.errors import InvalidArgumentError
from lakesink.objects.formats.base import Format, FormatWriter, RecordParts, RecordView

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


def _text_bytes(v: Any) -> bytes | None:
    """A JSON node written by Connect's JsonConverter as record bytes: a string as UTF-8, other JSON as compact text."""
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode("utf-8")
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


_ISO_INSTANT = re.compile(r"(\d{4,})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z")


def iso_instant_ms(v: Any) -> int | None:
    """Epoch ms of ``DateTimeFormatter.ISO_INSTANT`` text (``2020-01-01T00:00:01.5Z``); a number is taken as epoch ms
    already; None stays None. ValueError for anything else."""
    import calendar

    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    m = _ISO_INSTANT.fullmatch(v) if isinstance(v, str) else None
    if m is None:
        raise ValueError(f"timestamp {v!r} is not an ISO-8601 instant (2020-01-01T00:00:01Z)")
    y, mo, d, h, mi, sec, frac = m.groups()
    secs = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(sec), 0, 0, 0))
    return secs * 1000 + int((frac or "0").ljust(9, "0")[:3])


class AivenJsonlFormat(_ReadOnly):
    name = "aiven_jsonl"
    extension = ".jsonl"
    record_bytes_rule = "the line's value field: a string as UTF-8, other JSON as compact JSON text"
    holds_record_parts = True

    def record_bytes(self, data: bytes, *, schema_id: int | None = None, where: str = "",
                     value_decoder: str | None = None) -> list[bytes | None]:
        out: list[bytes | None] = []
        for i, line in enumerate(self._lines(io.BytesIO(data))):
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError(f"line {i + 1} is not a JSON object (Aiven's jsonl writes one per record)")
            out.append(_text_bytes(obj.get("value")))
        return out

    def record_parts(self, data: bytes) -> RecordParts:
        values, keys, headers, offsets, timestamps = [], [], [], [], []
        seen: set[str] = set()
        for i, line in enumerate(self._lines(io.BytesIO(data))):
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError(f"line {i + 1} is not a JSON object (Aiven's jsonl writes one per record)")
            seen.update(obj)
            values.append(_text_bytes(obj.get("value")))
            keys.append(_text_bytes(obj.get("key")))
            hs = obj.get("headers")
            if hs is not None and not isinstance(hs, list):
                raise ValueError(f"line {i + 1}: headers is not an array of {{key, value}} objects")
            pairs = []
            for h in hs or ():
                if not isinstance(h, dict) or not isinstance(h.get("key"), str):
                    raise ValueError(f"line {i + 1}: header {h!r} is not a {{key: string, value}} object")
                pairs.append((h["key"], _text_bytes(h.get("value"))))
            headers.append(pairs)
            off = obj.get("offset")
            if "offset" in obj and (not isinstance(off, int) or isinstance(off, bool)):
                raise ValueError(f"line {i + 1}: offset {off!r} is not a number")
            offsets.append(off)
            try:
                timestamps.append(iso_instant_ms(obj.get("timestamp")))
            except ValueError as e:
                raise ValueError(f"line {i + 1}: {e}") from None
        has_offsets = "offset" in seen
        if has_offsets and any(o is None for o in offsets):
            raise ValueError("some lines have an offset field and others do not")
        return RecordParts(values, keys if "key" in seen else None, headers if "headers" in seen else None,
                           offsets if has_offsets else None, timestamps if "timestamp" in seen else None,
                           [-1 if t is None else 0 for t in timestamps] if "timestamp" in seen else None)


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
