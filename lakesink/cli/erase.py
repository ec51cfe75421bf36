"""`lakesink erase --config FILE --where "<predicate over records>" [--execute]`: list (and with --execute remove)
the archived records the predicate selects, rewriting their objects under the same keys (see
:mod:`lakesink.driver.erase`)."""
from __future__ import annotations

import argparse

from lakesink.cli.results import TableResult

COLUMNS = ["topic", "kafka_partition", "object_key", "records", "erased", "offsets"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    from lakesink.runtime.engine import ENGINES

    p = sub.add_parser("erase", help="erasure: list (and with --execute remove) the archived records a predicate "
                                     "selects; objects are rewritten under the same keys and the manifest records "
                                     "the erasure")
    p.add_argument("--config", required=True, help="the sink job's config (.properties, Connect JSON or YAML)")
    p.add_argument("--where", required=True, metavar="PREDICATE",
                   help="one boolean Spark SQL expression over records: topic, partition, offset, timestamp, key, "
                        "value (decoded: value.field), value_bytes, headers; e.g. \"key = 'customer-42'\"")
    p.add_argument("--execute", action="store_true", help="erase; without it, a dry run")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="where the plan reads the objects: local worker processes, Spark, or auto (local for a path "
                        "manifest on a local master)")
    p.add_argument("--master", default=None, help="Spark master")
    p.set_defaults(func=run)


def report_table(rep) -> TableResult:
    rows = [(m.row["topic"], m.row["kafka_partition"], m.row["object_key"], m.records, len(m.offsets), m.runs)
            for m in rep.matched]
    verb = "erased" if rep.executed else "would erase"
    pruned = f"; {rep.pruned} object(s) ruled out by the manifest" if rep.pruned else ""
    notes = [f"job {rep.job}: {verb} {rep.records} record(s) in {len(rep.matched)} object(s) "
             f"({rep.scanned_records} record(s) in {rep.scanned_objects} object(s) scanned{pruned}) where {rep.where}"]
    if rep.unfinished:
        notes.append(f"{'finished' if rep.executed else 'would finish'} {len(rep.unfinished)} object(s) an earlier "
                     f"erase staged but did not commit")
    for line in rep.skipped:
        notes.append(f"left alone: {line}")
    if rep.executed:
        notes.append(f"run {rep.run_id}: {rep.committed} object(s) rewritten and committed, "
                     f"{len(rep.deleted_versions)} old version(s) deleted")
    else:
        notes.append("dry run: nothing changed (add --execute)")
    return TableResult(COLUMNS, rows, notes=notes)


def run(args: argparse.Namespace, output) -> TableResult:
    from lakesink.config import load_config
    from lakesink.driver.erase import erase
    from lakesink.driver.preflight import check_stores
    from lakesink.manifest.queries import RECORD_PREDICATE_HINT, where_predicate

    where_predicate(args.where, hint=RECORD_PREDICATE_HINT)  # a refused predicate fails before any service
    cfg = load_config(args.config)
    check_stores(cfg, writes=args.execute)
    import contextlib

    from lakesink.runtime.engine import open_engine

    with contextlib.ExitStack() as stack:  # the plan's tasks run there (auto: a plan of one task runs here)
        def runner():
            return stack.enter_context(open_engine(cfg, args.engine, args.master, in_advance=False)).runner

        return report_table(erase(cfg, args.where, execute=args.execute,
                                  runner=runner if args.engine == "auto" else runner()))
