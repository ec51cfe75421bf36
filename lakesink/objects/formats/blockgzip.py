"""DeviantArt Block-GZIP: text lines in independent gzip members plus an ``.index.json`` (spec §8).

Each record becomes one UTF-8 line: a str as is, bytes decoded as UTF-8 (invalid -> EncodeError),
other values as compact JSON like the json format (DeviantArt used Java ``toString()``); ``\\n`` is
appended unless the text already ends with one. A new member (chunk) starts when
``chunk_chars + len(line) > block_size``; records are never split. The slice
``data[byte_offset:byte_offset+byte_length]`` of a chunk decompresses on its own; the whole object
is ordinary multi-member gzip.

Deliberate differences from DeviantArt, all invisible to a plain gzip reader:
  * the threshold counts characters like DA (Java chars; a character outside the BMP counts 1
    here, 2 in Java); ``byte_length_uncompressed`` is the true UTF-8 byte count (DA reports its
    char counter: equal for ASCII);
  * an oversized FIRST record does not produce DA's empty 0-record member first (an index entry
    with no records and the same first offset as the next one only confuses offset lookups);
  * ``first_record_offset`` of every chunk is the real Kafka offset of its first record; DA
    computes ``previous + num_records``, which is the same unless offsets have gaps (compaction,
    transaction markers), where DA's value would be wrong.
``compression=bzip2`` uses independent bzip2 streams per chunk (extension ``.bz2``).
"""
from __future__ import annotations

import bz2
import gzip
import io
import json
from dataclasses import asdict, dataclass
from bisect import bisect_left, bisect_right
from itertools import accumulate, repeat
from operator import add
from typing import Any, BinaryIO, Iterable, Iterator, Sequence

from lakesink.objects.records import SinkRecord
from lakesink.objects.formats.base import DEFAULT_BUFFER_SIZE, Format, FormatWriter, RecordView, encode_error
from lakesink.objects.formats.compression import CompressingSink, parse_compression
from lakesink.objects.formats.json import compact_json
from lakesink.errors import InvalidArgumentError

DEFAULT_BLOCK_SIZE = 67108864  # DA's compressed_block_size default (raw bytes per chunk)
INDEX_SUFFIX = ".index.json"


@dataclass(frozen=True)
class ChunkIndexEntry:
    """One chunk of a Block-GZIP object (field names and order as in DA's index.json)."""

    first_record_offset: int
    num_records: int
    byte_offset: int
    byte_length: int
    byte_length_uncompressed: int


def parse_index(data: bytes | str) -> list[ChunkIndexEntry]:
    """Parse an ``.index.json`` body (any key order, as json-simple writes it)."""
    obj = json.loads(data)
    return [ChunkIndexEntry(**{k: int(c[k]) for k in ChunkIndexEntry.__dataclass_fields__}) for c in obj["chunks"]]


def find_chunk(index: list[ChunkIndexEntry], offset: int) -> ChunkIndexEntry | None:
    """The chunk whose offset range can hold Kafka ``offset`` (last chunk starting at or before it)."""
    found = None
    for c in index:
        if c.first_record_offset <= offset:
            found = c
        else:
            break
    return found


@dataclass(frozen=True)
class ChunkRead:
    """One ranged GET of a chunk plan: bytes ``byte_start..byte_end`` (inclusive, as an HTTP Range) hold the
    records at positions ``first_position..first_position+num_records-1`` of the object, in ``chunks``."""

    byte_start: int
    byte_end: int
    first_position: int
    num_records: int
    chunks: tuple[ChunkIndexEntry, ...]


def plan_chunk_reads(index: list[ChunkIndexEntry], positions: Iterable[int]) -> list[ChunkRead]:
    """The ranged GETs that fetch only the chunks holding the record ``positions`` (0-based places of
    records in the object, not Kafka offsets, so offset gaps do not matter). Adjacent needed chunks are
    merged into one GET. Raises ValueError if a position lies beyond the index's records."""
    starts, pos = [], 0
    for c in index:
        starts.append(pos)
        pos += c.num_records
    need = sorted(set(positions))
    if need and (need[0] < 0 or need[-1] >= pos):
        raise ValueError(f"record position {need[-1] if need[-1] >= pos else need[0]} is outside the index's "
                         f"{pos} records")
    wanted: list[int] = []
    i = 0
    for p in need:  # both sorted: one pass
        while i + 1 < len(index) and starts[i + 1] <= p:
            i += 1
        if not wanted or wanted[-1] != i:
            wanted.append(i)
    reads: list[ChunkRead] = []
    for i in wanted:
        c = index[i]
        prev = reads[-1] if reads else None
        if prev is not None and prev.byte_end + 1 == c.byte_offset and prev.first_position + prev.num_records == starts[i]:
            reads[-1] = ChunkRead(prev.byte_start, c.byte_offset + c.byte_length - 1, prev.first_position,
                                  prev.num_records + c.num_records, prev.chunks + (c,))
        else:
            reads.append(ChunkRead(c.byte_offset, c.byte_offset + c.byte_length - 1, starts[i], c.num_records, (c,)))
    return reads


class BlockGzipFormat(Format):
    """``blockgzip`` format: options ``compression`` (gzip|bzip2), ``compression_level``,
    ``block_size`` (alias ``compressed_block_size``; raw bytes per chunk), ``buffer_size``."""

    name = "blockgzip"
    reads_object_compression = True
    record_bytes_rule = "the archived line (UTF-8)"
    has_index = True

    @classmethod
    def options_from(cls, settings: Any) -> dict[str, Any]:
        return {"block_size": settings.blockgzip_block_size, "compression": settings.blockgzip_compression}

    def record_bytes(self, data: bytes, *, schema_id: int | None = None, where: str = "",
                     value_decoder: str | None = None) -> list[bytes]:
        return [line.encode("utf-8") for line in self.read(io.BytesIO(data))]

    def __init__(self, compression: str | None = "gzip", compression_level: int = -1,
                 block_size: int = DEFAULT_BLOCK_SIZE, compressed_block_size: int | None = None,
                 buffer_size: int = DEFAULT_BUFFER_SIZE):
        self.compression = parse_compression(compression or "gzip", allowed=("gzip", "bzip2"))
        self.compression_level = int(compression_level)
        if not -1 <= self.compression_level <= 9:
            raise InvalidArgumentError(f"compression_level {compression_level} is outside -1..9")
        self.block_size = int(compressed_block_size if compressed_block_size is not None else block_size)
        if self.block_size < 1:
            raise InvalidArgumentError("block_size must be >= 1")
        self.buffer_size = int(buffer_size)
        self.extension = ".gz" if self.compression == "gzip" else ".bz2"

    @classmethod
    def supports_view(cls, view: RecordView) -> bool:
        return view is RecordView.VALUE

    def open_writer(self, out: BinaryIO, view: RecordView = RecordView.VALUE) -> "BlockGzipWriter":
        return BlockGzipWriter(self, out, self._check_view(view))

    def _decompress_stream(self, stream: BinaryIO):
        head = stream.read(4)
        if not head:  # an empty object (0 records): bz2 would call that truncated
            return iter(())
        stream = io.BufferedReader(_Prefixed(head, stream))
        return gzip.GzipFile(fileobj=stream, mode="rb") if self.compression == "gzip" else bz2.BZ2File(stream, "rb")

    def read(self, stream: BinaryIO, view: RecordView = RecordView.VALUE) -> Iterator[str]:
        """Yield the lines (without their ``\\n``) of the whole object."""
        self._check_view(view)
        for line in self._decompress_stream(stream):
            yield line.decode("utf-8").removesuffix("\n")

    def read_chunk(self, data: bytes, entry: ChunkIndexEntry | dict) -> list[str]:
        """Lines of one chunk: ``data`` is the whole object, or exactly the chunk's byte range
        (what an S3 range GET of ``byte_offset``..``+byte_length`` returns)."""
        if isinstance(entry, dict):
            entry = ChunkIndexEntry(**{k: int(entry[k]) for k in ChunkIndexEntry.__dataclass_fields__})
        if len(data) != entry.byte_length:
            data = data[entry.byte_offset:entry.byte_offset + entry.byte_length]
        raw = gzip.decompress(data) if self.compression == "gzip" else bz2.decompress(data)
        return raw.decode("utf-8").splitlines()

    def read_range(self, data: bytes, read: ChunkRead) -> list[str]:
        """Lines of the records a ChunkRead's ranged GET returned (``data`` = exactly its bytes); raises
        ValueError if they do not hold the index's record count."""
        if len(data) != read.byte_end - read.byte_start + 1:
            raise ValueError(f"range {read.byte_start}-{read.byte_end} returned {len(data)} bytes")
        lines: list[str] = []
        for c in read.chunks:
            at = c.byte_offset - read.byte_start
            part = data[at:at + c.byte_length]
            raw = gzip.decompress(part) if self.compression == "gzip" else bz2.decompress(part)
            # split on \n only, as read() does (str.splitlines would also split on \r, \u2028, ...)
            got = [x.decode("utf-8") for x in raw.split(b"\n")[:-1]] if raw else []
            if len(got) != c.num_records:
                raise ValueError(f"chunk at byte {c.byte_offset} holds {len(got)} records, the index says "
                                 f"{c.num_records}")
            lines += got
        return lines


class _Prefixed(io.RawIOBase):
    """``head`` (already read) followed by the rest of ``stream``."""

    def __init__(self, head: bytes, stream: BinaryIO):
        self._head, self._stream = head, stream

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n], self._head = self._head[:n], self._head[n:]
            return n
        data = self._stream.read(len(b))
        b[:len(data)] = data
        return len(data)


def line_of(value: Any) -> str | None:
    """The text line DA would write for ``value`` (without the newline), or None if impossible."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8")  # UnicodeDecodeError -> EncodeError by the caller
    if value is None:
        return None
    return compact_json(value)


class BlockGzipWriter(FormatWriter):
    def __init__(self, fmt: BlockGzipFormat, out: BinaryIO, view: RecordView):
        super().__init__(out, view)
        self._fmt = fmt
        self._chunks: list[ChunkIndexEntry] = []
        self._member: CompressingSink | None = None
        self._first = 0         # Kafka offset of the current chunk's first record
        self._count = 0         # records in the current chunk
        self._raw = 0           # raw (UTF-8) bytes in the current chunk
        self._chars = 0         # characters in the current chunk (the threshold counts these)
        self._start = 0         # sink position where the current chunk's member began
        self._lines: list[str] = []
        self._pending = 0

    def write(self, record: SinkRecord) -> None:
        value = record.value
        if type(value) is str:  # the common case, without a call
            text = value
        else:
            try:
                text = line_of(value)
            except (UnicodeDecodeError, TypeError, ValueError) as e:
                raise encode_error(record, f"cannot write value as a text line: {e}") from None
            if text is None:
                raise encode_error(record, "null value (tombstone) cannot be written to a value file")
        if not text.endswith("\n"):
            text += "\n"
        n = len(text)  # characters, as DA counts (Java chars); bytes are counted when encoding
        if self._count and self._chars + n > self._fmt.block_size:
            self._end_chunk()
        if self._member is None:
            self._member = CompressingSink(self._sink, self._fmt.compression, self._fmt.compression_level)
            self._first, self._start = record.offset, self._sink.position
        self._lines.append(text)
        self._pending += n
        self._chars += n
        self._count += 1
        self.record_count += 1
        if self._pending >= self._fmt.buffer_size:
            self._push()

    def write_many(self, records: Sequence[SinkRecord]) -> None:
        """:meth:`write` for each record: runs of str values are joined into text once and cut at
        the record boundaries where :meth:`write` would end a chunk or push the buffer (found by
        bisecting the running character count), so the bytes, the index and ``record_count`` are
        exactly those of :meth:`write`; other values go through :meth:`write`."""
        values = [r.value for r in records]
        n, i = len(values), 0
        str_ = str
        if set(map(type, values)) == {str_}:
            self._write_texts(records, values, 0, n)
            return
        while i < n:
            if type(values[i]) is not str_:
                self.write(records[i])
                i += 1
                continue
            j = i + 1
            while j < n and type(values[j]) is str_:
                j += 1
            self._write_texts(records, values, i, j)
            i = j

    def _write_texts(self, records: Sequence[SinkRecord], values: list[str], i: int, j: int) -> None:
        """Append ``records[i:j]``, whose values are the str ``values[i:j]``."""
        texts = values[i:j] if (i or j != len(values)) else values
        m = len(texts)
        if any(map(str.endswith, texts, repeat("\n", m))):  # lines of their own: no newline added
            texts = [t if t.endswith("\n") else t + "\n" for t in texts]
            sep = ""
            ends = list(accumulate(map(len, texts), initial=0))
        else:  # line k is texts[k] + "\n"
            sep = "\n"
            ends = list(map(add, accumulate(map(len, texts), initial=0), range(m + 1)))
        # ends[k] = characters of the first k lines
        fmt, lines = self._fmt, self._lines
        block, buffer = fmt.block_size, fmt.buffer_size
        k = 0
        while k < m:
            if self._member is None:
                self._member = CompressingSink(self._sink, fmt.compression, fmt.compression_level)
                self._first, self._start = records[i + k].offset, self._sink.position
            base = ends[k]
            # write() ends the chunk before the first line that takes it over block_size (a chunk
            # always takes its first line), and pushes after the first that fills the buffer
            stop = bisect_right(ends, base + block - self._chars, k + 1) - 1  # lines k..stop-1 fit
            if stop == k and not self._count:
                stop = k + 1
            push = bisect_left(ends, base + buffer - self._pending, k + 1)  # push after line push-1
            end = min(stop, push, m)
            if end > k:
                lines.append(sep.join(texts[k:end]))
                if sep:
                    lines.append(sep)
                size = ends[end] - base
                self._pending += size
                self._chars += size
                self._count += end - k
                self.record_count += end - k
                if end == push:
                    self._push()
                k = end
            if k < m and k == stop:
                self._end_chunk()

    def _push(self) -> None:
        if self._lines:
            data = "".join(self._lines).encode("utf-8")
            self._raw += len(data)
            self._member.write(data)
            self._lines.clear()
            self._pending = 0

    def _end_chunk(self) -> None:
        self._push()
        self._member.finish()
        end = self._sink.position
        self._chunks.append(ChunkIndexEntry(self._first, self._count, self._start, end - self._start, self._raw))
        self._member, self._count, self._raw, self._chars = None, 0, 0, 0

    def _finish(self) -> None:
        if self._member is not None:
            self._end_chunk()
        # 0 records: an empty object (a valid, empty multi-member gzip file) and an empty index

    def index(self) -> list[ChunkIndexEntry]:
        """The chunks written so far (complete after close())."""
        return list(self._chunks)

    def side_files(self) -> dict[str, bytes]:
        body = {"chunks": [asdict(c) for c in self._chunks]}
        return {INDEX_SUFFIX: json.dumps(body, separators=(",", ":")).encode("utf-8")}
