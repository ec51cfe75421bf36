"""Typed manifest rows: the one place a row of the manifest is defined and built.

:class:`ManifestRow`'s fields are the Delta table's columns, in table order (:data:`COLUMNS` carries their
SQL types and comments; ``schemas/manifest.sql`` is generated from it and a test checks all three agree).
Rows are immutable; every kind has one builder here: :func:`object_row` (an archived object and its side
files), :func:`advance_row` (a range without an object: transaction markers, compaction gaps, ignored
tombstones), :func:`skipped_row` (a range lost to retention, skipped on request), and the two note kinds that are
not links of the offset chain: :func:`deadletter_row` (records sent to the dead-letter topic) and
:func:`filtered_row` (offsets a transform dropped inside objects' spans); and :func:`expired_row`, the tombstone of
an object deleted by retention (:func:`live_objects`: the object rows no tombstone supersedes). The commit stamps the
provenance fields (``job``, ``batch_id``, ``run_id``, ``committed_at``) with :meth:`ManifestRow.stamped`.

Rows travel from executors to the driver as JSON (:meth:`ManifestRow.to_json` / :meth:`from_json`):
timestamps as epoch milliseconds, side files as objects.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

# (name, Spark SQL type, nullable, comment). Order is the table's column order.
COLUMNS: list[tuple[str, str, bool, str]] = [
    ("job", "STRING", False, "job name (config `name`)"),
    ("topic", "STRING", False, "Kafka topic"),
    ("kafka_partition", "INT", False, "Kafka partition"),
    ("kind", "STRING", False, "object | advance (range with no object) | skipped (lost to retention, allowed explicitly) | deadletter (records sent to the dead-letter topic: a note, not a range of the chain) | filtered (offsets a transform dropped inside objects' spans: a note, not a range of the chain) | expired (an object deleted by retention: a tombstone of its object row, a note, not a range of the chain | erased (records an erase removed from an object it rewrote under the same key: a tombstone of the old object row, a note inside the new row's span) | erasing (an erase's intent: its staged rewrites, a note no view reads)"),
    ("range_start", "BIGINT", False, "first Kafka offset of the commit group (chains: previous range_end + 1)"),
    ("range_end", "BIGINT", False, "last Kafka offset of the commit group"),
    ("first_offset", "BIGINT", True, "offset of this object's first record"),
    ("last_offset", "BIGINT", True, "offset of this object's last record"),
    ("record_count", "BIGINT", False, "records in this object (0 for advance/skipped rows; for a filtered row, the offsets it notes)"),
    ("encoded_partition", "STRING", True, "partitioner output, e.g. partition=0 or year=2026/month=11"),
    ("object_key", "STRING", True, "S3 key of the value object"),
    ("object_uri", "STRING", True, "full URI of the value object"),
    ("keys_key", "STRING", True, "key of the .keys side file (store.kafka.keys)"),
    ("headers_key", "STRING", True, "key of the .headers side file (store.kafka.headers)"),
    ("side_files", "ARRAY<STRUCT<view: STRING, key: STRING, etag: STRING, version_id: STRING, size_bytes: BIGINT>>",
     True, "every side file (keys, headers, block-gzip index) with its etag"),
    ("format", "STRING", True, "avro | json | bytearray | parquet | blockgzip"),
    ("compression", "STRING", True, "codec or compression of the value object"),
    ("size_bytes", "BIGINT", True, "size of the value object"),
    ("etag", "STRING", True, "ETag of the value object (readers verify it)"),
    ("version_id", "STRING", True, "S3 version id on versioned buckets"),
    ("min_timestamp", "TIMESTAMP", True, "smallest Kafka record timestamp in the object"),
    ("max_timestamp", "TIMESTAMP", True, "largest Kafka record timestamp in the object"),
    ("schema_subject", "STRING", True, "Schema Registry subject of the value schema"),
    ("schema_id", "INT", True, "Schema Registry id of the value schema"),
    ("schema_version", "INT", True, "Schema Registry version of the value schema"),
    ("schema_fingerprint", "STRING", True, "fingerprint of the value schema's canonical form"),
    ("kafka_cluster_id", "STRING", True, "Kafka cluster id at commit (resume refuses another cluster)"),
    ("topic_id", "STRING", True, "Kafka topic id at commit (resume refuses a recreated topic)"),
    ("note", "STRING", True, "why a skipped/advance row exists; a deadletter row's count, topic, offsets and first error"),
    ("batch_id", "BIGINT", False, "the job's batch number (= Delta txnVersion)"),
    ("run_id", "STRING", False, "one id per process run"),
    ("committed_at", "TIMESTAMP", False, "driver time of the commit"),
]

COLUMN_NAMES = [c[0] for c in COLUMNS]

OBJECT, ADVANCE, SKIPPED, DEADLETTER, FILTERED = "object", "advance", "skipped", "deadletter", "filtered"
#: An object deleted by retention (``lakesink expire``): a tombstone superseding its object row.
EXPIRED = "expired"
#: Records removed from an object by ``lakesink erase`` (the object was rewritten without them under the same key):
#: a tombstone of the old object row, carrying the erased offsets; the rewritten object has a new object row.
ERASED = "erased"
#: The intent of an erase (its staged rewrites, committed before any object is replaced): a note, not a tombstone
#: and not a range of the chain (:mod:`lakesink.driver.erase`).
ERASING = "erasing"
#: Kinds that supersede an object row of the same job, topic, partition, key and ETag (:func:`live_objects`).
TOMBSTONE_KINDS = (EXPIRED, ERASED)
#: How the ``note`` of an object row an erase rewrote starts (such an object may hold no record any more).
REWRITTEN_NOTE = "rewritten by lakesink erase"
#: Kinds whose [range_start, range_end] are links of a partition's offset chain (a deadletter or filtered row only
#: notes offsets that lie inside the chain's object or advance ranges of the same batch).
CHAIN_KINDS = (OBJECT, ADVANCE, SKIPPED)
#: The note of an object row whose records are all tombstones (``behavior.on.null.values=write``): as Confluent's
#: sink does, no value object is written (``object_key`` names the key it would have, which does not exist), only
#: its side files (keys, headers, record metadata) under the ``tombstone.encoded.partition`` directory.
TOMBSTONES_NOTE = "tombstones: no value object (behavior.on.null.values=write)"
_TIMESTAMPS = ("min_timestamp", "max_timestamp", "committed_at")


@dataclass(frozen=True)
class SideFile:
    """A side file of an object (``keys``, ``headers``, Block-GZIP ``index``): the struct in ``side_files``."""

    view: str
    key: str
    etag: str | None
    version_id: str | None
    size_bytes: int


@dataclass(frozen=True)
class ManifestRow:
    """One manifest row; the fields are the table's columns, in order (see :data:`COLUMNS`)."""

    job: str | None
    topic: str
    kafka_partition: int
    kind: str
    range_start: int
    range_end: int
    first_offset: int | None = None
    last_offset: int | None = None
    record_count: int = 0
    encoded_partition: str | None = None
    object_key: str | None = None
    object_uri: str | None = None
    keys_key: str | None = None
    headers_key: str | None = None
    side_files: tuple[SideFile, ...] | None = None
    format: str | None = None
    compression: str | None = None
    size_bytes: int | None = None
    etag: str | None = None
    version_id: str | None = None
    min_timestamp: dt.datetime | None = None
    max_timestamp: dt.datetime | None = None
    schema_subject: str | None = None
    schema_id: int | None = None
    schema_version: int | None = None
    schema_fingerprint: str | None = None
    kafka_cluster_id: str | None = None
    topic_id: str | None = None
    note: str | None = None
    batch_id: int | None = None
    run_id: str | None = None
    committed_at: dt.datetime | None = field(default=None)

    def keys(self) -> list[str]:
        """The value object's key and every side file's key (empty for advance/skipped rows)."""
        out = [self.object_key] if self.object_key else []
        return out + [s.key for s in self.side_files or ()]

    def stamped(self, job: str, batch_id: int, run_id: str, committed_at: dt.datetime) -> "ManifestRow":
        """This row with its provenance set (what the commit writes)."""
        return dataclasses.replace(self, job=job, batch_id=batch_id, run_id=run_id, committed_at=committed_at)

    def with_written(self, key: str, etag: str, version_id: str | None, size: int) -> "ManifestRow":
        """This row with the object (or side file) at ``key`` recorded as ``etag``/``version_id``/``size``."""
        if key == self.object_key:
            return dataclasses.replace(self, etag=etag, version_id=version_id, size_bytes=size)
        sides = tuple(dataclasses.replace(s, etag=etag, version_id=version_id, size_bytes=size) if s.key == key else s
                      for s in self.side_files or ())
        return dataclasses.replace(self, side_files=sides)

    def as_tuple(self) -> tuple:
        """Column values in table order (side files as a list of struct tuples: a Spark Connect session's
        ``createDataFrame`` takes an array only as a list), for ``createDataFrame``."""
        return tuple(
            [dataclasses.astuple(s) for s in v] if name == "side_files" and v is not None else v
            for name, v in ((f.name, getattr(self, f.name)) for f in dataclasses.fields(self)))

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict: timestamps as epoch milliseconds, side files as dicts."""
        out = dataclasses.asdict(self)
        for k in _TIMESTAMPS:
            if out[k] is not None:
                out[k] = to_ms(out[k])
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ManifestRow":
        values = dict(data)
        for k in _TIMESTAMPS:
            if values.get(k) is not None:
                values[k] = _from_ms(values[k])
        if values.get("side_files") is not None:
            values["side_files"] = tuple(SideFile(**s) for s in values["side_files"])
        return cls(**values)


def object_row(topic: str, partition: int, range_start: int, range_end: int, *, first_offset: int, last_offset: int,
               record_count: int, encoded_partition: str, object_key: str, object_uri: str,
               side_files: tuple[SideFile, ...], format: str, compression: str | None, size_bytes: int,
               etag: str | None, version_id: str | None, min_timestamp_ms: int | None, max_timestamp_ms: int | None,
               schema: Any = None, kafka_cluster_id: str | None = None, topic_id: str | None = None,
               note: str | None = None) -> ManifestRow:
    """The row of an archived object. ``schema``: the value schema (subject/id/version/fingerprint), or None;
    ``note``: :data:`TOMBSTONES_NOTE` for an object of tombstones only (no value object)."""
    return ManifestRow(
        job=None, topic=topic, kafka_partition=partition, kind=OBJECT, range_start=range_start, range_end=range_end,
        first_offset=first_offset, last_offset=last_offset, record_count=record_count,
        encoded_partition=encoded_partition, object_key=object_key, object_uri=object_uri,
        keys_key=next((s.key for s in side_files if s.view == "keys"), None),
        headers_key=next((s.key for s in side_files if s.view == "headers"), None),
        side_files=side_files, format=format, compression=compression, size_bytes=size_bytes, etag=etag,
        version_id=version_id,
        min_timestamp=None if min_timestamp_ms is None else _from_ms(min_timestamp_ms),
        max_timestamp=None if max_timestamp_ms is None else _from_ms(max_timestamp_ms),
        schema_subject=getattr(schema, "subject", None), schema_id=getattr(schema, "id", None),
        schema_version=getattr(schema, "version", None), schema_fingerprint=getattr(schema, "fingerprint", None),
        kafka_cluster_id=kafka_cluster_id, topic_id=topic_id, note=note)


def value_omitted(row: "Mapping[str, Any] | ManifestRow") -> bool:
    """Whether object row ``row`` (a dict of columns or a :class:`ManifestRow`) has no value object: its records
    are all tombstones."""
    note = row.get("note") if isinstance(row, Mapping) else row.note
    return note == TOMBSTONES_NOTE


def object_files(row: Any) -> list[tuple[str, str | None, str | None]]:
    """``(key, etag, version_id)`` of each file an object row has stored: its value object (none for tombstones
    only, :func:`value_omitted`) and each side file. ``row``: a dict of columns, a :class:`ManifestRow`, or any
    object with those attributes (a reader's ``ArchivedObject``)."""
    get = row.get if isinstance(row, Mapping) else (lambda k, d=None: getattr(row, k, d))
    omitted = row.value_omitted if hasattr(row, "value_omitted") else value_omitted(row)
    out = [(get("object_key"), get("etag"), get("version_id"))] if get("object_key") and not omitted else []
    for side in get("side_files") or ():
        side = side if isinstance(side, Mapping) else vars(side)
        if side.get("key"):
            out.append((side["key"], side.get("etag"), side.get("version_id")))
    return out


def advance_row(topic: str, partition: int, range_start: int, range_end: int, note: str | None = None, *,
                kafka_cluster_id: str | None = None, topic_id: str | None = None) -> ManifestRow:
    """A range the offsets advance over without an object (markers, compaction gaps, ignored records)."""
    return ManifestRow(job=None, topic=topic, kafka_partition=partition, kind=ADVANCE, range_start=range_start,
                       range_end=range_end, note=note, kafka_cluster_id=kafka_cluster_id, topic_id=topic_id)


def skipped_row(topic: str, partition: int, range_start: int, range_end: int, note: str, *,
                kafka_cluster_id: str | None = None, topic_id: str | None = None) -> ManifestRow:
    """A range deleted by Kafka before it was archived, skipped because the config allows it."""
    return ManifestRow(job=None, topic=topic, kafka_partition=partition, kind=SKIPPED, range_start=range_start,
                       range_end=range_end, note=note, kafka_cluster_id=kafka_cluster_id, topic_id=topic_id)


def expired_row(obj: Mapping[str, Any], note: str) -> ManifestRow:
    """The tombstone of object row ``obj`` (a dict of its columns) deleted by retention (``lakesink expire``): the
    object's own columns (key, ETag, version, side files, offsets, count, timestamps) with kind ``expired``,
    ``[range_start, range_end]`` = the object's ``[first_offset, last_offset]`` and ``note`` = why (it starts with
    ``expired``). The manifest is append-only: the object row stays and this row supersedes it (see
    :func:`live_objects`). Not a link of the offset chain (see :data:`CHAIN_KINDS`): the ``gaps`` view shows its
    range where the ``objects`` view no longer shows the object."""
    sides = obj.get("side_files")
    if sides is not None:
        sides = tuple(s if isinstance(s, SideFile) else SideFile(**dict(s)) for s in sides)
    values = {f.name: obj.get(f.name) for f in dataclasses.fields(ManifestRow)
              if f.name not in ("job", "batch_id", "run_id", "committed_at")}
    values.update(job=None, kind=EXPIRED, range_start=obj["first_offset"], range_end=obj["last_offset"],
                  side_files=sides, note=note)
    for k in ("min_timestamp", "max_timestamp"):
        t = values[k]
        if t is not None and t.tzinfo is not None:
            values[k] = t.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return ManifestRow(**values)


def erase_note(offsets: list[int], predicate: str) -> str:
    """An ``erased`` row's ``note``: how many records at which offsets, and the predicate (after `` where ``; the
    ``erasures`` view's ``predicate``; :func:`erased_offsets` reads the offsets back)."""
    runs = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in offset_runs(sorted(set(offsets))))
    n = len(set(offsets))
    return f"erased {n} record{'s' if n != 1 else ''} at offsets {runs} where {predicate}"


def erased_offsets(note: str | None) -> list[tuple[int, int]]:
    """The offset runs an ``erased`` row's note names (:func:`erase_note`), as inclusive ``(first, last)`` pairs."""
    if not note or " at offsets " not in note:
        return []
    text = note.split(" at offsets ", 1)[1].split(" where ", 1)[0]
    out = []
    for part in text.split(", "):
        a, _, b = part.partition("-")
        out.append((int(a), int(b or a)))
    return out


def erased_row(obj: Mapping[str, Any], offsets: list[int], predicate: str) -> ManifestRow:
    """The tombstone of object row ``obj`` whose records at ``offsets`` an erase removed (the object was rewritten
    without them, under the same key: its new row is :func:`rewritten_row`): the old object's key, ETag, version,
    side files (what the erase deletes on a versioned bucket), kind ``erased``, ``[range_start, range_end]`` and
    ``[first_offset, last_offset]`` = the first and last erased offset, ``record_count`` = how many were erased,
    ``note`` = :func:`erase_note`. Not a link of the offset chain: the erased offsets lie inside the rewritten
    object's span (it keeps the old span), as a ``filtered`` row's do."""
    base = expired_row(obj, erase_note(offsets, predicate))
    lo, hi = min(offsets), max(offsets)
    return dataclasses.replace(base, kind=ERASED, range_start=lo, range_end=hi, first_offset=lo, last_offset=hi,
                               record_count=len(set(offsets)))


def rewritten_row(obj: Mapping[str, Any], *, etag: str | None, version_id: str | None, size_bytes: int,
                  record_count: int, side_files: tuple[SideFile, ...], min_timestamp_ms: int | None,
                  max_timestamp_ms: int | None, note: str) -> ManifestRow:
    """The row of an object an erase rewrote under its key: ``obj``'s columns (commit range, span
    ``[first_offset, last_offset]``, format, schema) with the new ETag, version, size, record count, side files and
    record timestamps. The span stays the old one: the erased offsets inside it are the ``erased`` row's."""
    base = expired_row(obj, note)
    return dataclasses.replace(
        base, kind=OBJECT, range_start=obj["range_start"], range_end=obj["range_end"], first_offset=obj["first_offset"],
        last_offset=obj["last_offset"], etag=etag, version_id=version_id, size_bytes=size_bytes,
        record_count=record_count, side_files=side_files,
        keys_key=next((s.key for s in side_files if s.view == "keys"), None),
        headers_key=next((s.key for s in side_files if s.view == "headers"), None),
        min_timestamp=None if min_timestamp_ms is None else _from_ms(min_timestamp_ms),
        max_timestamp=None if max_timestamp_ms is None else _from_ms(max_timestamp_ms))


def erasing_row(obj: Mapping[str, Any], note: str) -> ManifestRow:
    """The intent row of an erase of object row ``obj`` (its identity: key and ETag) whose rewrite is staged:
    ``note`` is the staged writes as JSON (:mod:`lakesink.driver.erase`). A note, never read as an object."""
    return dataclasses.replace(expired_row(obj, note), kind=ERASING)


def tombstone_identity(row: Mapping[str, Any]) -> tuple:
    """What ties an object row to the tombstone (``expired``) row that supersedes it: job, topic, partition, key,
    ETag (a key rewritten under a new ETag is another object)."""
    return (row.get("job"), row.get("topic"), row.get("kafka_partition"), row.get("object_key"), row.get("etag") or "")


def live_objects(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The object rows among ``rows`` (dicts of columns) that no tombstone supersedes: what the archive holds.
    The one Python rule; :data:`lakesink.manifest.views.LIVE_OBJECTS` is the same rule in SQL."""
    rows = list(rows)
    gone = {tombstone_identity(r) for r in rows if r.get("kind") in TOMBSTONE_KINDS}
    return [r for r in rows if r.get("kind") == OBJECT and tombstone_identity(r) not in gone]


def deadletter_row(topic: str, partition: int, offsets: list[int], dlq_topic: str, first_error: str, *,
                   kafka_cluster_id: str | None = None, topic_id: str | None = None) -> ManifestRow:
    """Records of one partition a batch sent to the dead-letter topic (``errors.tolerance=all``): their first and
    last offset, and in ``note`` their count, the topic, the offsets (the first 50) and the first error. Not a
    link of the offset chain: the offsets lie inside the batch's object/advance ranges (see :data:`CHAIN_KINDS`)."""
    offsets = sorted(offsets)
    shown = ", ".join(map(str, offsets[:50])) + (f", … ({len(offsets) - 50} more)" if len(offsets) > 50 else "")
    n = len(offsets)
    note = (f"{n} record{'s' if n != 1 else ''} sent to dead-letter topic {dlq_topic!r} (offsets {shown}): "
            f"{first_error[:500]}")
    return ManifestRow(job=None, topic=topic, kafka_partition=partition, kind=DEADLETTER, range_start=offsets[0],
                       range_end=offsets[-1], first_offset=offsets[0], last_offset=offsets[-1], note=note,
                       kafka_cluster_id=kafka_cluster_id, topic_id=topic_id)


def filtered_row(topic: str, partition: int, offsets: list[int], *, kafka_cluster_id: str | None = None,
                 topic_id: str | None = None) -> ManifestRow:
    """Offsets of one commit group that a transform dropped (``transforms.sql``/``transforms.python``) and that lie
    inside its objects' ``[first_offset, last_offset]`` spans, where the ``gaps`` view's holes cannot show them:
    their first and last offset, their number in ``record_count`` and, in ``note``, their runs (the first 50).
    Not a link of the offset chain (see :data:`CHAIN_KINDS`)."""
    offsets = sorted(offsets)
    runs = offset_runs(offsets)
    shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:50])
    if len(runs) > 50:
        shown += f", … ({len(runs) - 50} more runs)"
    n = len(offsets)
    note = (f"{n} offset{'s' if n != 1 else ''} a transform dropped inside archived objects' spans "
            f"({len(runs)} run{'s' if len(runs) != 1 else ''}): {shown}")
    return ManifestRow(job=None, topic=topic, kafka_partition=partition, kind=FILTERED, range_start=offsets[0],
                       range_end=offsets[-1], first_offset=offsets[0], last_offset=offsets[-1], record_count=n,
                       note=note, kafka_cluster_id=kafka_cluster_id, topic_id=topic_id)


def offset_runs(offsets: list[int]) -> list[tuple[int, int]]:
    """Ascending distinct ``offsets`` as runs of consecutive offsets: ``[1, 2, 3, 7]`` → ``[(1, 3), (7, 7)]``."""
    runs: list[tuple[int, int]] = []
    for o in offsets:
        if runs and o == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], o)
        elif not runs or o > runs[-1][1]:
            runs.append((o, o))
    return runs


_EPOCH = dt.datetime(1970, 1, 1)


def to_ms(t: dt.datetime) -> int:
    """Epoch milliseconds of a manifest timestamp (naive UTC, as Spark returns it, or timezone-aware)."""
    naive = t if t.tzinfo is None else t.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return (naive - _EPOCH) // dt.timedelta(milliseconds=1)


def _from_ms(ms: int) -> dt.datetime:
    """Naive UTC datetime (Spark's TIMESTAMP in a UTC session) from epoch milliseconds."""
    return _EPOCH + dt.timedelta(milliseconds=ms)
