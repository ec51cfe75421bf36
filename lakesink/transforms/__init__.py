"""Record transforms: what Connect's SMTs and the Zooz connector's mappers do, applied before partitioning.

Two forms, set in the config (either or both; SQL runs first):

* ``transforms.sql`` — a DuckDB SQL query over the table ``records`` (one row per Kafka record of an Arrow
  batch: :data:`COLUMNS`), or a bare boolean expression, which means ``SELECT * FROM records WHERE <expr>``.
  Each result row is one output record and must carry ``kafka_offset`` (the input record it came from);
  ``key``, ``value``, ``headers`` and ``timestamp`` it leaves out are the input record's. A row per input
  record keeps it, none drops it, several (``unnest``) make many of one. The SQL sees the raw Kafka bytes,
  before the value decoder: ``decode(value)`` is the UTF-8 text, DuckDB's JSON functions read JSON values.
* ``transforms.python`` — ``package.module:function`` (or ``package.module.function``): called with one
  decoded :class:`Record` (key and value as the decoders give them), returns None (drop), a :class:`Record`
  or an iterable of them. It forces the per-record path (the columnar path never builds records).

Why DuckDB and not Spark SQL: the executors read Kafka themselves (``kafka.reader=direct``) inside a Python
task, where no Spark SQL can run; DuckDB (one thread) runs in that process over the Arrow batch the reader
already has, so both readers and both paths (columnar and per-record) get the same transform. The costs: a
second SQL dialect (the transform is DuckDB SQL, ``lakesink sql`` is Spark SQL), DuckDB on every executor, and
about 10-14 ms of CPU per 10,000-record batch (``bench/transforms.py``: a keep-all query takes JSON archiving
to 0.97x of its records/s and ByteArray's columnar path to 0.45x; a filter that drops half makes JSON 1.8x
faster; one record made many takes the per-record path).

Outputs of one Kafka record share its offset. They stay in one commit group (rotation cuts files only
between Kafka records: :meth:`lakesink.objects.rotation.Rotator.process`), so the offset proof holds: an
object's ``[first_offset, last_offset]`` holds every record made from the Kafka records in it, and a dropped
record still advances the committed offsets and is a row of the ``gaps`` view: outside every object as an
``unarchived`` hole or ``advance`` range, between an object's records in its commit group's ``filtered`` row
(:func:`lakesink.manifest.rows.filtered_row`).

A transform that raises fails the batch (nothing is committed) with a :class:`~lakesink.errors.TransformError`
naming the record (``topic-partition@offset``); for SQL over a batch the failing record is found by
re-running the query on one record at a time.
"""
from __future__ import annotations

import dataclasses
import importlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple

from lakesink.errors import InvalidArgumentError, TransformError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from lakesink.objects.records import SinkRecord

__all__ = ["COLUMNS", "TABLE", "Record", "SqlTransform", "PythonTransform", "Transforms", "TransformSpec", "sql_query",
           "load_callable", "check_sql", "check_python", "dropped_offsets"]

#: The table name the SQL reads.
TABLE = "records"
#: Its columns: ``timestamp`` is the Kafka timestamp (UTC, milliseconds), ``headers`` a list of (key, value).
COLUMNS = ("topic", "kafka_partition", "kafka_offset", "timestamp", "key", "value", "headers")
#: Columns of the Kafka read's Arrow batches that hold a record's data (see lakesink.executor.kafka_reader).
_OUTPUT = {"key": "key", "value": "value", "headers": "headers", "timestamp": "ts"}
#: Extra Arrow columns the Spark read computes from the original value (lakesink.executor.columnar): stale once
#: a transform replaces the value, so dropped then (the batch takes the path that checks values itself).
_VALUE_DERIVED = ("_lakesink_canonical_avro", "_lakesink_decoded")


def sql_query(text: str) -> str:
    """The query ``transforms.sql`` means: itself when it is a query (``SELECT``/``WITH``/``FROM``), else a
    filter ``SELECT * FROM records WHERE (<text>)``."""
    t = text.strip().rstrip(";").strip()
    if not t:
        raise InvalidArgumentError("transforms.sql is empty")
    if re.match(r"(?is)^(select|with|from)\b", t):
        return t
    return f"SELECT * FROM {TABLE} WHERE ({t})"


def _records_table(batch: "pa.RecordBatch", topic: str, partition: int) -> "pa.Table":
    """The ``records`` table of one Arrow batch of the Kafka read (columns it left out are null/empty)."""
    import pyarrow as pa

    n = batch.num_rows
    names = batch.schema.names
    headers_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    col = {name: batch.column(i) for i, name in enumerate(names)}
    return pa.table({
        "topic": col["topic"] if "topic" in col else pa.array([topic] * n, pa.string()),
        "kafka_partition": col["partition"],
        "kafka_offset": col["offset"],
        "timestamp": col["ts"].cast(pa.timestamp("ms", tz="UTC")),
        "key": col["key"] if "key" in col else pa.nulls(n, pa.binary()),
        "value": col["value"],
        "headers": col["headers"] if "headers" in col else pa.array([[]] * n, headers_type),
    })


class SqlTransform:
    """``transforms.sql``: a DuckDB query over each Arrow batch of one Kafka partition."""

    def __init__(self, text: str):
        self.text = text
        self.query = sql_query(text)
        self._con: Any = None

    def __getstate__(self) -> dict:  # shipped to executors in the task closure: the connection is not
        return {"text": self.text, "query": self.query, "_con": None}

    def _run(self, table: "pa.Table") -> "pa.Table":
        if self._con is None:
            try:
                import duckdb
            except ImportError:
                raise InvalidArgumentError("transforms.sql needs the duckdb package on the driver and the "
                                           "executors (a dependency of lakesink: reinstall lakesink there)") from None
            # one thread: a task slot is one core, and a 10,000-row batch gains nothing from more
            self._con = duckdb.connect(config={"threads": 1})
        self._con.register(TABLE, table)
        try:
            return self._con.sql(self.query).to_arrow_table()
        finally:
            self._con.unregister(TABLE)

    def apply(self, batch: "pa.RecordBatch", topic: str, partition: int) -> "pa.RecordBatch":
        """The batch (the Kafka read's layout) of the records the query makes of ``batch``'s, in offset order."""
        table = _records_table(batch, topic, partition)
        try:
            result = self._run(table)
        except Exception as e:  # noqa: BLE001 - any DuckDB error: find the record at fault
            raise self._blame(table, topic, partition, e) from None
        return rebuild(batch, result, topic, partition)

    def _blame(self, table: "pa.Table", topic: str, partition: int, error: Exception) -> TransformError:
        offsets = table.column("kafka_offset").to_pylist()
        for i, off in enumerate(offsets):
            try:
                self._run(table.slice(i, 1))
            except Exception as e:  # noqa: BLE001
                return TransformError(topic, partition, off, f"transforms.sql failed: {_first_line(e)}")
        return TransformError(topic, partition, offsets[0],
                              f"transforms.sql failed on the batch of offsets {offsets[0]}..{offsets[-1]} "
                              f"(no single record fails alone): {_first_line(error)}")


def rebuild(batch: "pa.RecordBatch", result: "pa.Table", topic: str, partition: int) -> "pa.RecordBatch":
    """``result`` (rows naming their input record by ``kafka_offset``) as a batch of the Kafka read's layout:
    columns the result leaves out come from the input record; rows stably sorted by offset."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = result.column_names
    if "kafka_offset" not in names:
        off0 = batch.column(batch.schema.get_field_index("offset"))[0].as_py()
        raise TransformError(topic, partition, off0, f"transforms.sql: the result has no kafka_offset column "
                                                     f"(it has {', '.join(names) or 'none'})")
    in_offsets = batch.column(batch.schema.get_field_index("offset"))
    out_offsets = result.column("kafka_offset").cast(pa.int64())
    if out_offsets.null_count:
        raise TransformError(topic, partition, in_offsets[0].as_py(), "transforms.sql: a row has a null kafka_offset")
    order = pc.sort_indices(out_offsets)  # stable: the outputs of one record keep the query's order
    result = result.take(order)
    out_offsets = result.column("kafka_offset").cast(pa.int64())
    idx = pc.index_in(out_offsets, value_set=in_offsets)
    if idx.null_count:
        bad = pc.filter(out_offsets, pc.is_null(idx))[0].as_py()
        raise TransformError(topic, partition, in_offsets[0].as_py(),
                             f"transforms.sql: a row names kafka_offset {bad}, which is not a record of the batch "
                             f"(offsets {in_offsets[0].as_py()}..{in_offsets[-1].as_py()})")
    moved = None
    if "kafka_partition" in names and pc.any(pc.not_equal(result.column("kafka_partition").cast(pa.int64()),
                                                          pa.scalar(partition, pa.int64()))).as_py():
        moved = "kafka_partition"
    if "topic" in names and pc.any(pc.not_equal(result.column("topic").cast(pa.string()),
                                                pa.scalar(topic, pa.string()))).as_py():
        moved = "topic"
    if moved:
        raise TransformError(topic, partition, in_offsets[0].as_py(),
                             f"transforms.sql: a row changes {moved}; a transform cannot move records")
    cols, fields = [], []
    value_replaced = "value" in names
    for i, field in enumerate(batch.schema):
        if field.name in _VALUE_DERIVED and value_replaced:
            continue
        src = next((c for c, b in _OUTPUT.items() if b == field.name and c in names), None)
        if src is None:
            arr = batch.column(i).take(idx)
        else:
            arr = result.column(src).combine_chunks()
            if src == "timestamp":
                arr = arr.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
            try:
                arr = arr.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise TransformError(topic, partition, in_offsets[0].as_py(),
                                     f"transforms.sql: column {src} is {arr.type}, the record's {src} is "
                                     f"{field.type} ({_first_line(e)})") from None
        cols.append(arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr)
        fields.append(field)
    return pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields))


@dataclass(frozen=True)
class Record:
    """One record as ``transforms.python`` sees and returns it: key and value decoded (as the decoders give
    them), ``headers`` a tuple of (name, bytes), ``timestamp`` epoch ms. ``replace(value=...)`` makes an
    output; topic, partition and offset are the input's and cannot change."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: Any
    value: Any
    headers: tuple = ()

    def replace(self, **changes: Any) -> "Record":
        return dataclasses.replace(self, **changes)


def load_callable(path: str) -> Callable[[Record], Any]:
    """The function ``package.module:function`` (or ``package.module.function``) names."""
    mod, sep, name = path.partition(":")
    if not sep:
        mod, _, name = path.rpartition(".")
    if not mod or not name:
        raise InvalidArgumentError(f"transforms.python {path!r}: expected package.module:function")
    try:
        fn = getattr(importlib.import_module(mod), name)
    except ImportError as e:
        raise InvalidArgumentError(f"transforms.python {path!r}: cannot import {mod}: {e}") from None
    except AttributeError:
        raise InvalidArgumentError(f"transforms.python {path!r}: module {mod} has no {name!r}") from None
    if not callable(fn):
        raise InvalidArgumentError(f"transforms.python {path!r} is not callable")
    return fn


class PythonTransform:
    """``transforms.python``: a function of one decoded record, run on the per-record path."""

    def __init__(self, path: str):
        self.path = path
        self._fn: Callable[[Record], Any] | None = None

    def __getstate__(self) -> dict:
        return {"path": self.path, "_fn": None}

    def map_records(self, records: "list[SinkRecord]") -> "list[SinkRecord]":
        """The records the function makes of ``records`` (in order; the outputs of one share its offset)."""
        fn = self._fn = self._fn or load_callable(self.path)
        out: list = []
        for r in records:
            rec = Record(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, r.headers)
            try:
                res = fn(rec)
                made = () if res is None else (res,) if isinstance(res, Record) else tuple(res)
            except Exception as e:  # noqa: BLE001 - the user's code: name the record
                raise TransformError(r.topic, r.partition, r.offset,
                                     f"transforms.python {self.path} raised {type(e).__name__}: {e}") from e
            for m in made:
                out.append(self._sink_record(r, m))
        return out

    def _sink_record(self, src: "SinkRecord", m: Any) -> "SinkRecord":
        if not isinstance(m, Record):
            raise TransformError(src.topic, src.partition, src.offset,
                                 f"transforms.python {self.path} returned {type(m).__name__}, expected a "
                                 f"lakesink.transforms.Record (or None, or an iterable of them)")
        if (m.topic, m.partition, m.offset) != (src.topic, src.partition, src.offset):
            raise TransformError(src.topic, src.partition, src.offset,
                                 f"transforms.python {self.path} changed topic/partition/offset (to "
                                 f"{m.topic}-{m.partition}@{m.offset}); a transform cannot move records")
        if m.value is src.value and m.key is src.key and m.headers is src.headers and m.timestamp == src.timestamp:
            return src
        same_value = m.value is src.value
        return dataclasses.replace(
            src, timestamp=m.timestamp, key=m.key, value=m.value, headers=tuple(m.headers or ()),
            raw_value=src.raw_value if same_value else None, raw_avro=src.raw_avro if same_value else None,
            raw_key=src.raw_key if m.key is src.key else None, extra={})


@dataclass
class Transforms:
    """The config's transforms (built by :func:`lakesink.wiring.transforms`)."""

    sql: SqlTransform | None = None
    python: PythonTransform | None = None

    @property
    def record_path(self) -> bool:
        """Whether every batch must take the per-record path (a Python transform maps records)."""
        return self.python is not None

    def reads(self) -> tuple[bool, bool]:
        """Whether the transforms read the records' (key, headers): the Kafka read must then carry those
        columns (they are costly to convert, so a query that names neither does without them)."""
        if self.python is not None:
            return True, True
        q = self.sql.query if self.sql is not None else ""
        return bool(re.search(r"\bkey\b", q, re.I)), bool(re.search(r"\bheaders\b", q, re.I))

    def apply_arrow(self, batch: "pa.RecordBatch", topic: str, partition: int) -> "pa.RecordBatch":
        return self.sql.apply(batch, topic, partition) if self.sql is not None else batch

    def map_records(self, records: "list[SinkRecord]") -> "list[SinkRecord]":
        return self.python.map_records(records) if self.python is not None else records


def check_sql(text: str) -> str | None:
    """A problem with ``transforms.sql`` found by planning it on an empty ``records`` table, or None
    (None too when duckdb is not installed here: the executors need it, not the machine running ``check``)."""
    import pyarrow as pa

    try:
        import duckdb  # noqa: F401
    except ImportError:
        return None
    empty = pa.RecordBatch.from_pydict({"value": pa.array([], pa.binary()), "partition": pa.array([], pa.int32()),
                                        "offset": pa.array([], pa.int64()), "ts": pa.array([], pa.int64())})
    try:
        t = SqlTransform(text)
        result = t._run(_records_table(empty, "t", 0))
    except InvalidArgumentError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - DuckDB's parser/binder errors
        return _first_line(e)
    if "kafka_offset" not in result.column_names:
        return f"the query's result must have a kafka_offset column (it has {', '.join(result.column_names)})"
    return None


def check_python(path: str) -> str | None:
    """A problem with ``transforms.python`` (cannot import it here), or None."""
    try:
        load_callable(path)
    except InvalidArgumentError as e:
        return str(e).split(": ", 1)[-1]
    return None


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


def grouped(records: Iterable[Any]) -> bool:
    """Whether two consecutive records share an offset (a transform made many of one)."""
    prev = None
    for r in records:
        if r.offset == prev:
            return True
        prev = r.offset
    return False


def dropped_offsets(before: list[int], after: list[int]) -> list[int]:
    """The offsets of ``before`` (ascending input offsets) that have no output in ``after`` (the output's offsets
    in any order, repeated where one record made many): the records a transform dropped, ascending."""
    if len(after) == len(before) and after == before:
        return []
    kept = set(after)
    return [o for o in before if o not in kept]


class TransformSpec(NamedTuple):
    """The config's transforms as a plain value (``transforms.sql`` text, ``transforms.python`` path) a task
    builds with :meth:`build` (:func:`lakesink.wiring.transform_spec`)."""

    sql: str | None
    python: str | None

    def build(self) -> Transforms:
        return Transforms(SqlTransform(self.sql) if self.sql else None,
                          PythonTransform(self.python) if self.python else None)
