"""Queries over manifest rows that need no engine: plain Python over an Arrow table (``DeltaRsManifest.arrow``) or
over :class:`~lakesink.manifest.rows.ManifestRow` objects (or dicts, e.g. Spark ``Row.asDict()``).

:func:`schema_history`: per topic and value schema (subject, version, id, fingerprint), the offsets and record
timestamps its objects cover and how many objects carry it (issue #11 item 4).

:func:`where_predicate`: a ``--where`` predicate checked to be one boolean expression over the manifest's columns (no
subquery, set operation, second statement or table reference), as the Spark SQL text to filter with (issue #26).

:func:`query_statements`: ``lakesink sql`` text checked to be queries over the names registered for it (the manifest,
its views, metrics) and nothing else, one Spark SQL text per statement (issue #31).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from lakesink.errors import ArchiveQueryError
from lakesink.manifest.rows import OBJECT

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["HISTORY_COLUMNS", "SchemaHistoryEntry", "schema_history", "row_dicts", "naive_utc", "where_predicate",
           "PREDICATE_HINT", "query_statements", "REFUSED_FUNCTIONS", "orders_rows"]

#: Spark SQL functions that call into the JVM (any static Java method: environment variables, files): refused in
#: every user expression, the Spark route would run them on the driver.
REFUSED_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})

#: The manifest columns :func:`schema_history` reads (pass them to ``DeltaRsManifest.arrow``).
HISTORY_COLUMNS = ["topic", "kafka_partition", "kind", "first_offset", "last_offset", "record_count", "object_key",
                   "format", "size_bytes", "etag", "version_id", "min_timestamp", "max_timestamp", "schema_subject",
                   "schema_id", "schema_version", "schema_fingerprint"]


@dataclass
class SchemaHistoryEntry:
    """One value schema of one topic as the archive holds it. Offsets are per Kafka partition, so
    ``first_offset``/``last_offset`` are the smallest first and largest last offset over the partitions listed
    in ``partitions``. A schema-less object (JSON/bytes without a schema) is an entry with every schema field None."""

    topic: str
    subject: str | None
    version: int | None
    id: int | None
    fingerprint: str | None
    first_offset: int | None
    last_offset: int | None
    min_timestamp: dt.datetime | None
    max_timestamp: dt.datetime | None
    objects: int
    records: int
    partitions: list[int] = field(default_factory=list)


def row_dicts(rows: "pa.Table | Iterable[Any]") -> list[dict[str, Any]]:
    """Manifest rows as dicts, from an Arrow table, ManifestRow objects or dicts."""
    if hasattr(rows, "to_pylist") and hasattr(rows, "schema"):
        return rows.to_pylist()
    out = []
    for r in rows:
        if isinstance(r, dict):
            out.append(r)
        elif hasattr(r, "asDict"):
            out.append(r.asDict())
        else:
            out.append({k: getattr(r, k, None) for k in HISTORY_COLUMNS})
    return out


def naive_utc(t: Any) -> dt.datetime | None:
    """Timestamps compare as naive UTC (Arrow gives aware datetimes, ManifestRow naive ones)."""
    if t is None:
        return None
    return t.astimezone(dt.timezone.utc).replace(tzinfo=None) if t.tzinfo is not None else t


def _min(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _max(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


def schema_history(rows: "pa.Table | Iterable[Any]", topic: str | None = None) -> list[SchemaHistoryEntry]:
    """Per topic and value schema: offsets, timestamps, objects and records of the object rows in ``rows`` (only
    ``topic``'s when given). Ordered by topic, then version, then the earliest record timestamp seen."""
    groups: dict[tuple, SchemaHistoryEntry] = {}
    for r in row_dicts(rows):
        if r.get("kind", OBJECT) != OBJECT or (topic is not None and r["topic"] != topic):
            continue
        key = (r["topic"], r.get("schema_subject"), r.get("schema_version"), r.get("schema_id"),
               r.get("schema_fingerprint"))
        e = groups.get(key)
        if e is None:
            e = groups[key] = SchemaHistoryEntry(*key, first_offset=None, last_offset=None, min_timestamp=None,
                                                 max_timestamp=None, objects=0, records=0)
        e.first_offset = _min(e.first_offset, r.get("first_offset"))
        e.last_offset = _max(e.last_offset, r.get("last_offset"))
        e.min_timestamp = _min(e.min_timestamp, naive_utc(r.get("min_timestamp")))
        e.max_timestamp = _max(e.max_timestamp, naive_utc(r.get("max_timestamp")))
        e.objects += 1
        e.records += int(r.get("record_count") or 0)
        if r.get("kafka_partition") is not None and r["kafka_partition"] not in e.partitions:
            e.partitions.append(r["kafka_partition"])
    for e in groups.values():
        e.partitions.sort()
    epoch = dt.datetime(1970, 1, 1)
    return sorted(groups.values(), key=lambda e: (
        e.topic, e.version is None, e.version or 0, e.min_timestamp is None, e.min_timestamp or epoch,
        e.first_offset if e.first_offset is not None else -1))


#: Said after every refused ``--where``: what a predicate is.
PREDICATE_HINT = "the predicate is a boolean expression over the manifest's columns"
#: :func:`where_predicate`'s hint for a predicate over archived records (``lakesink erase --where``).
RECORD_PREDICATE_HINT = ("the predicate is a boolean expression over the records' columns: topic, partition, offset, "
                         "timestamp, key, value, value_bytes, headers")


def _refusal(node: Any) -> str | None:
    """What ``node`` of a parsed predicate is, if it is something a predicate must not hold."""
    from sqlglot import exp

    if isinstance(node, exp.SetOperation):
        return f"a set operation ({type(node).__name__.upper()}) is not allowed"
    if isinstance(node, exp.Table | exp.From | exp.Join):
        return "a table reference is not allowed"
    if isinstance(node, exp.Query | exp.DerivedTable | exp.With | exp.Selectable):
        return "a subquery is not allowed"
    return _refused_function(node)


def _refused_function(node: Any) -> str | None:
    from sqlglot import exp

    if isinstance(node, exp.Func):
        name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
        if name in REFUSED_FUNCTIONS:
            return f"{name}() is not allowed (it calls Java methods)"
    return None


def where_predicate(where: str, label: str = "--where", hint: str | None = None) -> str:
    """``where`` checked to be ONE boolean expression over the manifest's columns, as the Spark SQL text to
    filter with: sqlglot's (dialect ``spark``) rendering of what it parsed, without comments, so Spark evaluates
    exactly the expression checked here (a comment or a quoting trick cannot carry a clause past the check).

    Raises ArchiveQueryError (one line, ``<label> '<where>': <why> (...)``) for a second statement (``;``), a
    set operation, a subquery (scalar, ``IN``, ``EXISTS``), a table reference, or text that does not parse as
    one expression (``[PARSE_SYNTAX_ERROR] ...``, the words Spark uses). Unknown columns and type errors are
    left to Spark, which resolves the expression against the manifest. ``hint``: what the predicate is over, for
    the error line (default :data:`PREDICATE_HINT`; ``lakesink erase``: :data:`RECORD_PREDICATE_HINT`)."""
    from sqlglot import exp, parse_one
    from sqlglot.dialects.spark import Spark
    from sqlglot.errors import ErrorLevel, ParseError, TokenError, UnsupportedError
    from sqlglot.tokens import TokenType

    def refuse(why: str) -> ArchiveQueryError:
        return ArchiveQueryError(f"{label} {where!r}: {why} ({hint or PREDICATE_HINT})")

    dialect = Spark()
    try:
        tokens = dialect.tokenize(where)
    except TokenError:
        raise refuse("[PARSE_SYNTAX_ERROR] Syntax error: an unterminated string, quoted name or comment") from None
    kinds = {t.token_type for t in tokens}
    if TokenType.SEMICOLON in kinds:
        raise refuse("a second statement (';') is not allowed")
    setop = next((t for t in tokens if t.token_type in (TokenType.UNION, TokenType.INTERSECT, TokenType.EXCEPT)), None)
    if setop is not None:
        raise refuse(f"a set operation ({setop.text.upper()}) is not allowed")
    try:
        tree = parse_one(where, dialect=dialect, into=exp.Condition)
    except ParseError as e:
        if kinds & {TokenType.SELECT, TokenType.VALUES, TokenType.WITH}:
            raise refuse("a subquery is not allowed") from None
        if TokenType.TABLE in kinds:
            raise refuse("a table reference is not allowed") from None
        near = next((err.get("highlight") for err in e.errors if err.get("highlight")), None)
        raise refuse("[PARSE_SYNTAX_ERROR] Syntax error" + (f" at or near {near!r}" if near else "")) from None
    for node in tree.walk():
        why = _refusal(node)
        if why is not None:
            raise refuse(why)
    try:
        return tree.sql(dialect=dialect, comments=False, unsupported_level=ErrorLevel.RAISE)
    except UnsupportedError as e:  # pragma: no cover - sqlglot renders what it parsed in the same dialect
        raise refuse(f"cannot be checked ({str(e).splitlines()[0][:200]})") from None


def query_statements(text: str, names: Iterable[str]) -> list[str]:
    """``text`` (one or more Spark SQL statements, ``;``-separated) checked to be queries that read only ``names``
    (and their own CTEs), as one Spark SQL text per statement, without comments.

    Raises ArchiveQueryError (one line) for a statement that is not a query (``INSERT``, ``DROP``, ``SET``...), a
    table outside ``names`` (a qualified name, a path such as ``delta.`s3://…```, a table function such as
    ``read_files(…)``), a function in :data:`REFUSED_FUNCTIONS`, or text that does not parse."""
    import logging

    from sqlglot import exp, parse
    from sqlglot.dialects.spark import Spark
    from sqlglot.errors import ParseError, TokenError

    allowed = {n.lower() for n in names}
    hint = f"a query reads {', '.join(sorted(allowed))}"
    sqlglot_log = logging.getLogger("sqlglot")
    level = sqlglot_log.level
    sqlglot_log.setLevel(logging.ERROR)  # "unsupported syntax, parsing as a Command": answered below in one line
    try:
        # a comment between statements parses as a Semicolon node: nothing to run
        trees = [t for t in parse(text, dialect=Spark()) if t is not None and not isinstance(t, exp.Semicolon)]
    except (ParseError, TokenError) as e:
        first = getattr(e, "errors", None) or [{}]
        near = first[0].get("highlight") if isinstance(first[0], dict) else None
        raise ArchiveQueryError("query: [PARSE_SYNTAX_ERROR] Syntax error" + (f" at or near {near!r}" if near else "")
                                ) from None
    finally:
        sqlglot_log.setLevel(level)
    if not trees:
        raise ArchiveQueryError("query: the SQL text holds no statement")
    out = []
    for i, tree in enumerate(trees, 1):
        label = "query" if len(trees) == 1 else f"statement {i}"
        if not isinstance(tree, exp.Query):
            kind = tree.key.upper() if not isinstance(tree, exp.Command) else str(tree.this).upper()
            raise ArchiveQueryError(f"{label}: {kind} is not a query; only SELECT (or WITH ... SELECT) is run ({hint})")
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for node in tree.walk():
            if isinstance(node, exp.Table):
                shown = node.sql(dialect="spark")
                if not isinstance(node.this, exp.Identifier):
                    raise ArchiveQueryError(f"{label}: the table function {shown} is not allowed ({hint})")
                if node.args.get("db") is not None or node.args.get("catalog") is not None:
                    raise ArchiveQueryError(f"{label}: the table {shown} is outside this job's archive ({hint})")
                if node.name.lower() not in allowed | ctes:
                    raise ArchiveQueryError(f"{label}: [TABLE_OR_VIEW_NOT_FOUND] the table {node.name!r} is not "
                                            f"one of this job's ({hint})")
            why = _refused_function(node)
            if why:
                raise ArchiveQueryError(f"{label}: {why}")
        out.append(tree.sql(dialect="spark", comments=False))
    return out


def orders_rows(statement: str) -> bool:
    """Whether a checked Spark SQL query orders its own rows (a top-level ``ORDER BY``); when it does not,
    ``lakesink sql`` orders them by their columns, left to right, which for every view is its natural key
    (job, topic, partition, then offsets)."""
    from sqlglot import parse_one

    return parse_one(statement, read="spark").args.get("order") is not None
