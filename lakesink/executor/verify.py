"""The task body of ``lakesink verify``: each object of a group checked against its manifest row.

For every object: its value object and each side file exist with the ETag and size the manifest recorded (one
HEAD each); with ``deep``, its records are read back and counted (:func:`lakesink.executor.readback`'s reader
checks the ETag, the record count and that the side files hold as many entries as the object), and an object an
erase rewrote holds no record at an offset it erased (``erased-record-present``). One JSON row per
object: ``{"object_key", "topic", "kafka_partition", "records", "side_files", "faults": [[kind, detail], ...]}``.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from lakesink.executor.archive_tasks import ObjectReader, arrow_record_schema
from lakesink.executor.readback import ArchivedObject
from lakesink.store import strip_etag

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from lakesink.wiring import TaskParts

__all__ = ["VERIFY_DDL", "check_object", "verify_task"]

VERIFY_DDL = "row string"


def _head_faults(store: Any, key: str, etag: str | None, size: int | None, what: str) -> list[list[str]]:
    """Faults of one stored object against what the manifest recorded (``what``: ``object`` or a side file's view)."""
    info = store.head(key)
    name = "object" if what == "object" else "side-file"
    if info is None:
        return [[f"missing-{name}", f"{store.uri(key)}: not in the store ({what})"]]
    out = []
    if etag and strip_etag(info.etag) != strip_etag(etag):
        out.append([f"{name}-etag-mismatch", f"{store.uri(key)}: ETag {info.etag} where the manifest recorded "
                                             f"{etag} ({what}: replaced or rewritten since it was committed)"])
    if size is not None and info.size != int(size):
        out.append([f"{name}-size-mismatch", f"{store.uri(key)}: {info.size} bytes where the manifest recorded "
                                             f"{size} ({what})"])
    return out


def check_object(reader: ObjectReader, obj: ArchivedObject, deep: bool, schema: "pa.Schema | None" = None,
                 erased: "list[tuple[int, int]] | None" = None) -> dict[str, Any]:
    """One object's verification row (see the module docstring). ``erased``: the offset runs erases removed from
    this object (``erased`` manifest rows of its key): with ``deep``, a record at one of them is a fault."""
    from lakesink.errors import LakesinkError

    # an object of tombstones only has side files and no value object (behavior.on.null.values=write)
    faults = [] if obj.value_omitted else _head_faults(reader.store, obj.object_key, obj.etag, obj.size_bytes,
                                                       "object")
    for side in obj.side_files:
        view = str(side.get("view") or "side file")
        if not side.get("key"):
            faults.append(["side-file-entry", f"{obj.object_key}: the {view} side file entry has no key"])
            continue
        faults += _head_faults(reader.store, side["key"], side.get("etag"), side.get("size_bytes"), view)
    records = None
    if deep and not faults:  # a missing or replaced object is named above; reading it would say less
        try:
            batch = reader.batch(obj, schema or arrow_record_schema())
            records = 0 if batch is None else batch.num_rows
            if erased and batch is not None:
                back = sorted({o for o in batch.column(2).to_pylist() if o is not None
                               and any(a <= o <= b for a, b in erased)})
                if back:
                    faults.append(["erased-record-present",
                                   f"{reader.store.uri(obj.object_key)}: holds records at offsets "
                                   f"{', '.join(map(str, back[:20]))} that an erase removed"])
        except LakesinkError as e:  # count, decode, side-file and store errors: the reader's own line
            faults.append(["unreadable", str(e)])
    return {"object_key": obj.object_key, "topic": obj.topic, "kafka_partition": obj.kafka_partition,
            "records": records, "side_files": len(obj.side_files), "faults": faults}


def verify_task(ids: Iterable[int], groups: list[list[ArchivedObject]], parts: "TaskParts",
                deep: bool, erased: "dict[str, list[tuple[int, int]]] | None" = None) -> Iterator["pa.RecordBatch"]:
    """For each id, the verification rows of ``groups[id]``'s objects (one Arrow batch per group). ``erased``: per
    object key, the offset runs erases removed from it."""
    import pyarrow as pa

    reader = ObjectReader(parts)
    schema = arrow_record_schema()
    erased = erased or {}
    for i in ids:
        rows = [json.dumps(check_object(reader, obj, deep, schema, erased.get(obj.object_key)))
                for obj in groups[i]]
        if rows:
            yield pa.RecordBatch.from_pydict({"row": rows})
