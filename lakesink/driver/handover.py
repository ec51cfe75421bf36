"""Handing a job over from another connector: the job starts where the old connector stopped.

:func:`handover` takes the offsets the old connector had archived up to, per partition: the committed offsets of
its Kafka Connect consumer group (``connect-<connector name>``, read by :mod:`lakesink.executor.committed`) or
offsets given per partition (``topic:partition=offset,...``, :func:`parse_start_offsets`), and commits, in ONE
manifest transaction, an ``advance`` row per partition from where the job's manifest stands (offset 0 for a
partition it has never archived) up to the offset before the given one, its note naming the source. The sink then
resumes each partition at the given offset, so nothing the old connector archived is archived twice, and the
``gaps`` view shows why the job's history starts there.

Run it once, before the job's first sink and after ``lakesink manifest import`` of the old connector's objects
(the import refuses objects inside ranges the manifest already holds). A partition whose manifest is already at or
beyond the given offset is left as it is (reported); a partition the group has no offset for is reported too: the
sink archives it from its beginning, as the old connector never committed anything for it.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from lakesink import wiring
from lakesink.driver.archive import as_config
from lakesink.errors import InvalidArgumentError
from lakesink.manifest.rows import advance_row

__all__ = ["HandoverReport", "parse_start_offsets", "handover"]


@dataclass
class HandoverReport:
    """What :func:`handover` committed (``batch_id`` None: nothing)."""

    source: str
    #: (topic, partition, range start, range end): the advance rows, offsets the old connector archived
    advanced: list[tuple[str, int, int, int]] = field(default_factory=list)
    #: (topic, partition, the manifest's next offset, the given offset): already there, left as they are
    already: list[tuple[str, int, int, int]] = field(default_factory=list)
    #: partitions of the job without an offset from the source (the sink archives them from their beginning)
    uncovered: list[tuple[str, int]] = field(default_factory=list)
    batch_id: int | None = None
    dry_run: bool = False


def parse_start_offsets(spec: str) -> dict[tuple[str, int], int]:
    """``topic:partition=offset,...`` (e.g. ``orders:0=123,orders:1=456``) → ``{(topic, partition): offset}``."""
    out: dict[tuple[str, int], int] = {}
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        where, eq, off = item.rpartition("=")
        topic, colon, part = where.rpartition(":")
        if not (eq and colon and topic and part.strip().isdigit() and off.strip().isdigit()):
            raise InvalidArgumentError(f"--start-offsets: {item!r} is not topic:partition=offset (e.g. orders:0=123)")
        key = (topic.strip(), int(part))
        if key in out:
            raise InvalidArgumentError(f"--start-offsets: {topic}:{part} is given twice")
        out[key] = int(off)
    if not out:
        raise InvalidArgumentError("--start-offsets: no topic:partition=offset given")
    return out


def handover(spark: Any, config: Any, *, group: str | None = None, start_offsets: dict[tuple[str, int], int] | None = None,
             dry_run: bool = False) -> HandoverReport:
    """Commit the ``advance`` rows that start the config's job where the old connector stopped: at ``group``'s
    committed offsets or at ``start_offsets`` (exactly one of them). ``spark``: a session or a callable returning
    one (only a catalog-table manifest needs it)."""
    from lakesink.driver.group_offsets import read_group_offsets
    from lakesink.driver.kafka_admin import KafkaMetadata

    if (group is None) == (start_offsets is None):
        raise InvalidArgumentError("handover: give either a consumer group or start offsets")
    cfg = as_config(config)
    kafka = KafkaMetadata(cfg.kafka_options, cfg.kafka_retry_deadline_ms / 1000.0)
    topics = kafka.resolve_topics(list(cfg.topics) if cfg.topics else None, cfg.topics_regex)
    ksnap = kafka.snapshot(topics)
    if group is not None:
        source = f"Kafka Connect consumer group {group}"
        found = read_group_offsets(kafka.admin, kafka.conf, (group,), None, sorted(ksnap.bounds),
                                   cfg.kafka_retry_deadline_ms / 1000.0)
        offsets = {(t, p): off for (_g, t, p), (off, _md) in found.items()}
        if not offsets:
            raise InvalidArgumentError(
                f"consumer group {group!r} has no committed offset for the job's topics ({', '.join(topics)}) at "
                f"{kafka.servers}: is it the old connector's group (Kafka Connect names it connect-<connector name>)?")
    else:
        source = "--start-offsets"
        offsets = dict(start_offsets or {})
    report = HandoverReport(source=source, dry_run=dry_run)
    for (t, p), off in sorted(offsets.items()):
        b = ksnap.bounds.get((t, p))
        if b is None:
            raise InvalidArgumentError(f"{source}: {t}-{p} is not a partition of the job's topics "
                                       f"({', '.join(topics)})")
        if off > b.latest:
            raise InvalidArgumentError(f"{source}: offset {off} of {t}-{p} is beyond its latest offset {b.latest}")
    manifest = wiring.manifest(cfg, spark)
    state = manifest.snapshot(cfg.name).partitions if manifest.exists() else {}
    rows = []
    for (t, p) in sorted(ksnap.bounds):
        if (t, p) not in offsets:
            report.uncovered.append((t, p))
            continue
        off = offsets[(t, p)]
        held = state.get((t, p))
        start = held.next_offset if held is not None else 0
        if off <= start:
            report.already.append((t, p, start, off))
            continue
        rows.append(advance_row(t, p, start, off - 1, f"handed over: archived by the old connector (offsets from "
                                                      f"{source})",
                                kafka_cluster_id=ksnap.cluster_id, topic_id=ksnap.topic_ids.get(t)))
        report.advanced.append((t, p, start, off - 1))
    if rows and not dry_run:
        manifest.ensure()
        batch_id = manifest.snapshot(cfg.name).next_batch_id
        manifest.commit(cfg.name, batch_id, f"handover-{uuid.uuid4().hex[:12]}", rows)
        report.batch_id = batch_id
    return report
