"""`lakesink sql --config FILE "SELECT …"`: Spark SQL over the manifest and its views."""
from __future__ import annotations

import argparse

from lakesink.cli.output import TableResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sql", help="run Spark SQL over the manifest (table `manifest`; views committed_offsets, objects, "
                    "schema_history, gaps, lag, metrics)",
        description="Run a Spark SQL query with the job's manifest registered as `manifest` and the views "
                    "committed_offsets, objects, schema_history, gaps, lag and metrics (lag asks the broker for end "
                    "offsets; the others read only the manifest). Every name shows the config's job's rows only "
                    "(jobs may share a manifest); --all-jobs shows every job's. See docs/sql.md for examples.")
    p.add_argument("--config", required=True, help="the job's connector config")
    p.add_argument("query", help="the SQL query")
    p.add_argument("--all-jobs", action="store_true",
                   help="show every job's rows in the manifest and views, not just the config's job's (lag stays "
                        "the config's job's: its end offsets are the config's topics)")
    p.add_argument("--limit", type=int, default=1000, help="print at most this many rows (default 1000; 0: all)")
    p.add_argument("--master", default=None, help="Spark master for a local run")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, output) -> TableResult:
    from lakesink.runtime.session import session
    from lakesink.config import load_config
    from lakesink.driver.sql import run_query
    from lakesink.errors import InvalidArgumentError

    if args.limit < 0:
        raise InvalidArgumentError(f"--limit {args.limit}: must be 0 (all rows) or more")
    if not args.query.strip():
        raise InvalidArgumentError("the SQL query is empty")
    from lakesink.driver.preflight import check_credentials

    cfg = load_config(args.config)
    check_credentials(cfg)  # before the manifest read, whose own error would not say what is missing
    spark = session(cfg, args.master)
    res = run_query(spark, cfg, args.query, limit=args.limit or None, all_jobs=args.all_jobs)
    return TableResult(res.columns, res.rows, res.notes)
