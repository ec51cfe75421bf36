"""``lakesink erase``'s plan: which records of the job's live objects a ``--where`` selects, at the cost of what the
predicate needs (issue #32).

1. **Pruned by the manifest.** Where the predicate bounds ``topic``, ``partition``, ``offset`` or ``timestamp``,
   :func:`object_condition` turns it into a condition over each object's manifest row (topic, partition, offset
   span, min/max record timestamp) that holds for every object that can hold a selected record, and
   :func:`prune` keeps just those objects. A record is selected only when the predicate is TRUE, so each
   comparison of a bounded column with a constant (``=``, ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``, ``IN``)
   becomes the same comparison against the object's span (``offset > 5``: ``last_offset > 5``; ``offset = 5``:
   ``first_offset <= 5 AND last_offset >= 5``; ``topic``/``partition``, one value per object, as they are),
   ``AND`` and ``OR`` stay, and anything else (``NOT``, ``<>``, a function of a column, a non-constant side such
   as ``current_timestamp()`` or ``rand()``, a column the manifest does not bound) becomes TRUE: it prunes
   nothing. A comparison whose answer is unknown (an object without timestamps, a NULL constant) keeps the object.
   The objects' columns have the records' types and the condition runs in the same locked DuckDB dialect as the
   predicate, so a constant is cast exactly as it is against the records (``timestamp >= '2025-01-01'``); when in
   doubt (the condition fails to run) nothing is pruned. The manifest's timestamps bound the records' (the sink
   records the min/max of the timestamps it writes to the record-metadata file; restore's time cut relies on it
   too: :meth:`lakesink.executor.cut.Cut.object_overlap`).
   When the manifest rules out every object, the first is read all the same, so that a predicate that does not
   bind over the records (an unknown column, a type error) still fails as it always did.
2. **Read and matched by tasks** of the job's runner (:mod:`lakesink.executor.erase_match`: only the files the
   predicate names, many objects per DuckDB query), objects packed into tasks as ``read_archive`` packs them
   (:func:`lakesink.driver.archive.pack_objects`); without a runner the same task body runs on the driver.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from lakesink import errors
from lakesink.errors import LakesinkError
from lakesink.manifest.rows import offset_runs

__all__ = ["ErasedObject", "Plan", "BOUNDED_COLUMNS", "object_condition", "prune", "plan"]

#: record columns a manifest row bounds: the object table's columns for each (low, high)
BOUNDED_COLUMNS = {"topic": ("topic", "topic"), "partition": ("partition", "partition"),
                   "offset": ("first_offset", "last_offset"), "timestamp": ("min_timestamp", "max_timestamp")}


@dataclass
class ErasedObject:
    """One live object the predicate matched: its manifest row, the erased offsets and the positions kept."""

    row: Mapping[str, Any]
    offsets: list[int]  # distinct erased offsets, ascending
    records: int  # records the object held
    keep: list[int] = field(default_factory=list, repr=False)  # positions of the records kept
    all_offsets: list[int] = field(default_factory=list, repr=False)  # every record's offset
    timestamps: list[int | None] = field(default_factory=list, repr=False)  # every record's timestamp (ms)
    types: list[int | None] = field(default_factory=list, repr=False)  # every record's timestamp type id

    @property
    def runs(self) -> str:
        return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in offset_runs(self.offsets))


@dataclass
class Plan:
    """What a plan found: the matched objects (in object order), what it read, what the manifest pruned."""

    matched: list[ErasedObject]
    scanned_objects: int
    scanned_records: int
    pruned: int  # live objects the manifest ruled out (not read)
    tasks: int  # groups of objects read (tasks of the runner, or on the driver)


# ----------------------------------------------------------------------------------------------------- pruning

def _constant(node: Any) -> bool:
    """Whether ``node`` is a constant the same every time it is evaluated: literals, casts, intervals, arithmetic."""
    from sqlglot import exp

    allowed = (exp.Literal, exp.Neg, exp.Paren, exp.Cast, exp.TryCast, exp.DataType, exp.DataTypeParam,
               exp.Interval, exp.Var, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Null, exp.Boolean)
    return all(isinstance(n, allowed) for n in node.walk())


def _bounded(node: Any) -> str | None:
    """The bounded record column ``node`` is (an unqualified column reference), or None."""
    from sqlglot import exp

    if isinstance(node, exp.Column) and not node.table and node.name.lower() in BOUNDED_COLUMNS:
        return node.name.lower()
    return None


def _span(column: str, op: type, value: Any) -> Any:
    """The object-level condition of ``<column> <op> value`` (op an sqlglot comparison class)."""
    from sqlglot import exp

    lo, hi = (exp.column(c) for c in BOUNDED_COLUMNS[column])
    if op is exp.EQ:
        cond = exp.and_(exp.LTE(this=lo, expression=value.copy()), exp.GTE(this=hi, expression=value.copy()))
    elif op in (exp.GT, exp.GTE):
        cond = op(this=hi, expression=value.copy())
    else:  # LT, LTE
        cond = op(this=lo, expression=value.copy())
    return exp.func("coalesce", exp.paren(cond), exp.true())


def _relax(node: Any) -> Any | None:
    """An object-level condition implied by ``node`` being TRUE for some record of the object, or None (TRUE)."""
    from sqlglot import exp

    flip = {exp.EQ: exp.EQ, exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}
    if isinstance(node, exp.Paren):
        return _relax(node.this)
    if isinstance(node, (exp.And, exp.Or)):
        left, right = _relax(node.this), _relax(node.expression)
        if isinstance(node, exp.And):
            return left if right is None else right if left is None else exp.and_(left, right)
        return None if left is None or right is None else exp.or_(left, right)
    if type(node) in flip:
        op, col, value = type(node), _bounded(node.this), node.expression
        if col is None:
            op, col, value = flip[type(node)], _bounded(node.expression), node.this
        if col is None or not _constant(value):
            return None
        return _span(col, op, value)
    if isinstance(node, exp.Between):
        col, low, high = _bounded(node.this), node.args.get("low"), node.args.get("high")
        if col is None or low is None or high is None or not (_constant(low) and _constant(high)) \
                or node.args.get("symmetric"):
            return None
        return exp.and_(_span(col, exp.GTE, low), _span(col, exp.LTE, high))
    if isinstance(node, exp.In):
        col, values = _bounded(node.this), node.expressions
        if col is None or not values or node.args.get("query") is not None or node.args.get("unnest") is not None \
                or node.args.get("field") is not None or not all(_constant(v) for v in values):
            return None
        return exp.or_(*(_span(col, exp.EQ, v) for v in values))
    return None


def object_condition(predicate: str) -> str | None:
    """A condition (DuckDB SQL) over an ``objects`` table of the columns of :data:`BOUNDED_COLUMNS` that holds
    (or is unknown) for every object holding a record ``predicate`` (a checked Spark SQL expression) selects;
    None when the predicate bounds none of those columns (see the module docstring)."""
    from sqlglot import exp, parse_one

    cond = _relax(parse_one(predicate, read="spark", into=exp.Condition))
    return None if cond is None else cond.sql(dialect="duckdb")


def objects_table(objects: list[Any]) -> Any:
    """The objects' manifest bounds as an Arrow table (``i``: their index; the records' column types)."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return pa.table({
        "i": pa.array(range(len(objects)), pa.int64()),
        "topic": pa.array([o.topic for o in objects], pa.string()),
        "partition": pa.array([o.kafka_partition for o in objects], pa.int32()),
        "first_offset": pa.array([o.first_offset for o in objects], pa.int64()),
        "last_offset": pa.array([o.last_offset for o in objects], pa.int64()),
        "min_timestamp": pa.array([None if o.min_timestamp_ms is None else o.min_timestamp_ms * 1000
                                   for o in objects], pa.int64()).cast(ts),
        "max_timestamp": pa.array([None if o.max_timestamp_ms is None else o.max_timestamp_ms * 1000
                                   for o in objects], pa.int64()).cast(ts)})


def prune(objects: list[Any], predicate: str) -> list[int]:
    """The indexes of ``objects`` (readback ``ArchivedObject``) that may hold a record ``predicate`` selects: all of
    them when it bounds nothing the manifest records, or when the condition fails to run (doubt prunes nothing)."""
    import duckdb

    from lakesink.manifest.duck import LOCKDOWN

    everything = list(range(len(objects)))
    cond = object_condition(predicate)
    if cond is None or not objects:
        return everything
    con = duckdb.connect(":memory:")
    try:
        con.register("objects", objects_table(objects))
        for statement in LOCKDOWN:
            con.execute(statement)
        kept = [r[0] for r in con.execute(f"SELECT i FROM objects WHERE {cond} ORDER BY i").fetchall()]
    except duckdb.Error:
        return everything  # the records' evaluation reports what is wrong with the predicate
    finally:
        con.close()
    return kept


# -------------------------------------------------------------------------------------------------------- plan

def _raise(res: Mapping[str, Any]) -> None:
    """A task's error row raised again as the class it was (its exit code), or as a LakesinkError."""
    cls = getattr(errors, str(res.get("error_class")), None)
    message = res["error"]
    if isinstance(cls, type) and issubclass(cls, LakesinkError):
        try:
            raise cls(message)
        except TypeError:  # a class that takes more than a message
            pass
    raise LakesinkError(message)


def plan(parts: Any, rows: list[Mapping[str, Any]], predicate: str, where: str, runner: Any = None,
         pruning: bool = True) -> Plan:
    """The records of the live object ``rows`` (in (topic, partition, first offset) order) that ``predicate``
    selects (see the module docstring). ``parts``: the job's ``TaskParts``; ``runner``: runs the tasks (None: on
    the driver; a zero-argument callable returning one: started only when the plan has more than one task, a
    plan of one task runs on the driver); ``pruning=False`` reads every object (the plan the pruning must agree
    with)."""
    from lakesink.driver.archive import MAX_PARTITION_BYTES, OPEN_COST_BYTES, pack_objects, setting_bytes
    from lakesink.executor.erase_match import PLAN_DDL, erase_plan_task, referenced_columns
    from lakesink.executor.readback import ArchivedObject

    objects = [ArchivedObject.from_row(r) for r in rows]
    chosen = prune(objects, predicate) if pruning else list(range(len(objects)))
    if objects and not chosen:  # one object read all the same: a predicate DuckDB cannot bind still fails (exit 2)
        chosen = [0]
    columns = referenced_columns(predicate)
    views = {"keys": "key" in columns, "headers": "headers" in columns, "metadata": True, "index": False}
    value = bool(columns & {"value", "value_bytes"})

    def size(o: Any) -> int:  # what a task fetches of the object
        return ((o.size_bytes or 0) if value else 0) + sum(int(s.get("size_bytes") or 0) for s in o.side_files
                                                           if views.get(s.get("view"), False))

    groups: list[list[tuple[int, Any]]] = []
    if callable(runner) and not hasattr(runner, "run"):  # started only for a plan worth more than one task
        start = runner
        runner = None if len(chosen) <= 1 or len(pack_objects([size(objects[i]) for i in chosen])) <= 1 else start()
    if chosen:
        if runner is None:
            packed = pack_objects([size(objects[i]) for i in chosen])
        else:
            packed = pack_objects([size(objects[i]) for i in chosen],
                                  setting_bytes(runner, "spark.sql.files.maxPartitionBytes", MAX_PARTITION_BYTES),
                                  setting_bytes(runner, "spark.sql.files.openCostInBytes", OPEN_COST_BYTES),
                                  runner.parallelism())
        groups = [[(chosen[j], objects[chosen[j]]) for j in task] for task in packed]
    if not groups:
        out: list[str] = []
    elif runner is None:
        from lakesink.runners import first_column

        out = list(first_column(erase_plan_task(range(len(groups)), groups, parts, predicate, where, columns)))
    else:
        try:
            out = runner.run(lambda ids: erase_plan_task(ids, groups, parts, predicate, where, columns), len(groups),
                             PLAN_DDL)
        except LakesinkError:
            raise
        except Exception as e:  # noqa: BLE001 - executor errors arrive wrapped by py4j/PySpark
            from lakesink.driver.batch import executor_error

            raise LakesinkError(f"erase: a task of the plan failed ({runner.name}): {executor_error(e)}; nothing "
                                f"was changed") from e
    results = sorted((json.loads(line) for line in out), key=lambda r: r["id"])
    for res in results:
        if "error" in res:
            _raise(res)
    matched = sorted((m for res in results for m in res["matched"]), key=lambda m: m["index"])
    return Plan(matched=[ErasedObject(row=rows[m["index"]], offsets=m["offsets"], records=m["records"], keep=m["keep"],
                                      all_offsets=m["all_offsets"], timestamps=m["timestamps"], types=m["types"])
                         for m in matched],
                scanned_objects=sum(r["scanned_objects"] for r in results),
                scanned_records=sum(r["scanned_records"] for r in results),
                pruned=len(objects) - len(chosen), tasks=len(groups))
