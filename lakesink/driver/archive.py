"""Reading the archive back through the manifest (never by listing the bucket).

Each committed object is read at the ETag (and version id) the manifest recorded, so an object a
zombie writer replaced after the commit fails loudly instead of returning other data. Orphans
are invisible here by construction: only manifest rows are read.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

from lakesink.objects.formats.base import RecordView


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
        get = row.__getitem__ if isinstance(row, Mapping) else (lambda k: getattr(row, k))
        sides = tuple((s if isinstance(s, Mapping) else s.asDict()) for s in (get("side_files") or []))
        return cls(get("topic"), get("kafka_partition"), get("object_key"), get("etag"), get("version_id"),
                   get("first_offset"), get("last_offset"), get("record_count"), sides)

    def side(self, view: str) -> Mapping[str, Any] | None:
        return next((s for s in self.side_files if s["view"] == view), None)


def read_object(store, fmt, obj: ArchivedObject, view: RecordView = RecordView.VALUE) -> list[Any]:
    """Values (or keys / header lists) of one committed object, verified against its ETag."""
    if view is RecordView.VALUE:
        key, etag, version = obj.object_key, obj.etag, obj.version_id
    else:
        side = obj.side(view.value)
        if side is None:
            raise LookupError(f"{obj.object_key}: no {view.value} side file in the manifest")
        key, etag, version = side["key"], side["etag"], side.get("version_id")
    data = store.read(key, etag=etag, version_id=version)
    values = list(fmt.read(io.BytesIO(data), view))
    if len(values) != obj.record_count:
        raise ValueError(f"{store.uri(key)}: holds {len(values)} records, the manifest says {obj.record_count}")
    return values


def iter_objects(rows: Iterable[Any]) -> Iterator[ArchivedObject]:
    """Object rows in (topic, partition, first offset) order; advance/skipped rows are dropped."""
    objs = [ArchivedObject.from_row(r) for r in rows
            if (r["kind"] if isinstance(r, Mapping) else r.kind) == "object"]
    yield from sorted(objs, key=lambda o: (o.topic, o.kafka_partition, o.first_offset))
