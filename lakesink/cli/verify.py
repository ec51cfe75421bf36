"""`lakesink verify --config FILE [--report R.json] [--shallow]`: every object of the job checked against the
manifest (see :mod:`lakesink.driver.verify`): a table of faults, exit 0 when there is none, 1 when there is one."""
from __future__ import annotations

import argparse
from pathlib import Path

from lakesink.cli.output import TableResult

COLUMNS = ["fault", "topic", "kafka_partition", "object_key", "detail"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    from lakesink.runtime.engine import ENGINES

    v = sub.add_parser("verify", help="deep integrity check: every manifest object and side file exists with its "
                                      "ETag and size, its records are read back and counted, each partition's "
                                      "offset chain is whole; exit 0 no fault, 1 a fault")
    v.add_argument("--config", required=True, help="the sink job's config (.properties, Connect JSON or YAML)")
    v.add_argument("--report", default=None, metavar="R.json",
                   help="write the JSON evidence report here (what was checked, when, the manifest version, faults)")
    v.add_argument("--shallow", action="store_true",
                   help="check existence, ETags and sizes only; read no records")
    v.add_argument("--engine", choices=ENGINES, default="auto",
                   help="where the object checks run: local worker processes, Spark, or auto (local for a path "
                        "manifest on a local master)")
    v.add_argument("--master", default=None, help="Spark master")
    v.set_defaults(func=run)


def report_table(rep) -> TableResult:
    """The report as a result table: one row per fault, a summary note."""
    rows = [(f.kind, f.topic, f.kafka_partition, f.object_key, f.detail) for f in rep.faults]
    what = "read back and counted" if rep.deep else "checked (shallow: not read)"
    summary = (f"job {rep.job}: manifest version {rep.manifest_version}, {len(rep.partitions)} partition(s), "
               f"{rep.objects} object(s) and {rep.side_files} side file(s) {what}, {rep.records_counted} records; "
               + ("no fault" if rep.ok else f"{len(rep.faults)} FAULT(S)"))
    return TableResult(COLUMNS, rows, notes=[summary], exit_code=rep.exit_code)


def run(args: argparse.Namespace, output) -> TableResult:
    from lakesink.config import load_config
    from lakesink.driver.preflight import check_stores
    from lakesink.driver.verify import verify
    from lakesink.runtime.engine import open_engine

    cfg = load_config(args.config)
    check_stores(cfg, writes=False)
    with open_engine(cfg, args.engine, args.master, in_advance=False) as eng:
        rep = verify(cfg, runner=eng.runner, spark=eng.spark, deep=not args.shallow)
    result = report_table(rep)
    if args.report:
        Path(args.report).write_text(rep.to_json() + "\n", encoding="utf-8")
        result.notes.append(f"evidence report: {args.report}")
    return result
