"""`lakesink sql --config FILE "SELECT …"`: SQL over the manifest and its views (DuckDB for a path manifest, Spark
otherwise); `--file F` runs several statements; with neither, statements are read from a terminal one by one
(interactive, one connection) or from standard input."""
from __future__ import annotations

import argparse
import sys

from lakesink.cli.results import TableResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sql", help="run SQL over the manifest (table `manifest`; views committed_offsets, objects, "
                    "schema_history, gaps, lag, metrics)",
        description="Run Spark SQL queries with the job's manifest registered as `manifest` and the views "
                    "committed_offsets, objects, schema_history, gaps, lag and metrics (lag asks the broker for end "
                    "offsets; the others read only the manifest). A path manifest is queried in DuckDB (no JVM, "
                    "the query transpiled from Spark SQL); a catalog manifest, or --engine spark, on Spark. Every "
                    "name shows the config's job's rows only (jobs may share a manifest); --all-jobs shows every "
                    "job's. Only queries run, over those names only. See docs/sql.md for examples.")
    p.add_argument("--config", required=True, help="the job's connector config")
    p.add_argument("query", nargs="?", default=None,
                   help="the SQL query (several: separate with ';'); leave out to read statements from --file, a "
                        "terminal (interactive) or standard input")
    p.add_argument("--file", default=None, help="run the ';'-separated statements of this file ('-': standard input)")
    p.add_argument("--engine", choices=("auto", "duckdb", "spark"), default="auto",
                   help="auto (default): DuckDB for a path manifest, Spark for a catalog one")
    p.add_argument("--all-jobs", action="store_true",
                   help="show every job's rows in the manifest and views, not just the config's job's (lag stays "
                        "the config's job's: its end offsets are the config's topics)")
    p.add_argument("--limit", type=int, default=1000, help="print at most this many rows (default 1000; 0: all)")
    p.add_argument("--master", default=None, help="Spark master for a local run (the Spark route)")
    p.set_defaults(func=run)


def _read(path: str) -> str:
    from lakesink.errors import InvalidArgumentError

    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise InvalidArgumentError(f"--file {path}: {e.strerror or e}") from None


def _local_tables(cfg) -> bool:
    """Whether every table ``lakesink sql`` reads (the manifest, its metrics and groups tables beside it) is a
    local directory, so no S3 credentials are needed."""
    from lakesink.manifest.location import parse_location
    from lakesink.manifest.metrics import metrics_location

    return all(parse_location(loc).scheme == "file"
               for loc in (cfg.manifest_location, metrics_location(cfg)) if loc is not None)


def _interactive(session, limit, output) -> None:
    """Statements typed at a terminal, each run when its line ends with ';' (or on an empty line); a bad one
    prints its error line and the loop goes on. Ctrl-D or `\\q` ends it."""
    from lakesink.errors import LakesinkError

    err = output.err
    err.write(f"lakesink sql ({session.engine}): end a statement with ';', \\q to quit\n")
    buf: list[str] = []
    while True:
        err.write("sql> " if not buf else "...> ")
        err.flush()
        line = sys.stdin.readline()
        if not line or line.strip() == "\\q":
            break
        buf.append(line)
        text = "".join(buf)
        if not (line.rstrip().endswith(";") or (not line.strip() and text.strip())):
            continue
        buf = []
        try:
            for r in session.run(text, limit):
                output.render(TableResult(r.columns, r.rows, r.notes))
        except LakesinkError as e:
            err.write(f"lakesink: error: {e}\n")


def run(args: argparse.Namespace, output) -> TableResult | None:
    from lakesink.config import load_config
    from lakesink.driver.preflight import check_credentials
    from lakesink.driver.sql import SqlSession
    from lakesink.errors import InvalidArgumentError
    from lakesink.runtime.session import session as spark_session

    if args.limit < 0:
        raise InvalidArgumentError(f"--limit {args.limit}: must be 0 (all rows) or more")
    if args.query is not None and args.file is not None:
        raise InvalidArgumentError("give a query or --file, not both")
    text = args.query if args.query is not None else _read(args.file) if args.file is not None else None
    if text is not None and not text.strip():
        raise InvalidArgumentError("the SQL query is empty" if args.file is None else f"--file {args.file} is empty")
    cfg = load_config(args.config)
    if not _local_tables(cfg):  # S3 credentials matter only to a table not on this disk (boto3 costs 0.3 s)
        check_credentials(cfg)  # before the manifest read, whose own error would not say what is missing
    limit = args.limit or None
    with SqlSession(cfg, engine=args.engine, spark=lambda: spark_session(cfg, args.master),
                    all_jobs=args.all_jobs) as session:
        if text is None:
            if sys.stdin.isatty():
                _interactive(session, limit, output)
                return None
            text = sys.stdin.read()
            if not text.strip():
                raise InvalidArgumentError("no query: give one, --file, or statements on standard input")
        results = session.run(text, limit)
    for r in results[:-1]:  # every statement's rows, in order; the last is the command's result
        output.render(TableResult(r.columns, r.rows, r.notes))
    last = results[-1]
    return TableResult(last.columns, last.rows, last.notes)
