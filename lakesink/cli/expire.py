"""`lakesink expire --config FILE --older-than 400d [--execute]`: list (and with --execute delete) the job's archived
objects whose newest record is older than the limit (see :mod:`lakesink.driver.expire`)."""
from __future__ import annotations

import argparse

from lakesink.cli.results import TableResult

COLUMNS = ["topic", "kafka_partition", "first_offset", "last_offset", "records", "newest_record", "object_key"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("expire", help="retention: list (and with --execute delete) archived objects whose newest "
                                      "record is older than --older-than; the manifest records them as expired")
    p.add_argument("--config", required=True, help="the sink job's config (.properties, Connect JSON or YAML)")
    p.add_argument("--older-than", default=None, metavar="AGE",
                   help="expire objects whose newest record is older than this (e.g. 400d, 2w, 12h); default: the "
                        "config's archive.retention.ms")
    p.add_argument("--execute", action="store_true", help="expire; without it, a dry run")
    p.set_defaults(func=run)


def report_table(rep) -> TableResult:
    rows = [(r["topic"], r["kafka_partition"], r["first_offset"], r["last_offset"], r["record_count"],
             r["max_timestamp"], r["object_key"]) for r in rep.due]
    verb = "expired" if rep.executed else "would expire"
    notes = [f"job {rep.job}: {verb} {len(rep.due)} object(s), {rep.records} record(s) whose newest record is "
             f"older than {rep.older_than} (before {rep.cutoff:%Y-%m-%d %H:%M:%S} UTC)"]
    if rep.kept_untimed:
        notes.append(f"kept {rep.kept_untimed} object(s) without record timestamps (never expired)")
    if rep.unfinished:
        notes.append(f"{'finished deleting' if rep.executed else 'would finish deleting'} {len(rep.unfinished)} "
                     f"object(s) an earlier expire committed but did not delete")
    if rep.executed:
        notes.append(f"run {rep.run_id}: {rep.committed} expired row(s) committed, {len(rep.deleted)} file(s) "
                     f"deleted")
    else:
        notes.append("dry run: nothing changed (add --execute)")
    return TableResult(COLUMNS, rows, notes=notes)


def run(args: argparse.Namespace, output) -> TableResult:
    from lakesink.config import load_config
    from lakesink.driver.expire import expire, parse_age
    from lakesink.driver.preflight import check_stores

    age = parse_age(args.older_than) if args.older_than is not None else None  # fails before any service
    cfg = load_config(args.config)
    if age is None:
        age, text = retention_of(cfg)
    else:
        text = args.older_than.strip()
    check_stores(cfg, writes=args.execute)
    return report_table(expire(cfg, age, text, execute=args.execute))


def retention_of(cfg) -> tuple[float, str]:
    """The config's ``archive.retention.ms`` as (seconds, how the note says it); one line when it is unset."""
    from lakesink.errors import InvalidArgumentError

    ms = cfg.archive_retention_ms
    if ms <= 0:
        raise InvalidArgumentError(f"{cfg.source or 'config'}: no age limit: pass --older-than AGE or set "
                                   f"archive.retention.ms in the config")
    return ms / 1000, f"archive.retention.ms={ms}"
