"""`lakesink restore --config FILE --where "…" (--to-topic T | --topic-map REGEX=REPLACEMENT)`: archived records
back to Kafka, exactly once (see :mod:`lakesink.driver.restore`)."""
from __future__ import annotations

import argparse

from lakesink.cli.output import RestoreResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("restore", help="restore archived records chosen by SQL over the manifest to Kafka, exactly once")
    p.add_argument("--config", required=True, help="the sink job's config (.properties, Connect JSON or YAML)")
    p.add_argument("--where", default=None,
                   help="a boolean expression over the manifest's columns choosing the job's objects, e.g. "
                        "\"topic = 'orders' AND kafka_partition = 0\" (default: every object of the job)")
    dest = p.add_mutually_exclusive_group(required=True)
    dest.add_argument("--to-topic", default=None, help="restore every source topic into this topic")
    dest.add_argument("--topic-map", default=None, metavar="REGEX=REPLACEMENT",
                      help="destination per source topic: REGEX (matching the whole topic) replaced by "
                           "REPLACEMENT, e.g. '(.*)=copy_of_\\1'")
    p.add_argument("--from-offset", type=int, default=None, help="first source offset (inclusive, every partition)")
    p.add_argument("--to-offset", type=int, default=None, help="last source offset (inclusive, every partition)")
    p.add_argument("--from-time", default=None, help="first record timestamp, ISO-8601 (UTC without a zone)")
    p.add_argument("--to-time", default=None, help="last record timestamp, ISO-8601 (inclusive)")
    p.add_argument("--latest-per-key", action="store_true",
                   help="produce only the last selected record of each key of each source partition, in source-offset "
                        "order (a compacted topic's latest state; tombstones kept); the archive must hold the keys "
                        "(store.kafka.keys=true)")
    p.add_argument("--drop-tombstones", action="store_true",
                   help="with --latest-per-key: leave out a key whose last record is a tombstone (null value)")
    p.add_argument("--partitioner", default=None, metavar="default",
                   help="restore into a topic with another partition count: 'default' puts each record where the Java "
                        "producer's default partitioner puts its key (murmur2); keyless records keep their source "
                        "partition number modulo the destination's count. Each key's records stay in order")
    p.add_argument("--partition-map", default=None, metavar="SRC=DEST,...",
                   help="restore into a topic with another partition count: every record of source partition SRC "
                        "goes to destination partition DEST, e.g. 0=0,1=0,2=1,3=1 (every source partition read "
                        "must be named)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the objects, records and bytes the restore would read (from the manifest alone) and, "
                        "with --partitioner / --partition-map, where they would go (this reads the destination "
                        "topic's partition count)")
    p.add_argument("--name", default=None,
                   help="keep this restore's progress in a group of its own, lakesink-restore-NAME (default: the "
                        "cluster's lakesink-restore group, where every restore sees what earlier ones produced "
                        "into its destination and skips it)")
    p.add_argument("--again", action="store_true",
                   help="produce records even where an earlier restore already produced them into the destination "
                        "(duplicates); without it they are skipped, or the restore refuses when it cannot tell")
    p.add_argument("--force", action="store_true",
                   help="restore even into a topic a sink job of this manifest archives (a feedback loop)")
    p.add_argument("--target-registry", default=None, metavar="URL",
                   help="restore into another Schema Registry: the schemas the archive's wire-format values and keys "
                        "use are copied from the config's schema.registry.url to URL, and each record's schema id is "
                        "rewritten to the target's (datum bytes unchanged; see --target-registry-ids)")
    p.add_argument("--target-registry-config", default=None, metavar="FILE",
                   help="the target registry's settings, the sink's schema.registry.* keys (.properties, JSON or "
                        "YAML: schema.registry.url, schema.registry.basic.auth.user.info, "
                        "schema.registry.basic.auth.credentials.source, schema.registry.ssl.*, ${env:VAR} "
                        "references); credentials go here, never on the command line")
    p.add_argument("--target-registry-ids", choices=("value", "key", "both"), default=None,
                   help="which schema ids to rewrite (default: what the archive gives back in wire format: values "
                        "with value.decoder=avro in Avro/Parquet objects, keys with key.decoder=avro in Avro keys "
                        "files); for a ByteArray archive of raw wire-format bytes (Avro, Protobuf, JSON Schema)")
    p.add_argument("--target-subject-strategy", choices=("topic", "source"), default="topic",
                   help="subject the copied schemas are registered under: topic (default: TopicNameStrategy on the "
                        "destination topic, <topic>-value / <topic>-key) or source (the subjects the source "
                        "registry has them under)")
    p.add_argument("--groups", default=None, metavar="G1,G2",
                   help="consumer groups to place on the destination: each group's archived committed offset (the "
                        "sink's consumer.groups) becomes the offset of the first restored record it had not "
                        "consumed, committed in the restore's transactions, only while the group has no members")
    p.add_argument("--groups-regex", default=None, metavar="REGEX",
                   help="also every archived group this regular expression matches (with --groups: the union)")
    p.add_argument("--max-rate", type=float, default=None, metavar="RECORDS_PER_S",
                   help="produce at most this many records a second per task (one source partition each; a restore "
                        "of P partitions at once produces up to P times this): to spare a live destination cluster")
    p.add_argument("--master", default=None, help="Spark master for a local run")
    p.add_argument("--engine", choices=("auto", "spark", "local"), default="auto",
                   help="what runs the restore's tasks: auto (default) = local worker processes (no JVM) for a path "
                        "manifest on a local master, else Spark; as `lakesink sink --engine`")
    from lakesink.cli.progress import add_arguments

    add_arguments(p, "the restore's")
    p.set_defaults(func=run)


def parse_topic_map(text: str) -> tuple[str, str]:
    """``REGEX=REPLACEMENT`` split at the last ``=`` (a topic name, hence a replacement, holds no ``=``)."""
    from lakesink.errors import InvalidArgumentError

    if "=" not in text:
        raise InvalidArgumentError(f"--topic-map {text!r}: expected REGEX=REPLACEMENT")
    regex, replacement = text.rsplit("=", 1)
    if not regex or not replacement:
        raise InvalidArgumentError(f"--topic-map {text!r}: expected REGEX=REPLACEMENT, both non-empty")
    return regex, replacement


def run(args: argparse.Namespace, output) -> RestoreResult:
    from lakesink.config import load_config
    from lakesink.runtime.engine import open_engine
    from lakesink.driver.restore import restore

    from lakesink.driver.preflight import check_broker, check_stores
    from lakesink.errors import InvalidArgumentError

    if args.partitioner is not None and args.partition_map is not None:
        raise InvalidArgumentError("--partitioner and --partition-map exclude each other: give one of them")
    if args.drop_tombstones and not args.latest_per_key:
        raise InvalidArgumentError("--drop-tombstones needs --latest-per-key (a restore of every record keeps its "
                                   "tombstones)")
    from lakesink.cli.progress import display_for

    target = target_registry(args)
    display = display_for(args)  # a bad --progress-every fails before anything starts
    cfg = load_config(args.config)
    # sink's preflight, before the manifest read (whose own error would not say what is missing): missing S3
    # credentials exit 3; a dead S3 endpoint, a refused Kafka login, an untrusted certificate, a broker that does
    # not resolve or refuses exit 5 at the first answer. A dry run reads the manifest alone: no broker check.
    check_stores(cfg, writes=False)
    routed = args.partitioner is not None or args.partition_map is not None
    if not args.dry_run or routed:  # a routed dry run reads the destination's partition count
        check_broker(cfg)
    topic_map = parse_topic_map(args.topic_map) if args.topic_map is not None else None
    # a dry run reads the manifest alone: no task runner, and Spark only for a catalog manifest
    with open_engine(cfg, args.engine, args.master, in_advance=not args.dry_run) as eng, display:
        report = restore(eng.spark, cfg, args.where, to_topic=args.to_topic, topic_map=topic_map,
                         from_offset=args.from_offset, to_offset=args.to_offset, from_time=args.from_time,
                         to_time=args.to_time, dry_run=args.dry_run, name=args.name, force=args.force,
                         again=args.again, latest_per_key=args.latest_per_key, drop_tombstones=args.drop_tombstones,
                         runner=eng.runner, target_registry=target,
                         target_subject_strategy=args.target_subject_strategy,
                         target_registry_roles=args.target_registry_ids, partitioner=args.partitioner,
                         partition_map=args.partition_map, groups=args.groups, groups_regex=args.groups_regex,
                         max_rate=args.max_rate, on_progress=display)
    return RestoreResult(report=report)


def target_registry(args: argparse.Namespace):
    """The target registry's settings from --target-registry and --target-registry-config (None: neither)."""
    from pathlib import Path

    from lakesink.config.parse import flatten, read_source
    from lakesink.driver.restore_registry import target_registry_settings
    from lakesink.errors import ConfigError, ConfigProblem, InvalidArgumentError

    if args.target_registry is None and args.target_registry_config is None:
        if args.target_subject_strategy != "topic" or args.target_registry_ids is not None:
            raise InvalidArgumentError("--target-subject-strategy and --target-registry-ids need --target-registry")
        return None
    keys: dict = {}
    source = None
    if args.target_registry_config is not None:
        path = Path(args.target_registry_config)
        if not path.is_file():
            raise ConfigError([ConfigProblem("<file>", str(path), "target registry config file not found")], str(path))
        flat, _name = read_source(path)
        keys, source = flatten(flat), str(path)
    if args.target_registry is not None:
        if "schema.registry.url" in keys or "url" in keys:
            raise InvalidArgumentError(f"--target-registry and {source} both give the target registry's URL: give "
                                       f"it once")
        keys["schema.registry.url"] = args.target_registry
    return target_registry_settings(keys, source)
