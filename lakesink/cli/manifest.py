"""`lakesink manifest import --config FILE [--prefix topics/]`: adopt objects no manifest row describes (a bucket
written by Confluent's S3 sink, or by lakesink without a manifest); see :mod:`lakesink.driver.manifest_import`."""
from __future__ import annotations

import argparse

from lakesink.cli.output import HandoverResult, ImportResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("manifest", help="manifest maintenance: import an archive that has no manifest; hand a job "
                                        "over from another connector")
    m_sub = m.add_subparsers(dest="manifest_command", metavar="ACTION")
    m.set_defaults(func=lambda args, output: (m.print_help(), 2)[1])
    p = m_sub.add_parser("import", help="commit manifest rows for the config's objects that no row describes yet "
                                        "(Confluent S3 sink buckets), in one transaction")
    p.add_argument("--config", required=True, help="a config describing the objects (format, topics.dir, "
                                                   "partitioner delimiters, bucket) and the manifest to commit to")
    p.add_argument("--prefix", default=None, help="only keys under this prefix (default: topics.dir)")
    p.add_argument("--from", dest="old_config", metavar="OLD_CONFIG", default=None,
                   help="the old connector's config (Aiven, DeviantArt/Spredfast, Zooz): adopt its objects in its own "
                        "naming and format (default: Confluent's naming, as the config builds it)")
    p.add_argument("--dry-run", action="store_true", help="report what would be imported; commit nothing")
    p.add_argument("--master", default=None, help="Spark master (only a catalog-table manifest needs Spark)")
    p.set_defaults(func=run)
    h = m_sub.add_parser("handover", help="start the job where another connector stopped: commit an `advance` row per "
                                          "partition up to the offsets of its Kafka Connect consumer group (or given "
                                          "ones), so the sink archives nothing it had archived; run once, after "
                                          "`manifest import`")
    h.add_argument("--config", required=True, help="the job's (translated) config")
    src = h.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-group", metavar="GROUP", help="the old connector's consumer group (Kafka Connect: "
                                                           "connect-<connector name>); its committed offsets")
    src.add_argument("--start-offsets", metavar="SPEC", help="the first offset to archive per partition: "
                                                             "topic:partition=offset,... (e.g. orders:0=123,orders:1=9)")
    h.add_argument("--dry-run", action="store_true", help="report the advance rows; commit nothing")
    h.add_argument("--master", default=None, help="Spark master (only a catalog-table manifest needs Spark)")
    h.set_defaults(func=run_handover)


def run_handover(args: argparse.Namespace, output) -> HandoverResult:
    from lakesink.runtime.session import session
    from lakesink.config import load_config
    from lakesink.driver.handover import handover, parse_start_offsets

    starts = parse_start_offsets(args.start_offsets) if args.start_offsets is not None else None
    cfg = load_config(args.config)
    report = handover(lambda: session(cfg, args.master), cfg, group=args.from_group, start_offsets=starts,
                      dry_run=args.dry_run)
    return HandoverResult(report=report)


def run(args: argparse.Namespace, output) -> ImportResult:
    from lakesink import wiring
    from lakesink.runtime.session import session
    from lakesink.config import load_config
    from lakesink.driver.manifest_import import import_archive
    from lakesink.store import open_store

    cfg = load_config(args.config)
    naming = None
    if args.old_config is not None:
        naming = _old_naming(args.old_config, args.prefix)
    report = import_archive(lambda: session(cfg, args.master), cfg, args.prefix, dry_run=args.dry_run, naming=naming)
    return ImportResult(report=report, uri=open_store(wiring.store_settings(cfg)).uri)


def _old_naming(path: str, prefix: str | None):
    """The naming of the objects the connector configured by ``path`` wrote (its own config file: Connect JSON,
    .properties, YAML, or Zooz's KEY=VALUE lines)."""
    from pathlib import Path

    from lakesink.config.parse import flatten, read_source
    from lakesink.driver.import_formats import foreign_naming
    from lakesink.errors import ConfigError, ConfigProblem

    p = Path(path)
    if not p.is_file():
        raise ConfigError([ConfigProblem("<file>", str(p), "config file not found (--from)")], str(p))
    flat, _name = read_source(p)
    return foreign_naming(flatten(flat), prefix)
