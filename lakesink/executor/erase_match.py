"""The task body of ``lakesink erase``'s plan: which records of a group of objects a ``--where`` selects.

:func:`erase_plan_task` runs where the job's runner runs tasks (local workers or Spark; the driver itself when
there is no runner). Each task gets groups of the job's live objects (the driver pruned them by the manifest:
:mod:`lakesink.driver.erase_plan`) and returns one small JSON row per group: how many objects and records it
read, and per object the predicate matched its index, the erased offsets and what the rewrite needs (the positions
kept, every record's offset, timestamp and timestamp type); nothing for the objects it did not match.

**Only what the predicate names is read.** :func:`referenced_columns` finds the record columns the predicate can
reference (every identifier in it, a conservative superset: a field name after a lambda's parameter, ``h.key``,
is the one identifier it leaves out); a record-metadata side file gives the offsets and timestamps (or nothing is
read for them: contiguous offsets), the keys and headers side files are read only for ``key`` / ``headers``, the
value object only for ``value`` / ``value_bytes`` (an object read without its values is read as the readers read
a tombstones-only object: ``value_omitted``, no value object fetched). The columns left unread are still there,
all null, so the predicate binds, fails and reads exactly as over the full records (the same error lines).

**Many objects per query.** The records of up to :data:`CHUNK_RECORDS` records' worth of objects are one Arrow
table, evaluated by one query of one locked in-memory DuckDB (``coalesce((predicate), false)`` per record, in
insertion order) and split back per object; the decoded ``value`` column of the chunk is one Arrow array when the
objects' values form one (else each object is evaluated alone, its ``value`` its bytes when its values do not form
an array: as erase always did). The DuckDB holds nothing but these records: a predicate cannot reach anything else.

A :class:`~lakesink.errors.LakesinkError` in a task (a bad predicate, an unreadable object, a store error) is
returned as the group's row (``error``, ``error_class``): the driver raises it again, with its exit code, whatever
runner ran the task.
"""
from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from lakesink.errors import ArchiveQueryError, InvalidArgumentError, LakesinkError
from lakesink.executor.readback import ArchivedObject, read_object, read_record_batch

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from lakesink.wiring import TaskParts

__all__ = ["PLAN_DDL", "PREDICATE_COLUMNS", "CHUNK_RECORDS", "referenced_columns", "PredicateMatcher",
           "erase_plan_task"]

PLAN_DDL = "result string"
#: the record columns a ``--where`` is evaluated over, in the order of the table it sees
PREDICATE_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value_bytes", "headers",
                     "value")
#: records evaluated by one DuckDB query (whole objects: a chunk may hold more when one object does)
CHUNK_RECORDS = 200_000
_BATCH_NAMES = ["topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value_bytes", "headers"]


def referenced_columns(predicate: str) -> frozenset[str]:
    """The :data:`PREDICATE_COLUMNS` ``predicate`` (a checked Spark SQL expression) may read: every identifier
    that names one, anywhere (a struct field, a qualified name or a lambda parameter of that name counts too), but
    a field after a lambda parameter (``h.key`` in ``h -> h.key = 'x'``); all of them for a ``*`` or DuckDB's
    ``columns(...)``. Too many at worst, never too few."""
    from sqlglot import exp, parse_one

    tree = parse_one(predicate, read="spark")
    names: set[str] = set()
    for node in tree.walk():
        if isinstance(node, exp.Star) or (isinstance(node, exp.Anonymous)
                                          and str(node.this).lower() in ("columns", "unpack")):
            return frozenset(PREDICATE_COLUMNS)
        if isinstance(node, exp.Identifier) and not _lambda_field(node):
            names.add(node.name.lower())
    return frozenset(c for c in PREDICATE_COLUMNS if c in names)


def _lambda_field(node: Any) -> bool:
    """Whether identifier ``node`` is the field of a dotted name whose base is a parameter of an enclosing lambda."""
    from sqlglot import exp

    parent = node.parent
    if not isinstance(parent, exp.Dot) or parent.args.get("expression") is not node:
        return False
    base = parent.this
    if not isinstance(base, (exp.Identifier, exp.Column)) or isinstance(base, exp.Column) and base.table:
        return False
    name = base.name.lower()
    up = parent.parent
    while up is not None:
        if isinstance(up, exp.Lambda) and any(p.name.lower() == name for p in up.expressions):
            return True
        up = up.parent
    return False


@dataclasses.dataclass
class _Read:
    """One object's records as the predicate sees them (``table``: :data:`PREDICATE_COLUMNS` but ``value``) and,
    when the predicate names ``value``, its decoded values (None: they form no array)."""

    index: int
    obj: ArchivedObject
    table: Any
    values: list | None


class PredicateMatcher:
    """Evaluates one checked predicate (``predicate``, the Spark SQL text; ``where``, the user's, for errors) over
    objects' records, reading only the files it needs (see the module docstring). ``columns``: the columns to read
    (default :func:`referenced_columns`). Use as a context manager (one DuckDB connection)."""

    def __init__(self, predicate: str, where: str, columns: Iterable[str] | None = None):
        import duckdb
        import pyarrow as pa

        from lakesink.manifest.duck import LOCKDOWN, to_duckdb

        self.predicate, self.where = predicate, where
        self.columns = referenced_columns(predicate) if columns is None else frozenset(columns)
        self.query = to_duckdb(f"SELECT coalesce(({predicate}), false) AS hit FROM records")
        self.check = to_duckdb(f"SELECT ({predicate}) AS p FROM records")
        self.checked = False
        self.scanned_objects = self.scanned_records = 0
        self.con = duckdb.connect(":memory:")
        self.con.register("records", pa.table({"offset": pa.array([], pa.int64())}))
        for statement in LOCKDOWN:
            self.con.execute(statement)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "PredicateMatcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------- reading

    def _read(self, reader: Any, index: int, obj: ArchivedObject, schema: Any) -> _Read | None:
        import pyarrow as pa

        want_value = "value" in self.columns
        # no value object fetched when the predicate names no value: read as a tombstones-only object is read
        view = obj if want_value or "value_bytes" in self.columns or obj.value_omitted else dataclasses.replace(
            obj, value_omitted=True)
        # the values are wanted twice (bytes for the batch, decoded for `value`): the object is fetched once
        store = ReadOnce(reader.store) if want_value else reader.store
        batch = read_record_batch(store, reader.value_format(obj), view, schema,
                                  keys_format=reader.keys_format if "key" in self.columns else None,
                                  headers_format=reader.headers_format if "headers" in self.columns else None,
                                  key_decoder=reader.parts.key_decoder.name,
                                  value_decoder=reader.parts.value_decoder.name)
        self.scanned_objects += 1
        if batch is None or batch.num_rows == 0:
            return None
        self.scanned_records += batch.num_rows
        table = pa.Table.from_batches([batch]).rename_columns(_BATCH_NAMES)
        values = _decoded_values(store, reader.value_format(obj), obj, batch.num_rows) if want_value else None
        return _Read(index, obj, table, values)

    # ---------------------------------------------------------------------------------------------- evaluating

    def _evaluate(self, table: Any) -> Any:
        """Per record of ``table``, whether the predicate selects it (numpy bool array)."""
        import duckdb
        import numpy as np

        from lakesink.manifest.duck import error_line

        try:
            self.con.register("records", table)
            if not self.checked:
                kind = self.con.execute(f"DESCRIBE {self.check}").fetchall()[0][1]
                if kind not in ("BOOLEAN", '"NULL"', "NULL"):
                    raise ArchiveQueryError(f"--where {self.where!r}: is a {kind.lower()}, not a boolean expression "
                                            f"over the records' columns")
                self.checked = True
            hits = self.con.execute(self.query).fetchnumpy()["hit"]
        except duckdb.Error as e:
            raise ArchiveQueryError(f"--where {self.where!r}: {error_line(e)}") from None
        finally:
            self.con.unregister("records")
        return np.asarray(hits, dtype=bool)

    def _masks(self, reads: list[_Read]) -> list[Any]:
        """The predicate's hits per object of ``reads``: one query over all of them when their ``value`` columns
        form one array, else one query per object."""
        import pyarrow as pa

        tables = [r.table for r in reads]
        if "value" in self.columns:
            combined = None
            if all(r.values is not None for r in reads):
                try:
                    combined = pa.array([v for r in reads for v in r.values])
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
                    combined = None
            if combined is None and len(reads) > 1:  # each object alone, its own value column (or its bytes)
                return [m for r in reads for m in self._masks([r])]
            if combined is None:
                (r,) = reads
                column = _value_array(r)
                tables = [r.table.append_column("value", column if column is not None else r.table["value_bytes"])]
            else:
                bounds = _starts([t.num_rows for t in tables])
                tables = [t.append_column("value", combined.slice(a, t.num_rows)) for t, a in zip(tables, bounds)]
        else:  # not named: nulls of the bytes type (the predicate binds as over the full records)
            tables = [t.append_column("value", pa.nulls(t.num_rows, pa.binary())) for t in tables]
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        hits = self._evaluate(table)
        bounds = _starts([t.num_rows for t in tables])
        return [hits[a:a + t.num_rows] for t, a in zip(tables, bounds)]

    def match(self, reader: Any, objects: list[tuple[int, ArchivedObject]]) -> Iterator[dict]:
        """For each of ``objects`` (index, object) the predicate matches, its result (see the module docstring)."""
        from lakesink.executor.archive_tasks import arrow_record_schema

        schema = arrow_record_schema()
        chunk: list[_Read] = []
        held = 0
        for index, obj in objects:
            r = self._read(reader, index, obj, schema)
            if r is None:
                continue
            chunk.append(r)
            held += r.table.num_rows
            if held >= CHUNK_RECORDS:
                yield from self._matched(chunk)
                chunk, held = [], 0
        if chunk:
            yield from self._matched(chunk)

    def _matched(self, reads: list[_Read]) -> Iterator[dict]:
        import numpy as np
        import pyarrow as pa

        from lakesink.objects.formats.metadata import TIMESTAMP_TYPES

        for r, mask in zip(reads, self._masks(reads)):
            if not mask.any():
                continue
            offsets = r.table["offset"].to_pylist()
            hits = sorted({offsets[i] for i in np.flatnonzero(mask).tolist()})
            if r.obj.value_omitted:  # a rewrite would have to keep the file's no-value-object shape: not built
                raise InvalidArgumentError(
                    f"--where {self.where!r} matches {len(hits)} tombstone(s) in {r.obj.object_key}, a file of "
                    f"tombstones only (behavior.on.null.values=write, no value object): erasing tombstones is not "
                    f"supported yet; narrow the predicate (e.g. add AND value_bytes IS NOT NULL); nothing was changed")
            gone = set(hits)
            ts = r.table["timestamp"].cast(pa.int64()).to_pylist()
            yield {"index": r.index, "offsets": hits, "records": r.table.num_rows,
                   "keep": [i for i, o in enumerate(offsets) if o not in gone], "all_offsets": offsets,
                   "timestamps": [None if t is None else t // 1000 for t in ts],
                   "types": [None if t is None else TIMESTAMP_TYPES.index(t) - 1
                             for t in r.table["timestamp_type"].to_pylist()]}


def _starts(sizes: list[int]) -> list[int]:
    out, at = [], 0
    for n in sizes:
        out.append(at)
        at += n
    return out


class ReadOnce:
    """A store whose whole-object reads are each fetched (and checked against their ETag) once: made for one
    object's read, so that its bytes serve every view decoded from them."""

    def __init__(self, store: Any):
        self._store = store
        self._read: dict[tuple, bytes] = {}

    def read(self, key: str, etag: str | None = None, version_id: str | None = None,
             byte_range: Any = None) -> bytes:
        """The store's ``read``; the same answer again when asked for the same whole object."""
        if byte_range is not None:
            return self._store.read(key, etag=etag, version_id=version_id, byte_range=byte_range)
        ask = (key, etag, version_id)
        if ask not in self._read:
            self._read[ask] = self._store.read(key, etag=etag, version_id=version_id)
        return self._read[ask]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _decoded_values(store: Any, fmt: Any, obj: ArchivedObject, n: int) -> list | None:
    """The object's values decoded (dicts for JSON objects, Avro and Parquet records), or None when they cannot be."""
    try:
        values = read_object(store, fmt, obj)
    except (TypeError, ValueError):
        return None
    return values if len(values) == n else None


def _value_array(r: _Read) -> Any:
    """One object's decoded values as one Arrow array, or None when they do not form one (mixed types)."""
    import pyarrow as pa

    if r.values is None:
        return None
    try:
        return pa.array(r.values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        return None


def erase_plan_task(ids: Iterable[int], groups: list[list[tuple[int, ArchivedObject]]], parts: "TaskParts",
                    predicate: str, where: str, columns: frozenset[str] | None = None) -> Iterator["pa.RecordBatch"]:
    """For each id, ``groups[id]`` (pairs of the driver's object index and the object) matched against the
    predicate: one JSON row per group, ``{"id", "scanned_objects", "scanned_records", "matched": [...]}`` or
    ``{"id", "error", "error_class"}`` (see the module docstring)."""
    import pyarrow as pa

    from lakesink.executor.archive_tasks import ObjectReader

    reader = ObjectReader(parts)
    for i in ids:
        with PredicateMatcher(predicate, where, columns) as matcher:
            try:
                matched = list(matcher.match(reader, groups[i]))
                out: dict[str, Any] = {"id": i, "scanned_objects": matcher.scanned_objects,
                                       "scanned_records": matcher.scanned_records, "matched": matched}
            except LakesinkError as e:
                out = {"id": i, "error": str(e), "error_class": type(e).__name__}
        yield pa.RecordBatch.from_pydict({"result": [json.dumps(out, separators=(",", ":"))]})
