"""Restore on the driver: which objects, where they go, the checks, and one Spark task per destination partition.

:func:`restore` queries the manifest (a Spark SQL predicate, :func:`lakesink.driver.archive.select_objects`),
groups the committed objects by source partition and maps each to the destination topic (``to_topic``, or
``topic_map=(REGEX, REPLACEMENT)`` applied to the source topic), same partition number. Before anything is
produced it checks, in this order, and refuses with one line:

1. two source partitions mapping to one destination partition;
2. a destination topic that a sink job of the same manifest archives (any job's rows, and this config's
   ``topics`` / ``topics.regex``): restoring into it would archive the restored records again (the feedback
   loop Confluent's docs warn about), unless ``force``;
3. (not in a dry run) a destination topic that does not exist or has too few partitions (AdminClient);
4. (not in a dry run) members in the restore's progress group ``lakesink-restore-<name>``;
5. (not in a dry run) every object and side file still holds the ETag the manifest recorded (one HEAD each).

Then each destination partition is restored by :func:`lakesink.executor.restore.restore_partition` in its own
Spark task (transactional producer, progress in the same Kafka transaction, so a rerun with the same ``name``
resumes with no duplicate and no gap). A dry run stops after the manifest-only checks and reports the objects,
records and bytes the restore would read (:func:`lakesink.executor.restore.dry_run`; Spark evaluates the
where clause, nothing else is touched).

The restore's **name** is its resume key (progress group and transactional ids derive from it). Default:
``<job>-<12 hex digits>``, a digest of the where clause, the destination (``to_topic`` or ``topic_map``) and
the offset/time bounds, so running the same command again resumes the same restore and any other selection is
a new one.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from lakesink import wiring
from lakesink.driver.archive import as_config, manifest_frame, resolve_source, select_objects
from lakesink.errors import (InvalidArgumentError, ObjectChangedError, RestoreError, RestoreRefusedError,
                             StoreError)
from lakesink.executor.readback import ArchivedObject, Cut
from lakesink.executor.restore import check_group_idle, progress_group
from lakesink.executor.restore import dry_run as summarize

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.config import SinkConfig

__all__ = ["PartitionRestore", "RestoreReport", "restore", "plan_partitions", "default_name", "parse_time", "destination_topic",
           "archived_topics"]


@dataclass
class PartitionRestore:
    """One destination partition: what the manifest says it holds (``objects``, ``records``, ``bytes``; with
    ``exact`` False the records are an upper bound) and, after a run, what the worker did: ``produced``
    records, ``skipped`` (planned but already restored by an earlier run of this restore), ``resumed_from``
    (the next source offset an earlier run committed), ``next_offset`` (the progress committed now)."""

    source_topic: str
    source_partition: int
    topic: str
    partition: int
    objects: int
    records: int
    bytes: int
    exact: bool = True
    produced: int = 0
    skipped: int = 0
    transactions: int = 0
    resumed_from: int | None = None
    next_offset: int | None = None
    seconds: float = 0.0


@dataclass
class RestoreReport:
    """What :func:`restore` did (or, with ``dry_run``, would read)."""

    name: str
    group: str
    dry_run: bool
    partitions: list[PartitionRestore] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def objects(self) -> int:
        return sum(p.objects for p in self.partitions)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)

    @property
    def produced(self) -> int:
        return sum(p.produced for p in self.partitions)

    @property
    def skipped(self) -> int:
        return sum(p.skipped for p in self.partitions)

    @property
    def exact(self) -> bool:
        return all(p.exact for p in self.partitions)


def parse_time(value: Any, what: str) -> int | None:
    """Epoch milliseconds from an ISO-8601 string (no zone: UTC), a datetime or epoch milliseconds."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgumentError(f"{what} {value!r} is not an ISO-8601 time (e.g. 2026-11-01T12:00:00Z)") from None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    raise InvalidArgumentError(f"{what} must be an ISO-8601 string, a datetime or epoch milliseconds, not {value!r}")


def default_name(cfg: "SinkConfig", where: str | None, to_topic: str | None, topic_map: tuple[str, str] | None,
                 cut: Cut) -> str:
    """``<job>-<digest>`` of the selection and destination: the same command resumes the same restore."""
    key = json.dumps([where or "", to_topic, list(topic_map) if topic_map else None,
                      [cut.from_offset, cut.to_offset, cut.from_ts, cut.to_ts]])
    return f"{cfg.name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def destination_topic(source: str, to_topic: str | None, topic_map: tuple[str, str] | None) -> str:
    """The destination of ``source``: ``to_topic``, or ``topic_map``'s REGEX (matching the whole source topic)
    replaced by REPLACEMENT (``\\1`` / ``\\g<name>`` groups)."""
    if to_topic is not None:
        return to_topic
    pattern, replacement = topic_map  # type: ignore[misc]
    try:
        m = re.fullmatch(pattern, source)
    except re.error as e:
        raise InvalidArgumentError(f"--topic-map regex {pattern!r}: {e}") from None
    if m is None:
        raise RestoreRefusedError(f"--topic-map regex {pattern!r} does not match source topic {source!r}")
    try:
        return m.expand(replacement)
    except (re.error, IndexError) as e:
        raise InvalidArgumentError(f"--topic-map replacement {replacement!r}: {e}") from None


def archived_topics(spark, manifest: Any) -> set[str]:
    """Every topic any job of ``manifest`` archives (its rows' topics)."""
    if hasattr(manifest, "arrow"):
        return set(manifest.arrow(["topic"]).column("topic").to_pylist()) if manifest.exists() else set()
    return {r.topic for r in manifest_frame(spark, manifest).select("topic").distinct().collect()}


def _check_feedback(spark, cfg: "SinkConfig", manifest: Any, dests: set[str], force: bool) -> None:
    archived = archived_topics(spark, manifest) | set(cfg.topics or ())
    regex = re.compile(cfg.topics_regex) if cfg.topics_regex else None
    loops = sorted(t for t in dests if t in archived or (regex is not None and regex.fullmatch(t)))
    if loops and not force:
        raise RestoreRefusedError(
            f"refusing to restore into {', '.join(loops)}: a sink job of manifest {manifest.location} archives "
            f"it, so the restored records would be archived again (a feedback loop); restore into another topic "
            f"or pass --force")


def _check_destinations(admin, parts: list[PartitionRestore], timeout_s: float) -> None:
    need: dict[str, int] = {}
    for p in parts:
        need[p.topic] = max(need.get(p.topic, 0), p.partition + 1)
    try:
        meta = admin.list_topics(timeout=timeout_s)
    except Exception as e:  # noqa: BLE001 - KafkaException: broker unreachable
        raise RestoreError(f"cannot read the destination cluster's topics: {e}") from None
    for topic, n in sorted(need.items()):
        t = meta.topics.get(topic)
        if t is None or t.error is not None:
            raise RestoreRefusedError(f"destination topic {topic!r} does not exist: create it with at least {n} "
                                      f"partition(s) first (nothing was produced)")
        if len(t.partitions) < n:
            raise RestoreRefusedError(f"destination topic {topic!r} has {len(t.partitions)} partition(s), the "
                                      f"restore needs {n} (it keeps partition numbers; nothing was produced)")


def _check_objects(store, objects: list[ArchivedObject]) -> None:
    expected: dict[str, str | None] = {}
    for o in objects:
        expected[o.object_key] = o.etag
        expected.update((s["key"], s.get("etag")) for s in o.side_files if s.get("key"))
    with ThreadPoolExecutor(max_workers=16) as pool:  # HEADs are latency-bound: overlap them
        current = dict(zip(expected, pool.map(store.head, expected)))
    for key, etag in expected.items():
        info = current[key]
        if info is None:
            raise StoreError(f"{store.uri(key)} is missing: the manifest records it (etag {etag}); nothing was "
                             f"produced")
        if etag is not None and info.etag != etag:
            raise ObjectChangedError(f"{store.uri(key)} was altered after it was archived: etag {info.etag}, the "
                                     f"manifest recorded {etag}; nothing was produced")


def plan_partitions(objects: list[ArchivedObject], to_topic: str | None, topic_map: tuple[str, str] | None,
                    cut: Cut) -> list[tuple[PartitionRestore, list[ArchivedObject]]]:
    """Objects grouped by source partition, each group's destination (same partition number) and what the
    manifest says it holds inside ``cut``; groups with nothing inside the cut are left out. Refuses two
    sources mapping to one destination partition."""
    by_source: dict[tuple[str, int], list[ArchivedObject]] = {}
    for o in objects:
        by_source.setdefault((o.topic, o.kafka_partition), []).append(o)
    out: list[tuple[PartitionRestore, list[ArchivedObject]]] = []
    taken: dict[tuple[str, int], tuple[str, int]] = {}
    for (src_topic, src_part), objs in sorted(by_source.items()):
        dest = (destination_topic(src_topic, to_topic, topic_map), src_part)
        if dest in taken:
            other = taken[dest]
            raise RestoreRefusedError(f"{other[0]}-{other[1]} and {src_topic}-{src_part} would both be restored to "
                                      f"{dest[0]}-{dest[1]}: map them to different topics")
        taken[dest] = (src_topic, src_part)
        plan = summarize(objs, cut)
        if plan.objects:
            out.append((PartitionRestore(src_topic, src_part, dest[0], dest[1], plan.objects, plan.records,
                                         plan.bytes, plan.exact),
                        sorted((o for o in objs if cut.object_overlap(o) is not False), key=lambda o: o.first_offset)))
    return out


def restore(spark, config: Any, where: str | None = None, *, to_topic: str | None = None,
            topic_map: tuple[str, str] | None = None, from_offset: int | None = None, to_offset: int | None = None,
            from_time: Any = None, to_time: Any = None, dry_run: bool = False, name: str | None = None,
            force: bool = False, manifest: Any = None, producer_config: Mapping[str, Any] | None = None,
            records_per_txn: int | None = None, timeout_s: float = 60.0) -> RestoreReport:
    """Restore the archived records of the committed objects ``where`` selects (Spark SQL over the manifest,
    rows of the config's job) to ``to_topic`` or ``topic_map=(REGEX, REPLACEMENT)``, same partition numbers,
    exactly once for ``read_committed`` consumers (see the module docstring for the checks and the name).

    ``from_offset`` / ``to_offset`` (inclusive, source offsets, every partition) and ``from_time`` /
    ``to_time`` (ISO-8601, UTC when no zone; inclusive; CreateTime of the records) cut inside objects.
    ``spark``: a session or a zero-argument callable returning one. ``producer_config``: librdkafka settings
    added to the config's ``kafka.*`` ones (security, ``bootstrap.servers`` of another cluster, ...)."""
    t0 = time.monotonic()
    if (to_topic is None) == (topic_map is None):
        raise InvalidArgumentError("give exactly one of to_topic or topic_map")
    if topic_map is not None and (len(topic_map) != 2 or not all(isinstance(x, str) for x in topic_map)):
        raise InvalidArgumentError(f"topic_map must be (REGEX, REPLACEMENT), not {topic_map!r}")
    if to_topic is not None and not to_topic.strip():
        raise InvalidArgumentError("to_topic must not be empty")
    for what, v in (("from_offset", from_offset), ("to_offset", to_offset)):
        if v is not None and (not isinstance(v, int) or v < 0):
            raise InvalidArgumentError(f"{what} must be an offset >= 0, not {v!r}")
    cut = Cut(from_offset, to_offset, parse_time(from_time, "from_time"), parse_time(to_time, "to_time"))
    if cut.from_offset is not None and cut.to_offset is not None and cut.from_offset > cut.to_offset:
        raise InvalidArgumentError(f"from_offset {from_offset} is after to_offset {to_offset}")
    if cut.from_ts is not None and cut.to_ts is not None and cut.from_ts > cut.to_ts:
        raise InvalidArgumentError(f"from_time {from_time} is after to_time {to_time}")
    session = spark() if callable(spark) else spark
    cfg, manifest = resolve_source(session, manifest if manifest is not None else config, as_config(config))
    name = name or default_name(cfg, where, to_topic, topic_map, cut)
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", name):
        raise InvalidArgumentError(f"restore name {name!r}: use letters, digits, '.', '_' and '-' (it names a "
                                   f"consumer group and transactional ids)")
    report = RestoreReport(name=name, group=progress_group(name), dry_run=dry_run)

    objects = select_objects(session, cfg, manifest, where)
    planned = plan_partitions(objects, to_topic, topic_map, cut)
    report.partitions = [p for p, _objs in planned]
    _check_feedback(session, cfg, manifest, {p.topic for p in report.partitions}, force)
    if dry_run or not report.partitions:
        report.seconds = time.monotonic() - t0
        return report

    from confluent_kafka.admin import AdminClient

    from lakesink.config.kafka import CONSUMER_ONLY
    from lakesink.driver.kafka_admin import client_config
    from lakesink.executor.archive_tasks import RESTORE_RESULT_DDL, PartitionJob, restore_task
    from lakesink.store import open_store

    producer = {**wiring.librdkafka_config(cfg.kafka_options), **dict(producer_config or {})}
    admin = AdminClient({**client_config(cfg.kafka_options),
                         **{k: v for k, v in (producer_config or {}).items() if k not in CONSUMER_ONLY}})
    _check_destinations(admin, report.partitions, timeout_s)
    check_group_idle(admin, report.group, timeout_s)
    _check_objects(open_store(wiring.store_settings(cfg)), [o for _p, objs in planned for o in objs])

    tasks = [PartitionJob(p.source_topic, p.source_partition, p.topic, p.partition, tuple(objs))
             for p, objs in planned]
    options: dict[str, Any] = {"timeout_s": timeout_s}
    if records_per_txn is not None:
        options["records_per_txn"] = records_per_txn
    n = len(tasks)
    # range(n) in n slices: one destination partition per Spark task
    df = session.range(0, n, 1, n).mapInArrow(
        lambda it: restore_task(it, tasks, cfg, name, producer, cut, options), RESTORE_RESULT_DDL)
    try:
        out = df.collect()
    except Exception as e:  # noqa: BLE001 - executor errors arrive wrapped by py4j/PySpark
        from lakesink.driver.sink import executor_error

        raise RestoreError(f"restore {name!r} failed: {executor_error(e)} (every committed transaction stays; "
                           f"run it again with --name {name} to resume)") from e
    for row in out:
        res = json.loads(row.result)
        p = report.partitions[res["id"]]
        p.produced, p.transactions = res["produced"], res["transactions"]
        p.resumed_from, p.next_offset, p.seconds = res["resumed_from"], res["next_offset"], res["seconds"]
        p.skipped = max(0, p.records - p.produced) if p.resumed_from is not None else 0
    report.seconds = time.monotonic() - t0
    return report

