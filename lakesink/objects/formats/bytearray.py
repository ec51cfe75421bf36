"""Raw bytes + separator (Confluent ``ByteArrayFormat``; spec §2).

Each record: its bytes (value must be bytes — use the ``bytes`` decoder) followed by ``separator``
(default ``b"\\n"``) after EVERY record, no escaping: a value containing the separator cannot be
split back apart (as with Confluent). KEYS view writes the key bytes; the HEADERS view is not
allowed (Confluent rejects ByteArrayFormat for headers).
"""
from __future__ import annotations

import gzip
import io
from bisect import bisect_left
from itertools import accumulate
from operator import add
from typing import Any, BinaryIO, Iterator, Sequence

from lakesink.objects.records import SinkRecord
from lakesink.objects.formats.base import DEFAULT_BUFFER_SIZE, Format, FormatWriter, RecordView, binary_run, encode_error, record_key
from lakesink.objects.formats.compression import CompressingSink, parse_compression
from lakesink.errors import InvalidArgumentError

#: value types write_many joins directly (subclasses and anything else go through write())
_BYTES_TYPES = {bytes, bytearray, memoryview}


class ByteArrayFormat(Format):
    """``bytearray`` format: options ``separator`` (bytes or str, default ``"\\n"``), ``extension``
    (default ``.bin``), ``compression`` (none|gzip), ``compression_level``, ``buffer_size``."""

    name = "bytearray"
    reads_object_compression = True
    takes_s3_compression = True
    record_bytes_rule = "the value bytes, exactly"

    @classmethod
    def options_from(cls, settings: Any) -> dict[str, Any]:
        return {"separator": settings.bytearray_separator, "extension": settings.bytearray_extension,
                "compression": settings.s3_compression_type, "compression_level": settings.s3_compression_level}

    def record_bytes(self, data: bytes, *, schema_id: int | None = None, where: str = "",
                     value_decoder: str | None = None) -> list[bytes]:
        return [bytes(v) for v in self.read(io.BytesIO(data))]

    def columnar_kind(self, decoder: Any) -> str | None:
        return "bytes" if decoder.name == "bytes" else None

    def columnar_keys(self, key_decoder: str) -> bool:
        return key_decoder == "bytes"  # the key bytes themselves (the record path needs bytes keys)

    def key_payloads(self, keys: Any, key_decoder: str) -> tuple[Any, Any] | None:
        return keys, None

    def __init__(self, separator: bytes | str = b"\n", extension: str = ".bin", compression: str | None = "none",
                 compression_level: int = -1, buffer_size: int = DEFAULT_BUFFER_SIZE):
        self.separator = separator.encode("utf-8") if isinstance(separator, str) else bytes(separator)
        if not extension:
            raise InvalidArgumentError("bytearray extension must not be empty")
        self.compression = parse_compression(compression)
        self.compression_level = int(compression_level)
        if not -1 <= self.compression_level <= 9:
            raise InvalidArgumentError(f"compression_level {compression_level} is outside -1..9")
        self.buffer_size = int(buffer_size)
        self.base_extension = extension
        self.extension = extension + (".gz" if self.compression == "gzip" else "")

    @classmethod
    def supports_view(cls, view: RecordView) -> bool:
        return view in (RecordView.VALUE, RecordView.KEYS)

    def open_writer(self, out: BinaryIO, view: RecordView = RecordView.VALUE) -> "ByteArrayWriter":
        return ByteArrayWriter(self, out, self._check_view(view))

    def read(self, stream: BinaryIO, view: RecordView = RecordView.VALUE) -> Iterator[bytes]:
        """Yield the byte values, split on the separator (streaming, 1 MiB reads)."""
        self._check_view(view)
        src = gzip.GzipFile(fileobj=stream, mode="rb") if self.compression == "gzip" else stream
        sep = self.separator
        if not sep:  # nothing to split on: the object is one value
            data = src.read()
            if data:
                yield data
            return
        rest = b""
        while True:
            chunk = src.read(1 << 20)
            if not chunk:
                break
            parts = (rest + chunk).split(sep)
            rest = parts.pop()
            yield from parts
        if rest:  # no trailing separator: not written by us, still return it
            yield rest


class ByteArrayWriter(FormatWriter):
    def __init__(self, fmt: ByteArrayFormat, out: BinaryIO, view: RecordView):
        super().__init__(out, view)
        self._fmt = fmt
        self._parts: list[bytes] = []
        self._pending = 0
        self._gz = CompressingSink(self._sink, "gzip", fmt.compression_level) if fmt.compression == "gzip" else None

    def write(self, record: SinkRecord) -> None:
        value = record.value if self.view is RecordView.VALUE else record_key(record)
        if not isinstance(value, (bytes, bytearray, memoryview)):
            what = "null value (tombstone)" if value is None else f"a {type(value).__name__}"
            raise encode_error(record, f"ByteArray format needs bytes, got {what} (use the bytes decoder)")
        parts = self._parts
        parts.append(value)
        parts.append(self._fmt.separator)
        self._pending += len(value) + len(self._fmt.separator)
        self.record_count += 1
        if self._pending >= self._fmt.buffer_size:
            self._push()

    def write_many(self, records: Sequence[SinkRecord]) -> None:
        """:meth:`write` for each record: runs of values are joined with the separator in one call,
        cut where :meth:`write` would push, so the bytes and ``record_count`` are exactly those of
        :meth:`write`. A batch holding a value that is not bytes goes through :meth:`write`."""
        if self.view is RecordView.VALUE:
            values = [r.value for r in records]
        else:
            values = [r.key for r in records]
        if not set(map(type, values)) <= _BYTES_TYPES:
            super().write_many(records)
            return
        sep = self._fmt.separator
        ends = list(accumulate(map(len, values), initial=0))
        if sep:
            ends = list(map(add, ends, range(0, len(sep) * len(ends), len(sep))))
        buffer, parts, m, k = self._fmt.buffer_size, self._parts, len(values), 0
        while k < m:
            push = bisect_left(ends, ends[k] + buffer - self._pending, k + 1)  # write() pushes after value push-1
            end = min(push, m)
            parts.append(sep.join(values[k:end]))
            parts.append(sep)
            self._pending += ends[end] - ends[k]
            self.record_count += end - k
            if end == push:
                self._push()
            k = end

    def write_payloads(self, payloads, schema=None) -> None:
        """Columnar :meth:`write_many`: ``payloads`` is a pyarrow binary array of the values
        (keys for the KEYS view), no nulls; each is written followed by the separator, pushed at
        the record boundaries where :meth:`write` pushes (gzip output depends on those chunks)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        sep = self._fmt.separator
        if sep:  # value + separator per element, in one contiguous buffer
            payloads = pc.binary_join_element_wise(payloads, pa.scalar(b"", payloads.type),
                                                   pa.scalar(sep, payloads.type))
        data, ends = binary_run(payloads)
        n, i, pos, buffer = len(ends), 0, 0, self._fmt.buffer_size
        while i < n:
            j = int(np.searchsorted(ends, pos + buffer - self._pending, side="left"))  # write() pushes after j
            if j >= n:
                self._parts.append(bytes(data[pos:]))  # the tail outlives the caller's buffer
                self._pending += int(ends[-1]) - pos
                self.record_count += n - i
                return
            end = int(ends[j])
            self._parts.append(data[pos:end])
            self._pending += end - pos
            self.record_count += j + 1 - i
            self._push()
            pos, i = end, j + 1

    def _push(self) -> None:
        if self._parts:
            data = b"".join(self._parts)
            self._parts.clear()
            self._pending = 0
            (self._gz or self._sink).write(data)

    def _finish(self) -> None:
        self._push()
        if self._gz is not None:
            self._gz.finish()
