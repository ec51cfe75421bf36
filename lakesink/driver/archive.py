"""Reading the archive back through the manifest (never by listing the bucket).

Each committed object is read at the ETag (and version id) the manifest recorded, so an object a
zombie writer replaced after the commit fails loudly instead of returning other data. Orphans
are invisible here by construction: only manifest rows are read.

Every failure is a :class:`lakesink.errors.ArchiveReadError` (a bad manifest row, a missing side file, a
record count that disagrees, undecodable bytes) or the store's own :class:`lakesink.errors.StoreError`
(missing object, :class:`~lakesink.errors.ObjectChangedError`); no bare ValueError/LookupError escapes.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

from lakesink.errors import (ArchiveReadError, CorruptObjectError, LakesinkError, ManifestRowError, MissingSideFileError,
                             RecordCountMismatchError)
from lakesink.objects.formats.base import RecordView

FIELDS = ("topic", "kafka_partition", "object_key", "etag", "version_id", "first_offset", "last_offset",
          "record_count")


def _getter(row: Any):
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


@dataclass(frozen=True)
class ArchivedObject:
    """The parts of a manifest row a reader needs (works for Spark Rows and dicts)."""

    topic: str
    kafka_partition: int
    object_key: str
    etag: str | None
    version_id: str | None
    first_offset: int
    last_offset: int
    record_count: int
    side_files: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_row(cls, row: Any) -> "ArchivedObject":
        get = _getter(row)
        values = [get(f) for f in FIELDS]
        try:
            sides = tuple((s if isinstance(s, Mapping) else s.asDict()) for s in (get("side_files", None) or []))
        except (AttributeError, TypeError) as e:
            raise ManifestRowError(f"manifest row {values[2]!r}: bad side_files: {e}") from None
        return cls(*values, sides)

    def side(self, view: str) -> Mapping[str, Any] | None:
        """The side-file entry (``key``, ``etag``, ``version_id``) of ``view`` ("keys"/"headers"), if recorded."""
        return next((s for s in self.side_files if s.get("view") == view), None)


def read_object(store, fmt, obj: ArchivedObject, view: RecordView = RecordView.VALUE) -> list[Any]:
    """Values (or keys / header lists) of one committed object, verified against its ETag.

    Raises MissingSideFileError, CorruptObjectError, RecordCountMismatchError (all ArchiveReadError) or the
    store's StoreError / ObjectChangedError."""
    try:
        view = RecordView(view)
    except ValueError:
        raise ArchiveReadError(f"{obj.object_key}: unknown record view {view!r} "
                               f"(one of {', '.join(v.value for v in RecordView)})") from None
    if view is RecordView.VALUE:
        key, etag, version = obj.object_key, obj.etag, obj.version_id
    else:
        side = obj.side(view.value)
        if side is None:
            raise MissingSideFileError(f"{obj.object_key}: no {view.value} side file in the manifest")
        if not side.get("key"):
            raise ManifestRowError(f"{obj.object_key}: the {view.value} side file entry has no key: {dict(side)!r}")
        key, etag, version = side["key"], side.get("etag"), side.get("version_id")
    data = store.read(key, etag=etag, version_id=version)
    try:
        values = list(fmt.read(io.BytesIO(data), view))
    except LakesinkError:
        raise
    except (ValueError, LookupError, EOFError) as e:  # json/avro/parquet decoders raise these
        raise CorruptObjectError(f"{store.uri(key)}: cannot be read as {getattr(fmt, 'name', fmt)!s}: "
                                 f"{type(e).__name__}: {e}") from e
    if len(values) != obj.record_count:
        raise RecordCountMismatchError(f"{store.uri(key)}: holds {len(values)} records, "
                                       f"the manifest says {obj.record_count}")
    return values


def iter_objects(rows: Iterable[Any]) -> Iterator[ArchivedObject]:
    """Object rows in (topic, partition, first offset) order; advance/skipped rows are dropped."""
    objs = [ArchivedObject.from_row(r) for r in rows if _getter(r)("kind") == "object"]
    yield from sorted(objs, key=lambda o: (o.topic, o.kafka_partition, o.first_offset))
