"""Reading archived records back, object by object, through manifest rows (runs in Spark's Python workers).

The read side of the archive: :func:`read_object` (one view of one object, as the format decodes it) and
:func:`read_records` (the Kafka records of one object, as bytes a producer can send again: what
``read_archive`` and restore use). Every object is read at the ETag (and version id) the manifest
recorded, so an object replaced after the commit fails loudly; record counts are checked against the
row. Orphans are invisible by construction: only manifest rows are read. (``lakesink.driver.archive``
re-exports these names for callers on the driver.)

Record bytes are each format's rule (the README's table; :func:`record_bytes_rules`):
:meth:`Format.record_bytes <lakesink.objects.formats.base.Format.record_bytes>` for values (ByteArray: the
bytes exactly; JSON and Block-GZIP: the archived line; Avro: the datum as stored, framed in Confluent's wire
format when the row has a ``schema_id``; Parquet: the row re-encoded as Avro binary of the file's schema),
:meth:`~lakesink.objects.formats.base.Format.key_bytes` for keys and
:meth:`~lakesink.objects.formats.base.Format.header_columns` for a column-at-a-time headers reader.

Keys (``.keys`` side file): bytes as stored; strings as UTF-8; with ``key_decoder="json"`` the key's
compact JSON text; a JSON keys file holds bytes keys as base64, decoded back for ``key_decoder="bytes"``;
with ``key_decoder="avro"`` an Avro keys file that names its keys' registry id (``lakesink.key.schema.id``)
gives each datum framed in Confluent wire format, other decoded keys their compact JSON text.
No keys side file: null keys. Headers (``.headers``): the stored (key, string value) pairs, values as
UTF-8 bytes (nulls stay null; the archive stored header values as UTF-8 text, so bytes that were not
valid UTF-8 come back with U+FFFD); no headers side file: no headers.

Offsets and timestamps come from the ``.metadata.avro`` side file (:mod:`lakesink.objects.formats.metadata`).
Without one (archives written with ``store.kafka.metadata=false``, imported Confluent buckets), the
offsets are ``first_offset + i`` when the object's offsets are contiguous (``last - first + 1 ==
record_count``); otherwise :class:`~lakesink.errors.MissingRecordMetadataError` names the object (or,
with ``offsets="null"``, the offsets are null): guessing would misplace records and restore progress.
Timestamps are then null, and a time cut must not fall inside such an object (its manifest
``min_timestamp``/``max_timestamp`` decide whether it is wholly in or out).

Size: every view of an object (values, keys, headers, metadata, Block-GZIP ranges) is read here through one
ETag/count check and one rule for which records a cut admits; split up, readers could disagree on a record.
"""
from __future__ import annotations

import datetime as dt
import gc
import io
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

from lakesink import plugins
from lakesink.executor.cut import NO_CUT, Cut  # re-exported: callers import them from here
from lakesink.errors import (ArchiveReadError, CorruptObjectError, InvalidArgumentError, LakesinkError,
                             ManifestRowError, MissingRecordMetadataError, MissingSideFileError,
                             RecordCountMismatchError)
from lakesink.objects.formats.base import RecordView
from lakesink.manifest.rows import REWRITTEN_NOTE, TOMBSTONES_NOTE, to_ms

__all__ = ["FIELDS", "row_getter", "ArchivedObject", "read_object", "iter_objects", "Cut", "RestoredRecord",
           "read_records", "read_produce_columns", "ProduceColumns", "count_in_cut", "read_key_positions", "read_record_batch",
           "record_bytes_rules"]

FIELDS = ("topic", "kafka_partition", "object_key", "etag", "version_id", "first_offset", "last_offset",
          "record_count")
#: optional row fields a reader uses when present (older callers pass rows without them)
OPTIONAL_FIELDS = ("format", "compression", "size_bytes", "schema_id", "min_timestamp", "max_timestamp", "note")


def row_getter(row: Any):
    """``get(field)`` for a Spark Row, a mapping or any object with attributes; ManifestRowError if absent."""
    if isinstance(row, Mapping):
        def get(k: str, default: Any = ...) -> Any:
            if k in row:
                return row[k]
            if default is not ...:
                return default
            raise ManifestRowError(f"manifest row has no {k!r} field: {dict(row)!r}")
    else:
        def get(k: str, default: Any = ...) -> Any:
            try:
                return getattr(row, k)
            except (AttributeError, LookupError, ValueError):  # a Spark Row raises AttributeError
                if default is not ...:
                    return default
                raise ManifestRowError(f"manifest row has no {k!r} field: {row!r}") from None
    return get


def _ms(v: Any) -> int | None:
    """Epoch ms of a manifest timestamp: a datetime (Spark, ManifestRow) or ms already (JSON)."""
    if v is None or isinstance(v, int):
        return v
    if isinstance(v, dt.datetime):
        return to_ms(v)
    raise ManifestRowError(f"manifest timestamp {v!r} is neither a datetime nor epoch milliseconds")


@dataclass(frozen=True)
class ArchivedObject:
    """The parts of a manifest row a reader needs (works for Spark Rows, ManifestRows and dicts)."""

    topic: str
    kafka_partition: int
    object_key: str
    etag: str | None
    version_id: str | None
    first_offset: int
    last_offset: int
    record_count: int
    side_files: tuple[Mapping[str, Any], ...] = ()
    format: str | None = None
    compression: str | None = None
    size_bytes: int | None = None
    schema_id: int | None = None
    min_timestamp_ms: int | None = None
    max_timestamp_ms: int | None = None
    #: no value object: the records are all tombstones (``behavior.on.null.values=write``), their values null
    value_omitted: bool = False
    #: whether ``lakesink erase`` rewrote the object (its row's note): it keeps its span, its first or last record
    #: may be gone
    rewritten: bool = False

    @classmethod
    def from_row(cls, row: Any) -> "ArchivedObject":
        get = row_getter(row)
        values = [get(f) for f in FIELDS]
        try:
            sides = tuple((s if isinstance(s, Mapping) else (s.asDict() if hasattr(s, "asDict") else vars(s)))
                          for s in (get("side_files", None) or []))
        except (AttributeError, TypeError) as e:
            raise ManifestRowError(f"manifest row {values[2]!r}: bad side_files: {e}") from None
        fmt, comp, size, sid, tmin, tmax, note = (get(f, None) for f in OPTIONAL_FIELDS)
        return cls(*values, sides, fmt, comp, size, sid, _ms(tmin), _ms(tmax), note == TOMBSTONES_NOTE,
                   str(note or "").startswith(REWRITTEN_NOTE))

    def side(self, view: str) -> Mapping[str, Any] | None:
        """The side-file entry (``key``, ``etag``, ``version_id``, ``size_bytes``) of ``view``
        ("keys"/"headers"/"metadata"/"index"), if recorded."""
        return next((s for s in self.side_files if s.get("view") == view), None)

    @property
    def contiguous(self) -> bool:
        """Whether the object's offsets are exactly ``first_offset..last_offset`` (no gap)."""
        return self.last_offset - self.first_offset + 1 == self.record_count


def _read_bytes(store, obj: ArchivedObject, view: RecordView) -> tuple[str, bytes]:
    if view is RecordView.VALUE:
        key, etag, version = obj.object_key, obj.etag, obj.version_id
    else:
        side = obj.side(view.value)
        if side is None:
            raise MissingSideFileError(f"{obj.object_key}: no {view.value} side file in the manifest")
        if not side.get("key"):
            raise ManifestRowError(f"{obj.object_key}: the {view.value} side file entry has no key: {dict(side)!r}")
        key, etag, version = side["key"], side.get("etag"), side.get("version_id")
    return key, store.read(key, etag=etag, version_id=version)


def _corrupt(store, key: str, fmt: Any, e: Exception) -> CorruptObjectError:
    return CorruptObjectError(f"{store.uri(key)}: cannot be read as {getattr(fmt, 'name', fmt)!s}: "
                              f"{type(e).__name__}: {e}")


def _check_count(store, key: str, n: int, obj: ArchivedObject) -> None:
    if n != obj.record_count:
        raise RecordCountMismatchError(f"{store.uri(key)}: holds {n} records, the manifest says {obj.record_count}")


def read_object(store, fmt, obj: ArchivedObject, view: RecordView = RecordView.VALUE) -> list[Any]:
    """Values (or keys / header lists / metadata tuples) of one committed object, verified against its ETag.
    For ``RecordView.METADATA`` the record-metadata format is used whatever ``fmt`` is.

    Raises MissingSideFileError, CorruptObjectError, RecordCountMismatchError (all ArchiveReadError) or the
    store's StoreError / ObjectChangedError."""
    try:
        view = RecordView(view)
    except ValueError:
        raise ArchiveReadError(f"{obj.object_key}: unknown record view {view!r} "
                               f"(one of {', '.join(v.value for v in RecordView)})") from None
    if view is RecordView.METADATA:
        from lakesink.objects.formats.metadata import MetadataFormat

        fmt = MetadataFormat()
    elif view is RecordView.VALUE and obj.value_omitted:
        return [None] * obj.record_count
    key, data = _read_bytes(store, obj, view)
    try:
        values = list(fmt.read(io.BytesIO(data), view))
    except LakesinkError:
        raise
    except (ValueError, LookupError, EOFError) as e:  # json/avro/parquet decoders raise these
        raise _corrupt(store, key, fmt, e) from e
    _check_count(store, key, len(values), obj)
    return values


def iter_objects(rows: Iterable[Any]) -> Iterator[ArchivedObject]:
    """Object rows in (topic, partition, first offset) order; advance/skipped rows are dropped."""
    objs = [ArchivedObject.from_row(r) for r in rows if row_getter(r)("kind") == "object"]
    yield from sorted(objs, key=lambda o: (o.topic, o.kafka_partition, o.first_offset))


# --------------------------------------------------------------------------------------------- records


class RestoredRecord(NamedTuple):
    """One archived Kafka record as bytes (``timestamp_type``: CreateTime / LogAppendTime / NoTimestampType,
    None when the object has no metadata side file)."""

    topic: str
    partition: int
    offset: int | None
    timestamp: int | None
    timestamp_type: str | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def record_bytes_rules() -> dict[str, str]:
    """Per value format, what :func:`read_records` returns as the value bytes (for docs and CLIs): each
    format's :attr:`~lakesink.objects.formats.base.Format.record_bytes_rule`."""
    return {name: plugins.load("format", name).record_bytes_rule for name in plugins.names("format")}


def _read_view(store, fmt, obj: ArchivedObject, view: RecordView) -> list[Any]:
    return _decode_view(store, fmt, obj, view, lambda data: list(fmt.read(io.BytesIO(data), view)))


def _decode_view(store, fmt, obj: ArchivedObject, view: RecordView, decode: Callable[[bytes], Any],
                 count: Callable[[Any], int] = len, narrow: Any = None,
                 spread: Callable[[Any, Any, int], Any] | None = None) -> Any:
    """``decode`` of one view's bytes (read once, ETag-checked): a decoding failure is a CorruptObjectError
    naming the file, and ``count`` of the result must be the row's record count. ``narrow`` (a :class:`_Narrow`)
    may decode only some Avro blocks; ``spread`` then gives the result back its other records (empty)."""
    key, data = _read_bytes(store, obj, view)
    part = narrow(data, fmt) if narrow is not None and spread is not None else None
    try:
        out = decode(data if part is None else part[0])
    except LakesinkError:
        raise
    except (ValueError, LookupError, EOFError, TypeError) as e:
        raise _corrupt(store, key, fmt, e) from e
    if part is not None:
        _check_count(store, key, count(out) + obj.record_count - len(part[1]), obj)
        out = spread(out, part[1], obj.record_count)
    _check_count(store, key, count(out), obj)
    return out


def read_metadata(store, obj: ArchivedObject):
    """The object's record metadata as numpy arrays (offsets, timestamps (0 where null), present, type ids;
    :meth:`~lakesink.objects.formats.metadata.MetadataFormat.read_arrays`), checked against the row:
    ``record_count`` records, the first and last offsets, ascending (repeated only where a transform made several
    records of one Kafka record: :mod:`lakesink.transforms`). None without a side file."""
    from lakesink.objects.formats.metadata import MetadataFormat

    if obj.side("metadata") is None:
        return None
    key, data = _read_bytes(store, obj, RecordView.METADATA)
    md = MetadataFormat().read_arrays(io.BytesIO(data))
    _check_offsets(store, key, md[0], obj)
    return md


def _check_offsets(store, key: str, offs: Any, obj: ArchivedObject) -> None:
    """The record count and offsets a file gives (numpy int64) against the row (see :func:`read_metadata`)."""
    import numpy as np

    _check_count(store, key, len(offs), obj)
    # an object an erase rewrote keeps its span: its first or last record may be gone
    if len(offs) and ((offs[0] != obj.first_offset or offs[-1] != obj.last_offset) if not obj.rewritten else
                      (offs[0] < obj.first_offset or offs[-1] > obj.last_offset)
                      or (len(offs) > 1 and not bool(np.all(np.diff(offs) >= 0)))):
        raise CorruptObjectError(f"{store.uri(key)}: offsets {offs[0]}..{offs[-1]} (ascending: no) disagree with the "
                                 f"manifest's {obj.first_offset}..{obj.last_offset}")


def _parts_metadata(store, obj: ArchivedObject, parts: Any):
    """:func:`read_metadata`'s arrays from the offsets and timestamps a value object holds itself
    (:class:`~lakesink.objects.formats.base.RecordParts`), checked the same way; None when it holds neither (or only
    timestamps, for records whose offsets are not contiguous)."""
    import numpy as np

    if parts.offsets is None and parts.timestamps is None:
        return None
    n = len(parts.values)
    if parts.offsets is not None:
        offs = np.asarray(parts.offsets, np.int64)
    elif obj.contiguous:
        offs = np.arange(obj.first_offset, obj.first_offset + n, dtype=np.int64)
    else:
        return None
    ts = parts.timestamps if parts.timestamps is not None else [None] * n
    present = np.asarray([t is not None for t in ts], bool)
    tss = np.asarray([0 if t is None else t for t in ts], np.int64)
    types = np.asarray(parts.timestamp_types if parts.timestamp_types is not None else [-1] * n, np.int64)
    _check_offsets(store, obj.object_key, offs, obj)
    return offs, tss, present, types


def count_in_cut(store, obj: ArchivedObject, cut: Cut) -> int | None:
    """How many of ``obj``'s records ``cut`` takes, exactly, from its record-metadata side file alone (checked
    as :func:`read_metadata` does); None without one."""
    import numpy as np
    import pyarrow as pa

    md = read_metadata(store, obj)
    if md is None:
        return None
    offs, ts, present, _types = md
    return int(np.count_nonzero(admitted(cut, pa.array(offs, pa.int64()),
                                         pa.array(ts, pa.int64(), mask=None if present.all() else ~present))))


def read_blockgzip_positions(store, fmt, obj: ArchivedObject, positions: Sequence[int],
                             blocks: Any = None) -> list[bytes | None]:
    """Values of a Block-GZIP object at record ``positions`` (others None), fetching only the chunks that hold
    them: the ``.index.json`` side file, then one ranged GET per run of adjacent needed chunks (each checked
    against the object's ETag). The index must account for the manifest's ``record_count``."""
    from lakesink.objects.formats.blockgzip import parse_index, plan_chunk_reads

    ikey, idata = _read_side(store, obj, "index")
    try:
        index = parse_index(idata)
    except (ValueError, LookupError, TypeError) as e:
        raise CorruptObjectError(f"{store.uri(ikey)}: not a Block-GZIP index: {type(e).__name__}: {e}") from e
    _check_count(store, ikey, sum(c.num_records for c in index), obj)
    values: list[bytes | None] = [None] * obj.record_count
    try:
        reads = plan_chunk_reads(index, positions)
    except ValueError as e:
        raise CorruptObjectError(f"{store.uri(ikey)}: {e}") from e
    if blocks is not None:  # a BlockCounts: chunks read, chunks left unread
        got = sum(len(r.chunks) for r in reads)
        blocks.read += got
        blocks.skipped += len(index) - got
    for r in reads:
        data = store.read(obj.object_key, etag=obj.etag, version_id=obj.version_id,
                          byte_range=(r.byte_start, r.byte_end))
        try:
            lines = fmt.read_range(data, r)
        except (ValueError, EOFError, OSError) as e:
            raise _corrupt(store, obj.object_key, fmt, e) from e
        values[r.first_position:r.first_position + r.num_records] = [x.encode("utf-8") for x in lines]
    return values


def _read_side(store, obj: ArchivedObject, view: str) -> tuple[str, bytes]:
    side = obj.side(view)
    if side is None or not side.get("key"):
        raise MissingSideFileError(f"{obj.object_key}: no {view} side file in the manifest")
    return side["key"], store.read(side["key"], etag=side.get("etag"), version_id=side.get("version_id"))


def _positions(store, obj: ArchivedObject, cut: Cut, overlap: bool | None, offsets: str = "fail", parts: Any = None):
    """Offsets, timestamps (ms), timestamp types of ``obj``'s records (pyarrow, null where unknown) and the positions
    ``keep`` the cut admits (None: all; ``overlap``: ``cut.object_overlap(obj)``, not False): one rule for all.
    ``parts``: the records of a value object that holds them whole (their offsets and timestamps, not a side file's)."""
    import numpy as np
    import pyarrow as pa

    from lakesink.objects.formats.metadata import timestamp_type_name

    md = read_metadata(store, obj) if parts is None else _parts_metadata(store, obj, parts)
    n = obj.record_count
    if md is not None:
        md_offs, md_ts, present, type_ids = md
        offs = pa.array(md_offs, pa.int64())
        tss = pa.array(md_ts, pa.int64(), mask=None if present.all() else ~present)
        names = pa.array([timestamp_type_name(t) for t in (-1, 0, 1)], pa.string())
        types = names.take(pa.array(type_ids + 1))
        any_ts_missing = not present.all()
    else:
        offset_inside = ((cut.from_offset is None or obj.first_offset >= cut.from_offset)
                         and (cut.to_offset is None or obj.last_offset <= cut.to_offset))
        if obj.contiguous:
            offs = pa.array(np.arange(obj.first_offset, obj.last_offset + 1, dtype=np.int64))
        elif offsets == "null" and offset_inside:  # no offset bound falls inside the object: nulls are enough
            offs = pa.nulls(n, pa.int64())
        else:
            raise MissingRecordMetadataError(
                f"{store.uri(obj.object_key)}: no record-metadata side file and its offsets are not contiguous "
                f"({n} records in {obj.first_offset}..{obj.last_offset}): each record's offset is unknown")
        if cut.by_time and overlap is None:
            raise MissingRecordMetadataError(
                f"{store.uri(obj.object_key)}: no record-metadata side file, so its records' timestamps are unknown, "
                f"and the time cut [{cut.from_ts}, {cut.to_ts}] may fall inside it (manifest timestamps "
                f"{obj.min_timestamp_ms}..{obj.max_timestamp_ms})")
        tss, types, any_ts_missing = pa.nulls(n, pa.int64()), pa.nulls(n, pa.string()), True
    # the manifest's bounds take the whole object, unless a record of a metadata file lacks a timestamp
    # (outside any time cut); without metadata the bounds are all there is
    keep: list[int] | None = None
    if not (overlap is True and (md is None or not (cut.by_time and any_ts_missing))):
        keep = np.flatnonzero(admitted(cut, offs, tss)).tolist()
        if len(keep) == n:
            keep = None
    return offs, tss, types, keep


def admitted(cut: Cut, offs: Any, tss: Any) -> Any:
    """:meth:`Cut.admits` of every record at once (``offs``, ``tss``: pyarrow int64, null where unknown): a numpy
    bool array. An unknown offset passes the offset bounds; an unknown timestamp fails a time cut."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    mask = pa.array(np.ones(len(offs), np.bool_))
    for bound, test, col, unknown in ((cut.from_offset, pc.greater_equal, offs, True),
                                      (cut.to_offset, pc.less_equal, offs, True),
                                      (cut.from_ts, pc.greater_equal, tss, False),
                                      (cut.to_ts, pc.less_equal, tss, False)):
        if bound is not None:
            mask = pc.and_(mask, pc.fill_null(test(col, pa.scalar(bound, pa.int64())), unknown))
    return mask.to_numpy(zero_copy_only=False)


class _Narrow:
    """The Avro blocks of one object's files that hold the records a cut keeps (:mod:`lakesink.executor.blockcut`):
    ``narrow(data, fmt)`` gives the container of those blocks and the positions it holds (None: read it whole)."""

    def __init__(self, keep: list[int], n: int, counts: Any):
        import numpy as np

        self.positions, self.n, self.counts = np.asarray(keep, np.int64), n, counts

    def __call__(self, data: bytes, fmt: Any) -> tuple[bytes, Any] | None:
        from lakesink.executor.blockcut import MAGIC, narrow

        if getattr(fmt, "name", None) != "avro" or not data.startswith(MAGIC):
            return None
        return narrow(data, self.positions, self.n, self.counts)


def _read_columns(store, fmt, obj: ArchivedObject, *, keys_format=None, headers_format=None, cut: Cut = NO_CUT,
                  key_decoder: str = "bytes", value_decoder: str | None = None,
                  offsets: str = "fail", blocks: Any = None) -> "_Columns | None":
    """What :func:`read_records` reads of one object (same arguments), as Arrow columns; None when the cut
    takes nothing of it. When the cut falls inside the object, only the Block-GZIP chunks and the Avro blocks
    (values, keys and headers side files) holding its records are decoded (the records of the others are null
    in the columns, outside ``keep``); ``blocks`` (a :class:`~lakesink.executor.blockcut.BlockCounts`) counts
    them."""
    import pyarrow as pa

    from lakesink.executor.blockcut import spread_binary

    if offsets not in ("fail", "null"):
        raise InvalidArgumentError(f"offsets must be 'fail' or 'null', not {offsets!r}")
    overlap = cut.object_overlap(obj)
    if overlap is False:
        return None
    parts = None
    if getattr(fmt, "holds_record_parts", False) and not obj.value_omitted:  # keys, headers, offsets in the object
        key, data = _read_bytes(store, obj, RecordView.VALUE)
        try:
            parts = fmt.record_parts(data)
        except LakesinkError:
            raise
        except (ValueError, LookupError, EOFError, TypeError, OSError) as e:
            raise _corrupt(store, key, fmt, e) from e
        _check_count(store, key, len(parts.values), obj)
    offs, tss, types, keep = _positions(store, obj, cut, overlap, offsets, parts)
    if keep is not None and not keep:
        return None
    n = obj.record_count
    narrow = _Narrow(keep, n, blocks) if keep is not None else None
    if obj.value_omitted:  # tombstones only: no value object
        values = pa.nulls(n, pa.binary())
    elif parts is not None:
        values = pa.array(parts.values, pa.binary())
    elif keep is not None and getattr(fmt, "has_index", False) and obj.side("index") is not None:
        values = pa.array(read_blockgzip_positions(store, fmt, obj, keep, blocks), pa.binary())
    else:
        key, data = _read_bytes(store, obj, RecordView.VALUE)
        part = narrow(data, fmt) if narrow is not None else None
        try:
            values = fmt.record_bytes(data if part is None else part[0], schema_id=obj.schema_id,
                                      where=obj.object_key, value_decoder=value_decoder)
        except LakesinkError:
            raise
        except (ValueError, LookupError, EOFError, TypeError) as e:
            raise _corrupt(store, key, fmt, e) from e
        if part is not None:
            _check_count(store, key, len(values) + n - len(part[1]), obj)
            values = spread_binary(values, part[1], n)
        _check_count(store, key, len(values), obj)
        if not isinstance(values, (pa.Array, pa.ChunkedArray)):
            values = pa.array(values, pa.binary())
    keys = pa.nulls(n, pa.binary())
    if parts is not None and parts.keys is not None:
        keys = pa.array(parts.keys, pa.binary())
    elif keys_format is not None and obj.side("keys") is not None:
        keys = _read_keys(store, keys_format, obj, key_decoder, narrow)
        if not isinstance(keys, pa.Array):
            keys = pa.array(keys, pa.binary())
    headers = _HeaderColumns.none(n)
    if parts is not None and parts.headers is not None:
        headers = _HeaderColumns.of(parts.headers)
    elif headers_format is not None and obj.side("headers") is not None:
        headers = _read_headers(store, headers_format, obj, narrow)
    return _Columns(offs, tss, types, keys, values, headers, keep, n)


def read_records(store, fmt, obj: ArchivedObject, *, keys_format=None, headers_format=None, cut: Cut = NO_CUT,
                 key_decoder: str = "bytes", value_decoder: str | None = None,
                 offsets: str = "fail", blocks: Any = None) -> list[RestoredRecord]:
    """The Kafka records of one committed object, in file (= offset) order, inside ``cut``.

    ``fmt``: the value format the object was written with; ``keys_format`` / ``headers_format``: the formats
    of its ``.keys`` / ``.headers`` side files (read when given and recorded in the row; else keys are null
    and headers empty). ``key_decoder`` / ``value_decoder``: the sink's decoders (see the module docstring
    for how they shape the bytes). ``offsets``: ``fail`` (default) or ``null``, for an object with neither
    a metadata side file nor contiguous offsets. Every object read is verified against its manifest ETag
    and record count. ``blocks``: a :class:`~lakesink.executor.blockcut.BlockCounts` counting the Avro blocks and
    Block-GZIP chunks a cut inside the object decoded and skipped."""
    c = _read_columns(store, fmt, obj, keys_format=keys_format, headers_format=headers_format, cut=cut,
                      key_decoder=key_decoder, value_decoder=value_decoder, offsets=offsets, blocks=blocks)
    if c is None:
        return []
    topic, part = obj.topic, obj.kafka_partition
    offs, tss, types = c.offs.to_pylist(), c.tss.to_pylist(), c.types.to_pylist()
    keys, values, headers = c.keys.to_pylist(), c.values.to_pylist(), c.headers.per_record()
    if c.keep is None:
        return [RestoredRecord(topic, part, *r) for r in zip(offs, tss, types, keys, values, headers)]
    return [RestoredRecord(topic, part, offs[i], tss[i], types[i], keys[i], values[i], headers[i]) for i in c.keep]


class ProduceColumns(NamedTuple):
    """The records of one object inside a cut as a producer takes them, a column at a time (what a plain restore
    produces; :func:`read_produce_columns`): per record, ``values`` and ``keys`` (bytes or None), ``headers`` (a
    list of (str, bytes | None) pairs, or None) and ``timestamps`` (epoch ms, 0 where unknown: librdkafka's "now"),
    all Python lists; ``offsets`` (numpy int64, ascending) and ``sizes`` (numpy int64, n + 1: the running sum of
    each record's key + value + header bytes as restore counts them, ``sizes[i]`` before record i)."""

    offsets: Any
    timestamps: list
    keys: list
    values: list
    headers: list
    sizes: Any
    #: each record's timestamp, null where unknown (pyarrow int64): for a check of the whole column
    timestamps_arrow: Any


def read_produce_columns(store, fmt, obj: ArchivedObject, *, keys_format=None, headers_format=None,
                         cut: Cut = NO_CUT, key_decoder: str = "bytes", value_decoder: str | None = None,
                         blocks: Any = None) -> "ProduceColumns | None":
    """:func:`read_records` of one object (same arguments and checks) as :class:`ProduceColumns`, built a column
    at a time (no per-record object but the bytes and the header lists); None when the cut leaves no record.
    ``blocks``: a :class:`~lakesink.executor.blockcut.BlockCounts` counting the blocks decoded and skipped."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    c = _read_columns(store, fmt, obj, keys_format=keys_format, headers_format=headers_format, cut=cut,
                      key_decoder=key_decoder, value_decoder=value_decoder, blocks=blocks)
    if c is None:
        return None
    offs, tss, keys, values, h = c.offs, c.tss, c.keys, c.values, c.headers
    hoff = np.asarray(h.offsets, np.int64)
    # bytes as restore counts them: len(value) + len(key) + len(header key) (characters) + len(header value)
    hsize = np.zeros(len(h.keys) + 1, np.int64)
    if len(h.keys):
        hsize[1:] = np.cumsum(pc.utf8_length(h.keys).to_numpy(zero_copy_only=False)
                              + pc.fill_null(pc.binary_length(h.values), 0).to_numpy(zero_copy_only=False))
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if c.keep is not None:
        take = pa.array(c.keep, pa.int64())
        offs, tss, keys, values = offs.take(take), tss.take(take), keys.take(take), values.take(take)
        sel = np.asarray(c.keep, np.int64)
        starts, ends = hoff[sel], hoff[sel + 1]
    else:
        starts, ends = hoff[:-1], hoff[1:]
    size = (pc.fill_null(pc.binary_length(values), 0).to_numpy(zero_copy_only=False).astype(np.int64)
            + pc.fill_null(pc.binary_length(keys), 0).to_numpy(zero_copy_only=False)
            + (hsize[ends] - hsize[starts]))
    sizes = np.zeros(len(size) + 1, np.int64)
    np.cumsum(size, out=sizes[1:])
    # a list and a tuple per record, none of them in a cycle: the cyclic GC, which would otherwise walk the
    # worker's heap every 700 of them (3/4 of this function's time), is held off while they are made
    paused = gc.isenabled()
    gc.disable()
    try:
        if len(h.keys):
            pairs = zip(h.keys.to_pylist(), h.values.to_pylist())
            if len(starts) == len(h.keys) and bool((ends - starts == 1).all()):
                headers = [[p] for p in pairs]  # one header each (the usual shape): no slicing
            else:
                pairs = list(pairs)
                headers = [pairs[a:b] or None for a, b in zip(starts.tolist(), ends.tolist())]
        else:
            headers = [None] * len(size)
        return ProduceColumns(offs.to_numpy(zero_copy_only=False), pc.fill_null(tss, 0).to_pylist(),
                              keys.to_pylist(), values.to_pylist(), headers, sizes, tss)
    finally:
        if paused:
            gc.enable()


def read_key_positions(store, obj: ArchivedObject, *, keys_format, cut: Cut = NO_CUT,
                       key_decoder: str = "bytes") -> tuple[list[int], list[bytes | None]]:
    """Offsets and key bytes of the records :func:`read_records` (same ``cut``, ``key_decoder``) returns, in order,
    from the ``.keys`` and ``.metadata.avro`` side files alone: the first pass of ``restore --latest-per-key``."""
    overlap = cut.object_overlap(obj)
    if overlap is False:
        return [], []
    if keys_format is None or obj.side("keys") is None:
        raise MissingSideFileError(f"{store.uri(obj.object_key)}: no keys side file in the manifest (archived "
                                   f"without store.kafka.keys=true): its records' keys are unknown")
    offs, _tss, _types, keep = _positions(store, obj, cut, overlap)
    keys, offs_l = _read_keys(store, keys_format, obj, key_decoder), offs.to_pylist()
    keys = keys.to_pylist() if hasattr(keys, "to_pylist") else list(keys)
    return (offs_l, keys) if keep is None else ([offs_l[i] for i in keep], [keys[i] for i in keep])


def read_record_batch(store, fmt, obj: ArchivedObject, schema: Any, *, keys_format=None, headers_format=None,
                      cut: Cut = NO_CUT, key_decoder: str = "bytes", value_decoder: str | None = None,
                      offsets: str = "fail") -> Any:
    """:func:`read_records` as one Arrow record batch of ``schema`` (topic, partition, offset, timestamp,
    timestamp_type, key, value, headers: ``lakesink.executor.archive_tasks.arrow_record_schema``), built a
    column at a time (no per-record objects); None when the cut leaves no record."""
    import pyarrow as pa
    import pyarrow.compute as pc

    c = _read_columns(store, fmt, obj, keys_format=keys_format, headers_format=headers_format, cut=cut,
                      key_decoder=key_decoder, value_decoder=value_decoder, offsets=offsets)
    if c is None:
        return None
    n = c.n
    h = c.headers
    htype = schema.field("headers").type
    hvalues = pa.StructArray.from_arrays([h.keys, h.values], fields=list(htype.value_type))
    cols = [
        pa.repeat(pa.scalar(obj.topic, pa.string()), n),
        pa.repeat(pa.scalar(obj.kafka_partition, pa.int32()), n),
        c.offs,
        pc.multiply(c.tss, 1000).cast(pa.timestamp("us", tz="UTC")),
        c.types,
        c.keys,
        c.values,
        pa.ListArray.from_arrays(pa.array(h.offsets.astype("int32")), hvalues, type=htype),
    ]
    batch = pa.RecordBatch.from_arrays(cols, schema=schema)
    if c.keep is not None:
        batch = batch.take(pa.array(c.keep, pa.int64()))
    return batch


class _HeaderColumns(NamedTuple):
    """Headers of an object's records, flattened: record i's are ``keys``/``values`` ``[offsets[i]:offsets[i+1]]``."""

    offsets: Any  # numpy int64, one more than the records
    keys: Any  # pyarrow string array (its UTF-8 checked)
    values: Any  # pyarrow binary array, null for a null value

    @classmethod
    def none(cls, n: int) -> "_HeaderColumns":
        """``n`` records without headers."""
        import numpy as np
        import pyarrow as pa

        return cls(np.zeros(n + 1, np.int64), pa.array([], pa.string()), pa.array([], pa.binary()))

    @classmethod
    def of(cls, headers: list) -> "_HeaderColumns":
        """Each record's (key, value bytes or None) list, flattened."""
        import numpy as np
        import pyarrow as pa

        offsets = np.zeros(len(headers) + 1, np.int64)
        offsets[1:] = np.cumsum([len(hs) for hs in headers]) if headers else []
        flat = [p for hs in headers for p in hs]
        return cls(offsets, pa.array([k for k, _v in flat], pa.string()), pa.array([v for _k, v in flat], pa.binary()))

    def per_record(self) -> list[list[tuple[str, bytes | None]]]:
        """Each record's (key, value) list (one slice of one list of pairs per record)."""
        offsets = self.offsets.tolist()
        pairs = list(zip(self.keys.to_pylist(), self.values.to_pylist()))
        return [pairs[a:b] for a, b in zip(offsets, offsets[1:])]


class _Columns(NamedTuple):
    """What :func:`_read_columns` read of one object: its ``n`` records' columns (pyarrow arrays: offsets,
    timestamps in ms and timestamp types, null where unknown; keys and values, binary) and the positions
    ``keep`` the cut admits (None: all)."""

    offs: Any
    tss: Any
    types: Any
    keys: Any
    values: Any
    headers: _HeaderColumns
    keep: list[int] | None
    n: int


def _read_keys(store, keys_format, obj: ArchivedObject, key_decoder: str, narrow: Any = None) -> Any:
    """The keys of the ``.keys`` side file, as record bytes (see the module docstring): a list, or a pyarrow
    binary array when the file was read a column at a time."""
    from lakesink.executor.blockcut import spread_binary

    return _decode_view(store, keys_format, obj, RecordView.KEYS,
                        lambda data: keys_format.key_bytes(data, key_decoder), narrow=narrow, spread=spread_binary)


def _read_headers(store, headers_format, obj: ArchivedObject, narrow: Any = None) -> _HeaderColumns:
    """The ``.headers`` side file's headers (keys checked as UTF-8 once, values as UTF-8 bytes, or None)."""
    import pyarrow as pa

    def decode(data: bytes) -> _HeaderColumns:
        import numpy as np

        cols = headers_format.header_columns(data)
        if cols is None:
            offsets, keys, values = [0], [], []
            for hs in headers_format.read(io.BytesIO(data), RecordView.HEADERS):
                for hk, hv in hs:
                    keys.append(hk.encode("utf-8"))
                    values.append(None if hv is None else hv.encode("utf-8"))
                offsets.append(len(keys))
            cols = (np.asarray(offsets, np.int64), pa.array(keys, pa.binary()), pa.array(values, pa.binary()))
        # the keys as an Arrow string array: UTF-8 checked in one pass (pa.ArrowInvalid is a ValueError)
        return _HeaderColumns(cols[0], cols[1].cast(pa.string()), cols[2])

    def spread(h: _HeaderColumns, held: Any, n: int) -> _HeaderColumns:
        from lakesink.executor.blockcut import spread_headers

        return _HeaderColumns(*spread_headers(h, held, n))

    return _decode_view(store, headers_format, obj, RecordView.HEADERS, decode, lambda h: len(h.offsets) - 1,
                        narrow=narrow, spread=spread)
