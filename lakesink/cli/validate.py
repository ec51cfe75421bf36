"""`lakesink validate`: the archive checked with Great Expectations (see :mod:`lakesink.driver.validate`):
a result table, exit 0 when every expectation holds, 1 when one fails. No Spark for a path manifest."""
from __future__ import annotations

import argparse

from lakesink.cli.output import TableResult

COLUMNS = ["check", "expectation", "column", "success", "evaluated", "unexpected", "examples"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    from lakesink.driver.validate import DEFAULT_SAMPLE

    v = sub.add_parser("validate", help="check the archive with Great Expectations: manifest ranges chain, record "
                                        "counts of sampled objects, schema versions; optionally a user suite over "
                                        "sampled records; exit 0 all pass, 1 a failure")
    v.add_argument("--config", required=True)
    v.add_argument("--suite", default=None, metavar="S.json",
                   help="a Great Expectations 1.x expectation suite (JSON) run over the sampled objects' records")
    v.add_argument("--sample", type=int, default=DEFAULT_SAMPLE, metavar="N",
                   help=f"objects read back (record counts, user suite); default {DEFAULT_SAMPLE}, 0 none")
    v.add_argument("--master", default=None, help="Spark master (only a catalog-table manifest needs Spark)")
    v.set_defaults(func=run_validate)


def report_table(rep) -> TableResult:
    """The report as a result table: one row per expectation."""
    rows = [(o.check, o.expectation, o.column, o.success, o.evaluated, o.unexpected, "; ".join(o.examples))
            for o in rep.outcomes]
    failed = sum(not o.success for o in rep.outcomes)
    summary = (f"job {rep.job}: {rep.rows} manifest rows, {rep.objects_sampled} objects and {rep.records_sampled} "
               f"records sampled: " + ("all expectations met" if not failed else f"{failed} expectation(s) FAILED"))
    return TableResult(COLUMNS, rows, notes=[summary, *rep.notes], exit_code=rep.exit_code)


def run_validate(args: argparse.Namespace, output) -> TableResult:
    from lakesink.runtime.session import session
    from lakesink.config import load_config
    from lakesink.driver.validate import validate

    cfg = load_config(args.config)
    return report_table(validate(cfg, args.suite, sample=args.sample, spark=lambda: session(cfg, args.master)))
