"""The record-metadata side file: ``<base>.metadata.avro``, lakesink's own (``store.kafka.metadata``).

Confluent's formats keep neither the offset nor the timestamp of a record, and an object's offsets are not
always contiguous (transaction markers, compaction), so restoring a record to its place needs both. Next to
every value object lakesink writes one Avro container file (codec deflate) with one record per archived
record, in the value object's order, of the fixed schema :data:`METADATA_SCHEMA`::

    record io.lakesink.RecordMetadata {
      long offset;                       // Kafka offset
      union { null, long } timestamp;    // epoch milliseconds, null when the record had none
      enum io.lakesink.TimestampType { NoTimestampType, CreateTime, LogAppendTime } timestamp_type;
    }

(the enum symbols are Kafka's own ``TimestampType`` names). Any Avro reader reads the file; lakesink writes
and reads it without per-record Python objects: every field of this schema is a zig-zag varint (offset,
union branch, timestamp, enum index), so a block is encoded and decoded as numpy arrays, and deflated with
zlib at level 1 (0.1 CPU-s per million records; the default level costs 8x that for 3% smaller blocks).
zlib rather than ISA-L (used for gzip objects): the promise below rests on equal records giving equal bytes
in every process, zlib's output for a given input and level is long settled, and at these sizes ISA-L's speed
saves nothing measurable. Blocks hold
:data:`BLOCK_RECORDS` records each (counted from the file's first record), and the sync marker is fixed,
so the bytes depend only on the records: the record path and the columnar path write identical files.
"""
from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any, BinaryIO, Iterator, Sequence


from lakesink.errors import CorruptObjectError, InvalidArgumentError
from lakesink.objects.formats.base import Format, FormatWriter, RecordView

__all__ = ["METADATA_SCHEMA", "METADATA_EXTENSION", "TIMESTAMP_TYPES", "NO_TIMESTAMP_TYPE", "CREATE_TIME",
           "LOG_APPEND_TIME", "BLOCK_RECORDS", "MetadataFormat", "MetadataWriter", "RecordMetadata",
           "encode_block", "decode_block", "timestamp_type_name"]

#: Kafka's ``TimestampType`` ids (Java ``TimestampType.id``; Spark's ``timestampType`` column)
NO_TIMESTAMP_TYPE, CREATE_TIME, LOG_APPEND_TIME = -1, 0, 1
#: the enum's symbols, index = Kafka id + 1
TIMESTAMP_TYPES = ("NoTimestampType", "CreateTime", "LogAppendTime")

METADATA_SCHEMA = {
    "type": "record", "name": "RecordMetadata", "namespace": "io.lakesink",
    "doc": "Kafka metadata of each record of the value object next to this file, in the same order",
    "fields": [
        {"name": "offset", "type": "long", "doc": "Kafka offset"},
        {"name": "timestamp", "type": ["null", "long"], "doc": "Kafka record timestamp, epoch milliseconds"},
        {"name": "timestamp_type", "type": {"type": "enum", "name": "TimestampType", "namespace": "io.lakesink",
                                             "symbols": list(TIMESTAMP_TYPES)}},
    ],
}
#: the side file's suffix after the value key's base (``<base>.metadata.avro``)
METADATA_EXTENSION = ".avro"
#: records per Avro block (a fixed count, so the bytes do not depend on how records were handed in)
BLOCK_RECORDS = 65536
CODEC = "deflate"
# Fixed, so that equal records give equal bytes (a replayed upload is recognised as ours by its ETag).
SYNC_MARKER = hashlib.md5(b"lakesink record metadata v1").digest()

_MAX_VARINT = 10  # bytes of a zig-zag long


def timestamp_type_name(type_id: int | None) -> str:
    """``CreateTime`` / ``LogAppendTime`` / ``NoTimestampType`` for a Kafka timestamp type id."""
    if type_id is None:
        return TIMESTAMP_TYPES[0]
    return TIMESTAMP_TYPES[int(type_id) + 1]


class RecordMetadata:
    """The decoded metadata of one object: three parallel lists (offsets, timestamps or None, type ids)."""

    __slots__ = ("offsets", "timestamps", "timestamp_types")

    def __init__(self, offsets: list[int], timestamps: list[int | None], timestamp_types: list[int]):
        self.offsets, self.timestamps, self.timestamp_types = offsets, timestamps, timestamp_types

    def __len__(self) -> int:
        return len(self.offsets)


def _varint_lengths(z):
    import numpy as np

    n = np.ones(len(z), dtype=np.int64)
    for k in range(1, _MAX_VARINT):
        n += z >= np.uint64(1 << (7 * k))
    return n


def _zigzag(v):
    import numpy as np

    v = v.astype(np.int64, copy=False)
    return ((v << np.int64(1)) ^ (v >> np.int64(63))).view(np.uint64)


def _put_varints(out, starts, z, lengths) -> None:
    import numpy as np

    if not len(lengths):
        return
    full = int(lengths.min())  # bytes every varint has: no masking needed
    for k in range(int(lengths.max())):
        if k >= full:
            m = lengths > k
            idx = np.nonzero(m)[0]
            zz, ll, pos = z[idx], lengths[idx], starts[idx]
        else:
            zz, ll, pos = z, lengths, starts
        byte = ((zz >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        byte |= ((ll > k + 1).astype(np.uint8) << np.uint8(7))
        out[pos + k] = byte


def encode_block(offsets, timestamps, has_timestamp, type_ids) -> bytes:
    """Avro binary of records of :data:`METADATA_SCHEMA` (no container framing), from numpy arrays:
    ``offsets`` int64, ``timestamps`` int64 (any value where ``has_timestamp`` is False), ``has_timestamp``
    bool (or None: all present), ``type_ids`` int (Kafka ids -1/0/1)."""
    import numpy as np

    n = len(offsets)
    if n == 0:
        return b""
    zo = _zigzag(offsets)
    lo = _varint_lengths(zo)
    zt = _zigzag(timestamps)
    lt = _varint_lengths(zt)
    if has_timestamp is not None:
        lt = np.where(has_timestamp, lt, 0)
    rec = lo + 1 + lt + 1
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(rec[:-1], out=starts[1:])
    out = np.zeros(int(starts[-1] + rec[-1]), dtype=np.uint8)
    _put_varints(out, starts, zo, lo)
    pos = starts + lo
    # union branch: zig-zag 0 (null) = 0x00, 1 (long) = 0x02
    out[pos] = 2 if has_timestamp is None else np.where(has_timestamp, 2, 0).astype(np.uint8)
    _put_varints(out, pos + 1, zt, lt)
    # enum index 0..2 as zig-zag varint: 0x00, 0x02, 0x04
    types = np.asarray(type_ids, dtype=np.int64)
    if len(types) and (types.min() < -1 or types.max() > 1):
        raise InvalidArgumentError(f"timestamp type ids must be -1, 0 or 1, not {sorted(set(types.tolist()))}")
    out[pos + 1 + lt] = ((types + 1) * 2).astype(np.uint8)
    return out.tobytes()


def decode_block(data: bytes, count: int) -> tuple[Any, Any, Any]:
    """The inverse of :func:`encode_block`: (offsets int64, timestamps int64 or None per record as a masked
    pair (values, present bool), type ids int64) for ``count`` records, as numpy arrays. Raises
    :class:`CorruptObjectError` if the bytes are not ``count`` records of the schema."""
    import numpy as np

    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.nonzero(buf < 0x80)[0]  # the last byte of each varint
    if len(ends) == 0 or ends[-1] != len(buf) - 1:
        raise CorruptObjectError("record metadata block: truncated varint")
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    if lengths.max() > _MAX_VARINT:
        raise CorruptObjectError("record metadata block: varint longer than 10 bytes")
    idx = np.arange(len(buf), dtype=np.int64) - np.repeat(starts, lengths)  # byte position within its varint
    parts = (buf.astype(np.uint64) & np.uint64(0x7F)) << (idx.astype(np.uint64) * np.uint64(7))
    z = np.add.reduceat(parts, starts)
    vals = (z >> np.uint64(1)).view(np.int64) ^ -(z & np.uint64(1)).view(np.int64)
    m = len(vals)
    if m == 4 * count and count and np.all(vals[1::4] == 1):  # every record has a timestamp: stride 4
        offs, ts, present, types = vals[0::4], vals[2::4], None, vals[3::4]
    else:  # some null timestamps: walk the branches (3 or 4 varints per record)
        branch_pos = np.empty(count, dtype=np.int64)
        p = 0
        v = vals.tolist()
        try:
            for i in range(count):
                branch_pos[i] = p + 1
                p += 4 if v[p + 1] == 1 else 3
        except IndexError:
            raise CorruptObjectError(f"record metadata block: fewer than {count} records") from None
        if p != m:
            raise CorruptObjectError(f"record metadata block: {m - p} values after its {count} records")
        branch = vals[branch_pos]
        present = branch == 1
        offs = vals[branch_pos - 1]
        ts = np.where(present, vals[np.minimum(branch_pos + 1, m - 1)], 0)
        types = vals[branch_pos + 1 + present]
    if len(offs) != count:
        raise CorruptObjectError(f"record metadata block: {len(offs)} records, the block says {count}")
    if np.any((types < 0) | (types > 2)):
        raise CorruptObjectError("record metadata block: timestamp type outside the enum")
    return offs, (ts, present), types - 1


def _long(v: int) -> bytes:
    """One zig-zag varint (container framing: counts, sizes, lengths)."""
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _header() -> bytes:
    """The container header: magic, the metadata map (schema, codec), the sync marker."""
    meta = {"avro.schema": json.dumps(METADATA_SCHEMA, separators=(",", ":")).encode(), "avro.codec": CODEC.encode()}
    out = [b"Obj\x01", _long(len(meta))]
    for k, v in meta.items():
        out += [_long(len(k)), k.encode(), _long(len(v)), v]
    out += [_long(0), SYNC_MARKER]
    return b"".join(out)


class MetadataFormat(Format):
    """The ``.metadata.avro`` side file (view METADATA only); not a value format."""

    name = "metadata"
    extension = METADATA_EXTENSION

    @classmethod
    def supports_view(cls, view: RecordView) -> bool:
        return view is RecordView.METADATA

    def open_writer(self, out: BinaryIO, view: RecordView = RecordView.METADATA) -> "MetadataWriter":
        return MetadataWriter(out, self._check_view(view))

    def read(self, stream: BinaryIO, view: RecordView = RecordView.METADATA) -> Iterator[tuple[int, int | None, int]]:
        """Yield ``(offset, timestamp or None, timestamp type id)`` per record."""
        md = self.read_columns(stream)
        yield from zip(md.offsets, md.timestamps, md.timestamp_types)

    def read_arrays(self, stream: BinaryIO) -> tuple[Any, Any, Any, Any]:
        """The whole file as numpy arrays: (offsets int64, timestamps int64 (0 where null), present bool
        (whether each record has a timestamp), type ids int64 -1..1), decoded block by block."""
        import fastavro
        import numpy as np

        try:
            blocks = fastavro.block_reader(stream)
        except (ValueError, EOFError, KeyError) as e:
            raise CorruptObjectError(f"not an Avro container file: {type(e).__name__}: {e}") from None
        parts: list[tuple[Any, Any, Any, Any]] = []
        for block in blocks:
            offs, (ts, present), tt = decode_block(block.bytes_.getvalue(), block.num_records)
            parts.append((offs, ts, np.ones(len(offs), bool) if present is None else present, tt))
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64)
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(4))  # type: ignore[return-value]

    def read_columns(self, stream: BinaryIO) -> RecordMetadata:
        """The whole file as three lists (:meth:`read_arrays`, None for a missing timestamp)."""
        offs, ts, present, tt = self.read_arrays(stream)
        ts_list = ts.tolist()
        if not present.all():
            ts_list = [t if p else None for t, p in zip(ts_list, present.tolist())]
        return RecordMetadata(offs.tolist(), ts_list, tt.tolist())


class MetadataWriter(FormatWriter):
    """Collects offsets, timestamps and timestamp types; encodes a block per :data:`BLOCK_RECORDS`."""

    def __init__(self, out: BinaryIO, view: RecordView = RecordView.METADATA):
        super().__init__(out, view)
        self._offsets: list[int] = []
        self._timestamps: list[int | None] = []
        self._types: list[int | None] = []
        self._sink.write(_header())

    def write(self, record) -> None:
        self.write_columns([record.offset], [record.timestamp], [getattr(record, "timestamp_type", None)])

    def write_many(self, records: Sequence[Any]) -> None:
        """The offsets, timestamps and timestamp types of ``records`` (SinkRecords)."""
        self.write_columns([r.offset for r in records], [r.timestamp for r in records],
                           [r.timestamp_type for r in records])

    def write_payloads(self, payloads: Any, schema: Any = None) -> None:
        raise InvalidArgumentError("the record-metadata side file takes write_columns(offsets, timestamps, types)")

    def write_columns(self, offsets: Sequence[int], timestamps: Sequence[int | None],
                      timestamp_types: Sequence[int | None] | None = None) -> None:
        """Append records given as parallel sequences (``timestamp_types`` None: each record's type is
        CreateTime if it has a timestamp, else NoTimestampType, Kafka's default)."""
        n = len(offsets)
        if len(timestamps) != n or (timestamp_types is not None and len(timestamp_types) != n):
            raise InvalidArgumentError("offsets, timestamps and timestamp types differ in length")
        self._offsets.extend(offsets)
        self._timestamps.extend(timestamps)
        self._types.extend(timestamp_types if timestamp_types is not None else [None] * n)
        self.record_count += n
        while len(self._offsets) >= BLOCK_RECORDS:
            self._dump(BLOCK_RECORDS)

    def _dump(self, n: int) -> None:
        import numpy as np

        offs, tss, types = self._offsets[:n], self._timestamps[:n], self._types[:n]
        del self._offsets[:n], self._timestamps[:n], self._types[:n]
        has = None
        if None in tss:
            present = [t is not None for t in tss]
            has = np.array(present, dtype=bool)
            tss = [t if t is not None else 0 for t in tss]
        ts = np.fromiter(tss, dtype=np.int64, count=n)
        if None in types:  # unknown type: CreateTime when there is a timestamp (Kafka's default), else none
            default = np.where(has, CREATE_TIME, NO_TIMESTAMP_TYPE) if has is not None else None
            types = [t if t is not None else (CREATE_TIME if default is None else int(default[i]))
                     for i, t in enumerate(types)]
        data = encode_block(np.fromiter(offs, dtype=np.int64, count=n), ts, has,
                            np.fromiter(types, dtype=np.int64, count=n))
        packed = zlib.compress(data, 1, wbits=-15)  # raw deflate, as Avro's deflate codec
        self._sink.write(b"".join((_long(n), _long(len(packed)), packed, SYNC_MARKER)))

    def _finish(self) -> None:
        if self._offsets:
            self._dump(len(self._offsets))
