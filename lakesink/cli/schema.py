"""`lakesink schema history|check`: the value schemas an archive holds, and a candidate schema checked against them
(see :mod:`lakesink.driver.schema_check`). Neither starts Spark for a path manifest."""
from __future__ import annotations

import argparse

from lakesink.cli.output import SchemaCheckResult, SchemaHistoryResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("schema", help="value schemas of the archive: history, and checking a schema change")
    s_sub = s.add_subparsers(dest="schema_command", metavar="ACTION")
    s.set_defaults(func=lambda args, output: (s.print_help(), 2)[1])

    h = s_sub.add_parser("history", help="per topic and schema version: id, fingerprint, offsets and times seen, "
                                         "objects (from the manifest)")
    h.add_argument("--config", required=True)
    h.add_argument("--topic", default=None, help="only this topic")
    h.add_argument("--master", default=None, help="Spark master (only a catalog-table manifest needs Spark)")
    h.set_defaults(func=run_history)

    c = s_sub.add_parser("check", help="check a candidate Avro schema against every version the archive (and the "
                                       "registry, when reachable) holds; exit 0 compatible, 1 incompatible or "
                                       "nothing to compare (unless --allow-empty), 2 bad input")
    c.add_argument("--config", required=True)
    c.add_argument("--schema", required=True, metavar="FILE.avsc", help="the candidate Avro schema")
    c.add_argument("--subject", default=None,
                   help="registry subject (default: the config's value.subject.name.strategy for the topic)")
    c.add_argument("--topic", default=None, help="the topic (required when the job archives several)")
    c.add_argument("--mode", default=None, metavar="MODE",
                   help="NONE, BACKWARD, FORWARD, FULL or BACKWARD_TRANSITIVE, FORWARD_TRANSITIVE, FULL_TRANSITIVE "
                        "(default: the config's schema.compatibility); non-transitive modes "
                        "compare with the latest version, transitive ones with all")
    c.add_argument("--no-registry", action="store_true", help="compare with the archive's versions only")
    c.add_argument("--allow-empty", action="store_true",
                   help="pass (exit 0) when there is nothing to compare with (no schema version in the archive, "
                        "e.g. JSON or schemaless objects, nor in the registry); without it that exits 1, so a CI "
                        "gate never passes vacuously")
    c.add_argument("--master", default=None, help="Spark master (only a catalog-table manifest needs Spark)")
    c.set_defaults(func=run_check)


def _spark(args: argparse.Namespace, cfg):
    from lakesink.runtime.session import session

    return lambda: session(cfg, args.master)


def run_history(args: argparse.Namespace, output) -> SchemaHistoryResult:
    from lakesink.config import load_config
    from lakesink.driver.preflight import check_stores
    from lakesink.driver.schema_check import schema_history

    cfg = load_config(args.config)
    check_stores(cfg, writes=False)  # as sink: missing S3 credentials exit 3, an S3 endpoint that does not answer 5
    return SchemaHistoryResult(schema_history(cfg, args.topic, spark=_spark(args, cfg)))


def run_check(args: argparse.Namespace, output) -> SchemaCheckResult:
    from lakesink.config import load_config
    from lakesink.driver.preflight import check_stores
    from lakesink.driver.schema_check import schema_check

    cfg = load_config(args.config)
    check_stores(cfg, writes=False)  # as sink: missing S3 credentials exit 3, an S3 endpoint that does not answer 5
    return SchemaCheckResult(schema_check(cfg, args.schema, subject=args.subject, topic=args.topic, mode=args.mode,
                                          spark=_spark(args, cfg), use_registry=not args.no_registry,
                                          allow_empty=args.allow_empty))
