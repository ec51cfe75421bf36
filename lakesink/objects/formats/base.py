"""The format interface shared by every writer/reader pair, and the pieces they all use.

A :class:`Format` is a configured, stateless factory (one per sink config); a :class:`FormatWriter`
encodes the records of ONE object and streams the bytes into ``out`` as it goes, holding at most
a bounded buffer (an Avro block, a Parquet row group, ``buffer_size`` bytes of text).
"""
from __future__ import annotations

import base64
import io
from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, BinaryIO, Callable, Iterator, NamedTuple, Sequence

from lakesink.errors import EncodeError, InvalidArgumentError
from lakesink.objects.records import SinkRecord
from lakesink.objects.formats.jsontext import b64, compact_json  # noqa: F401 - b64 re-exported for the formats


#: Bytes a writer collects before pushing them to ``out``: large enough that a multipart stream
#: sees few, big writes; small enough to be irrelevant for memory.
DEFAULT_BUFFER_SIZE = 1 << 20


class RecordView(str, Enum):
    """Which part of the record an object holds (spec §5: ``.keys`` / ``.headers`` objects; METADATA is
    lakesink's ``.metadata.avro`` side file, :mod:`lakesink.objects.formats.metadata`)."""

    VALUE = "value"
    KEYS = "keys"
    HEADERS = "headers"
    METADATA = "metadata"


class Format(ABC):
    """A configured output format: names its extension, opens writers, reads objects back.

    Per-format behaviour the rest of lakesink needs lives here, not in ``if name == ...`` chains: the
    constructor options a sink config gives (:meth:`options_from`), the compression the manifest records
    (:meth:`compression_from`), whether objects carry an index side file (:attr:`has_index`), the record bytes
    a restore sends again (:meth:`record_bytes`, :meth:`key_bytes`, :meth:`header_columns`; for an object that holds
    its records' keys, headers, offsets and timestamps itself, :meth:`record_parts`) and which columnar write path a
    decoder's values can take (:meth:`columnar_kind`)."""

    name: str
    extension: str
    #: what :meth:`record_bytes` gives for a value (for docs and CLIs)
    record_bytes_rule: str = ""
    #: the :meth:`options_from` option that names the file compression (the manifest's ``compression``)
    compression_option: str = "compression"
    #: whether objects carry a ``.index.json`` side file (Block-GZIP)
    has_index: bool = False
    #: whether a file has one writer schema (Avro, Parquet): records with another schema start a new file
    schema_per_file: bool = False
    #: whether a keys file of this format holds bytes keys as base64 text (JsonConverter)
    keys_as_base64: bool = False
    #: whether reading an object needs the compression it was written with (its manifest row's ``compression``:
    #: a job may change it between runs); Avro and Parquet name their codec inside the file
    reads_object_compression: bool = False
    #: whether ``s3.compression.type`` (gzip) applies to files of this format (Confluent: JSON and ByteArray)
    takes_s3_compression: bool = False
    #: whether a value object of this format holds its records' other parts (key, headers, offset, timestamp) next to
    #: each value, as Aiven's jsonl lines do: readers take them from :meth:`record_parts`, not from side files
    holds_record_parts: bool = False

    @classmethod
    def options_from(cls, settings: Any) -> dict[str, Any]:
        """Constructor options from sink settings (a ``SinkConfig``, read by attribute: ``avro_codec``,
        ``s3_compression_type``, ...). Formats with options override it."""
        return {}

    @classmethod
    def compression_from(cls, settings: Any) -> str | None:
        """The compression an object written with ``settings`` is recorded with (the manifest's column)."""
        return cls.options_from(settings).get(cls.compression_option)

    def record_bytes(self, data: bytes, *, schema_id: int | None = None, where: str = "",
                     value_decoder: str | None = None) -> Any:
        """The values of one object of this format (``data``) as the bytes a producer sends again: a list of
        bytes or a pyarrow binary array. ``schema_id``: the manifest row's (Confluent wire-format framing);
        ``where``: the object, for errors; ``value_decoder``: the sink's value decoder."""
        raise InvalidArgumentError(f"{where}: no record-bytes rule for format {self.name!r}")

    def key_bytes(self, data: bytes, key_decoder: str) -> Any:
        """The keys of a ``.keys`` object of this format as record bytes (a list, or a pyarrow binary array):
        bytes as stored, strings as UTF-8, with ``key_decoder="json"`` (or keys that are neither) the key's
        compact JSON text."""
        base64_strings = self.keys_as_base64 and key_decoder == "bytes"
        return [key_bytes(k, key_decoder, base64_strings) for k in self.read(io.BytesIO(data), RecordView.KEYS)]

    def record_parts(self, data: bytes) -> "RecordParts":
        """The records of one value object of a format that :attr:`holds_record_parts`, every part it holds, read
        once (``data``: the object's bytes, decompressed by the format)."""
        raise InvalidArgumentError(f"format {self.name!r} keeps its records' keys and headers in side files")

    def header_columns(self, data: bytes) -> tuple[Any, Any, Any] | None:
        """The headers of a ``.headers`` object read a column at a time (offsets, binary keys, binary values),
        or None when this format reads them record by record only."""
        return None

    @classmethod
    def writer_schema(cls, read_range: Callable[[int, int], bytes], size: Callable[[], int]) -> Any | None:
        """The writer schema a stored object of this format carries, reading only the bytes that hold it
        (``read_range(start, end)``, both inclusive; ``size()``: the object's size); None for formats that carry
        none (JSON, bytes). Raises :class:`~lakesink.errors.ArchiveReadError` for an object that is not readable."""
        return None

    def columnar_kind(self, decoder: Any) -> str | None:
        """The columnar write path (``lakesink.executor.columnar``) values from ``decoder`` can take into this
        format (``bytes``, ``avro``, ``avro_wire``, ``parquet``, ``json``), or None for the record path."""
        return None

    def columnar_keys(self, key_decoder: str) -> bool:
        """Whether a keys file of this format takes keys from ``key_decoder`` a column at a time
        (:meth:`key_payloads`, ``lakesink.executor.columnar``)."""
        return False

    def columnar_headers(self) -> bool:
        """Whether a headers file of this format takes headers a column at a time (:meth:`header_payloads`)."""
        return False

    def key_payloads(self, keys: Any, key_decoder: str) -> tuple[Any, Any] | None:
        """(payloads, schema) the keys file's ``FormatWriter.write_payloads`` takes for the Arrow column ``keys``
        (binary, no nulls) of keys from ``key_decoder``, writing exactly what the record path writes for them; None
        when the column needs the record path (a key the decoder rejects)."""
        return None

    def header_payloads(self, headers: Any) -> tuple[Any, Any] | None:
        """(payloads, schema) the headers file's ``FormatWriter.write_payloads`` takes for the Arrow column
        ``headers`` (list<struct<key: string, value: binary>>); None when the column needs the record path (a
        record without headers, a value that is not UTF-8: :func:`~lakesink.objects.formats.side_columns.headers_parts`)."""
        return None

    @abstractmethod
    def open_writer(self, out: BinaryIO, view: RecordView = RecordView.VALUE) -> "FormatWriter":
        """Start one object written to ``out`` (only ``write``/``flush`` are used; never closed)."""

    def open_object_writer(self, out: BinaryIO, view: RecordView, key: str) -> "FormatWriter":
        """Start the object stored at ``key``. Formats whose files would otherwise carry random bytes (Avro's
        sync marker) derive them from the key here, so a replayed batch writes byte-identical objects."""
        return self.open_writer(out, view)

    @abstractmethod
    def read(self, stream: BinaryIO, view: RecordView = RecordView.VALUE) -> Iterator[Any]:
        """Yield the values (keys, header lists) of an object in file order."""

    @classmethod
    def supports_view(cls, view: RecordView) -> bool:
        """Whether this format can hold ``view`` (Confluent: no ByteArray headers; the record-metadata
        side file has a format of its own)."""
        return view is not RecordView.METADATA

    def _check_view(self, view: RecordView) -> RecordView:
        view = RecordView(view)
        if not self.supports_view(view):
            raise InvalidArgumentError(f"format {self.name!r} cannot write the {view.value} view")
        return view

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.extension}>"


class RecordParts(NamedTuple):
    """The records of an object that holds them whole (:meth:`Format.record_parts`), one list entry per record in
    file order. ``values``, ``keys``: record bytes (None: null); ``headers``: (key, value bytes or None) pairs;
    ``offsets``: Kafka offsets; ``timestamps``: epoch ms (None: none recorded) and ``timestamp_types`` their Kafka
    type ids (-1 NoTimestampType, 0 CreateTime, 1 LogAppendTime). A part the object does not hold is None (keys: null
    keys, headers: none, offsets: counted from the manifest row's first offset, timestamps: unknown)."""

    values: list
    keys: list | None = None
    headers: list | None = None
    offsets: list | None = None
    timestamps: list | None = None
    timestamp_types: list | None = None


class RangeFile(io.RawIOBase):
    """A seekable read-only file over one stored object of ``size`` bytes: every read is one
    ``read_range(start, end)`` (pyarrow reads a Parquet footer through it: the last 64 KiB, then the rest of a
    longer footer)."""

    def __init__(self, read_range: Callable[[int, int], bytes], size: int):
        self.read_range, self.size, self.pos = read_range, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        data = self.read_range(self.pos, end - 1)
        self.pos += len(data)
        return data

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)


class FormatWriter(ABC):
    """Encodes the records of one object, streaming into ``out``."""

    record_count: int = 0

    def __init__(self, out: BinaryIO, view: RecordView):
        self._sink = CountingSink(out)
        self.view = view
        self.record_count = 0
        self._closed = False

    @property
    def bytes_written(self) -> int:
        """Bytes pushed to ``out`` so far (after compression)."""
        return self._sink.bytes_written

    @abstractmethod
    def write(self, record: SinkRecord) -> None:
        """Append one record; raises :class:`EncodeError` for a value the format cannot hold."""

    def write_many(self, records: Sequence[SinkRecord]) -> None:
        """Append ``records`` in order: exactly what calling :meth:`write` for each would do (same
        bytes, ``record_count``, chunk / block / row-group boundaries). On an :class:`EncodeError`
        the records before the bad one are written, the bad one and those after it are not, and
        the writer stays usable, as with :meth:`write`. (One exception, the same for both calls:
        a Parquet value that passes Avro validation but that Arrow cannot convert is found when
        its row group is converted, by the call that fills the group; see ParquetFormatWriter.)

        This default loops over :meth:`write`; formats override it where a run of records can be
        encoded with less per-record work (the sink hands each file runs of consecutive records).
        """
        write = self.write
        for record in records:
            write(record)

    def write_payloads(self, payloads: Any, schema: Any = None) -> None:
        """Columnar :meth:`write_many`: append records given as their encoded payloads (see the
        format's override: raw value bytes, bare Avro datums, JSON lines), producing exactly the
        bytes :meth:`write_many` writes for the same records. The caller guarantees they are valid
        (the sink's columnar path checks them first). Only some formats have it."""
        raise NotImplementedError(f"{type(self).__name__} has no columnar write")

    @abstractmethod
    def _finish(self) -> None:
        """Write trailers / footers into ``self._sink``."""

    def close(self) -> None:
        """Finish the object (trailers, footers), flush ``out``; ``out`` stays open. Idempotent."""
        if self._closed:
            return
        self._finish()
        self._closed = True
        self._sink.flush()

    def side_files(self) -> dict[str, bytes]:
        """Extra objects to upload next to this one, keyed by suffix (blockgzip: ``.index.json``)."""
        return {}

    def __enter__(self) -> "FormatWriter":
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()


class CountingSink:
    """Write-only file facade over ``out`` that counts bytes and coalesces small writes.

    Libraries (fastavro, pyarrow) write headers and block framing in tiny pieces; collecting them up
    to ``buffer_size`` keeps a multipart-upload stream from seeing thousands of 4-byte writes. It
    also answers ``tell()`` (pyarrow needs it) without requiring ``out`` to be seekable.
    """

    closed = False

    def __init__(self, out: BinaryIO, buffer_size: int = DEFAULT_BUFFER_SIZE):
        self._out = out
        self._parts: list[bytes] = []
        self._pending = 0
        self._limit = buffer_size
        self.bytes_written = 0  # pushed to out
        self.position = 0  # accepted from the encoder (pushed + pending)

    def write(self, data) -> int:
        n = len(data)
        if not n:
            return 0
        self.position += n
        if n >= self._limit and not self._parts:
            self._push(data)
            return n
        self._parts.append(bytes(data))
        self._pending += n
        if self._pending >= self._limit:
            self.drain()
        return n

    def drain(self) -> None:
        """Push whatever is pending to ``out`` (without flushing ``out``)."""
        if self._parts:
            data = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
            self._parts.clear()
            self._pending = 0
            self._push(data)

    def _push(self, data) -> None:
        self._out.write(data)
        self.bytes_written += len(data)

    def flush(self) -> None:
        self.drain()
        flush = getattr(self._out, "flush", None)
        if flush is not None:
            flush()

    def tell(self) -> int:
        return self.position

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def close(self) -> None:  # pyarrow may call it; ``out`` belongs to the caller
        self.flush()


# ---------------------------------------------------------------------------------------------
# Record views shared by the formats


def encode_error(record: SinkRecord, reason: str) -> EncodeError:
    """An EncodeError naming ``record``."""
    return EncodeError(record.topic, record.partition, record.offset, reason)


def header_pairs(record: SinkRecord) -> list[tuple[str, str | None]]:
    """The record's headers as (key, string value) pairs, like Connect's ``Values.convertToString``
    over header bytes: UTF-8 with U+FFFD for invalid sequences (what Java's ``new String`` does).

    Confluent rejects records without headers when headers are stored (spec §5).
    """
    if not record.headers:
        raise encode_error(record, "record has no headers (store.kafka.headers needs >= 1 header)")
    return [
        (k, None if v is None else (v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)))
        for k, v in record.headers
    ]


def record_key(record: SinkRecord) -> Any:
    """The record key; Confluent rejects null keys when keys are stored (spec §5)."""
    if record.key is None:
        raise encode_error(record, "record key is null (store.kafka.keys needs non-null keys)")
    return record.key


def key_bytes(v: Any, key_decoder: str, base64_strings: bool = False) -> bytes | None:
    """One stored key as record bytes (see :meth:`Format.key_bytes`); ``base64_strings``: string keys are
    base64 text of bytes keys (a JSON keys file read for the bytes decoder)."""
    if v is None:
        return None
    if key_decoder == "json":
        return compact_json(v).encode("utf-8")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        return base64.b64decode(v) if base64_strings else v.encode("utf-8")
    return compact_json(v).encode("utf-8")


def binary_run(values: Any) -> tuple[memoryview, Any]:
    """The elements of a pyarrow binary / large_binary array without nulls as ONE contiguous
    buffer (zero-copy) and each element's end position in it (a numpy int64 array)."""
    import numpy as np
    import pyarrow as pa

    dtype = np.int64 if pa.types.is_large_binary(values.type) or pa.types.is_large_string(values.type) else np.int32
    _validity, offsets_buf, data_buf = values.buffers()[:3]
    offs = np.frombuffer(offsets_buf, dtype=dtype, count=len(values) + 1,
                         offset=values.offset * np.dtype(dtype).itemsize)
    start, end = int(offs[0]), int(offs[-1])
    data = memoryview(data_buf)[start:end] if data_buf is not None else memoryview(b"")
    return data, (offs[1:] - start).astype(np.int64)
