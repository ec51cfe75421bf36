"""The manifest and its views in DuckDB: SQL over a path manifest in about a second, without a JVM.

The tables are Arrow tables handed in (the job's manifest rows as delta-rs reads them, the metrics table, the
broker's end offsets), registered under the names the Spark route uses (:mod:`lakesink.manifest.views`); the
views are the same Spark SQL, transpiled to DuckDB's dialect by sqlglot, and so is every user query. One
dialect for users (Spark SQL, as docs/sql.md writes it), two engines.

Nothing but those tables is reachable from a query: only the job's rows are handed in (``--all-jobs`` hands in
every job's), :func:`lakesink.manifest.queries.query_statements` refuses any other table or a table function,
and before the first user query the connection is locked: no file, network or extension access, no Python
variables scanned by name, settings frozen. The S3 credentials never enter DuckDB (delta-rs read the table).

Timestamps are UTC: the Arrow columns are UTC and the connection's time zone is UTC (``current_date()`` is
today in UTC); results come back as naive UTC datetimes, as the Spark route gives them on a UTC cluster.
"""
from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from lakesink.errors import ArchiveQueryError
from lakesink.manifest.views import VIEWS

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["DuckViews", "to_duckdb", "error_line"]

# Applied before the lock, in this order; enable_external_access must come after anything that needs files.
_LOCKDOWN = ("SET TimeZone = 'UTC'", "SET python_enable_replacements = false", "SET autoinstall_known_extensions = false",
             "SET autoload_known_extensions = false", "SET enable_external_access = false", "SET lock_configuration = true")
#: The settings that lock an in-memory DuckDB down (no files, no extensions, no config changes): for connections
#: outside :class:`DuckViews` (``lakesink erase`` evaluates its predicate over records in one).
LOCKDOWN = _LOCKDOWN


def _higher_order(node: Any) -> Any:
    """Spark's ``exists(array, x -> …)`` / ``forall(array, x -> …)`` as DuckDB's list functions: sqlglot would
    render ``exists`` as ``EXISTS(array)``, dropping the lambda, and has no ``forall`` in DuckDB."""
    from sqlglot import exp

    def over(arr: Any, fn: Any, agg: str, empty: bool) -> Any:
        # DuckDB's list_bool_or/and of an empty list is NULL; Spark's exists is false there, forall true
        return exp.Case().when(exp.EQ(this=exp.Anonymous(this="len", expressions=[arr.copy()]),
                                      expression=exp.Literal.number(0)), exp.Boolean(this=empty)).else_(
            exp.Anonymous(this=agg, expressions=[exp.Anonymous(this="list_transform", expressions=[arr, fn])]))

    if isinstance(node, exp.Exists) and isinstance(node.args.get("expression"), exp.Lambda):
        return over(node.this, node.args["expression"], "list_bool_or", False)
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "forall" and len(node.expressions) == 2 \
            and isinstance(node.expressions[1], exp.Lambda):
        return over(node.expressions[0], node.expressions[1], "list_bool_and", True)
    return node


def to_duckdb(spark_sql: str) -> str:
    """One Spark SQL statement in DuckDB's dialect (sqlglot, with Spark's ``exists``/``forall`` over arrays
    rewritten first)."""
    import sqlglot

    return sqlglot.parse_one(spark_sql, read="spark").transform(_higher_order).sql(dialect="duckdb")


def error_line(e: BaseException) -> str:
    """DuckDB's error as one line in Spark's words where they differ only in wording (an unknown column or function
    reads the same on both engines), the candidates DuckDB suggests kept."""
    import re

    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip() and not ln.strip().startswith(("LINE ", "^"))]
    first = lines[0] if lines else type(e).__name__
    hint = f" ({lines[1]})" if len(lines) > 1 and lines[1].startswith(("Candidate", "Did you mean")) else ""
    m = re.match(r'Binder Error: Referenced column "([^"]+)" not found', first)
    if m:
        return f"[UNRESOLVED_COLUMN] A column with name `{m.group(1)}` cannot be resolved{hint}"
    m = re.match(r"Catalog Error: Scalar Function with name (\S+) does not exist", first)
    if m:
        return f"[UNRESOLVED_ROUTINE] Cannot resolve routine `{m.group(1)}`{hint}"
    return first + hint


def _python_value(v: Any) -> Any:
    # DuckDB hands TIMESTAMP WITH TIME ZONE back as aware datetimes; the Spark route gives naive ones
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


class DuckViews:
    """An in-memory DuckDB connection holding ``tables`` (name -> Arrow table) and the views over them; ``lag`` is
    created only when ``end_offsets`` is among the tables. ``views``: only these views (each transpiled and
    created costs milliseconds; the caller adds the views they read); None: every view. Locked once built (see the
    module docstring)."""

    def __init__(self, tables: Mapping[str, "pa.Table"], views: "Iterable[str] | None" = None):
        import duckdb

        self.names = list(tables)
        self._con = duckdb.connect(":memory:")
        for name, table in tables.items():
            self._con.register(f"{name}__arrow", table)
            self._con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM "{name}__arrow"')
        for name, text in VIEWS.items():
            if (name == "lag" and "end_offsets" not in tables) or (views is not None and name not in views):
                continue
            self._con.execute(f'CREATE VIEW "{name}" AS {to_duckdb(text)}')
            self.names.append(name)
        for statement in _LOCKDOWN:
            self._con.execute(statement)

    def query(self, spark_sql: str, limit: int | None = None,
              order: bool = False) -> tuple[list[str], list[tuple], bool]:
        """``(columns, rows, truncated)`` of one checked Spark SQL query, at most ``limit`` rows (None: all);
        ``order``: rows sorted by their columns, left to right, before the limit.

        Raises ArchiveQueryError (one line) for what DuckDB refuses (unknown column, type error)."""
        import duckdb

        text = to_duckdb(spark_sql)
        if order:
            text = f"SELECT * FROM ({text}) ORDER BY ALL"
        try:
            cur = self._con.execute(text)
            rows = cur.fetchmany(limit + 1) if limit is not None else cur.fetchall()
            columns = [d[0] for d in cur.description]
        except duckdb.Error as e:
            raise ArchiveQueryError(f"query: {error_line(e)}") from None
        truncated = limit is not None and len(rows) > limit
        rows = rows[:limit] if truncated else rows
        return columns, [tuple(_python_value(v) for v in r) for r in rows], truncated

    def column_types(self, spark_sql: str) -> list[tuple[str, str]]:
        """``(name, DuckDB type)`` of each column ``spark_sql`` would return, without running it."""
        import duckdb

        try:
            return [(r[0], r[1]) for r in self._con.execute(f"DESCRIBE {to_duckdb(spark_sql)}").fetchall()]
        except duckdb.Error as e:
            raise ArchiveQueryError(f"query: {error_line(e)}") from None

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> "DuckViews":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
