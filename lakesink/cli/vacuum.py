"""`lakesink vacuum --config FILE`: list (and with --execute delete) objects no manifest row references."""
from __future__ import annotations

import argparse

from lakesink.cli.output import VacuumResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("vacuum", help="list (and with --execute delete) objects no manifest row references")
    p.add_argument("--config", required=True)
    p.add_argument("--retention", default="24h", help="only orphans older than this (default 24h)")
    p.add_argument("--execute", action="store_true", help="delete; without it, a dry run")
    p.add_argument("--delete-unknown", action="append", default=[], metavar="KEY",
                   help="also delete this unreferenced object although it is not recognisably this job's "
                        "upload (a key or URI that vacuum listed as unknown; repeatable)")
    p.add_argument("--master", default=None)
    p.set_defaults(func=run)


def key_of(store, text: str) -> str:
    """A key given as the key itself or as the URI vacuum printed for it."""
    uri = store.uri("")
    return text[len(uri):] if text.startswith(uri) else text


def run(args: argparse.Namespace, output) -> VacuumResult:
    from lakesink.runtime.session import session
    from lakesink.config import load_config
    from lakesink.driver.preflight import check_stores
    from lakesink.driver.sink import parse_interval
    from lakesink.driver.vacuum import vacuum
    from lakesink import wiring
    from lakesink.store import open_store

    cfg = load_config(args.config)
    retention = parse_interval(args.retention)
    # sink's store preflight (no broker: vacuum does not read Kafka): a bucket or endpoint that does not answer
    # fails in seconds with exit 5, missing credentials with exit 3, before the manifest is read
    check_stores(cfg)
    spark = lambda: session(cfg, args.master)  # noqa: E731 - only a catalog-table manifest needs Spark
    store = open_store(wiring.store_settings(cfg))
    named = [key_of(store, k) for k in args.delete_unknown]
    report = vacuum(spark, cfg, retention_s=retention, execute=args.execute, also_delete=named)
    return VacuumResult(report=report, uri=store.uri, execute=args.execute)
