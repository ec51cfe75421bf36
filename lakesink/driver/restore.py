"""Restore on the driver: which objects, where they go, the checks, and one task per source partition.

:func:`restore` queries the manifest (a Spark SQL predicate, :func:`lakesink.driver.archive.select_objects`),
groups the committed objects by source partition and maps each to the destination topic (``to_topic``, or
``topic_map=(REGEX, REPLACEMENT)`` applied to the source topic), same partition number. Before anything is
produced it checks, in this order, and refuses with one line:

1. two source partitions mapping to one destination partition (unless a router places the records, below);
2. a destination topic that a sink job of the same manifest archives (any job's rows, and this config's
   ``topics`` / ``topics.regex``): restoring into it would archive the restored records again (the feedback
   loop Confluent's docs warn about), unless ``force``;
3. (not in a dry run) a destination topic that does not exist or has too few partitions (AdminClient);
4. (not in a dry run) members in the restore's progress group (``lakesink-restore``, see below);
5. (not in a dry run, unless ``again``) a selection that could duplicate records an earlier restore produced
   without recording which (see below);
6. (not in a dry run) every object and side file still holds the ETag the manifest recorded (bounded listings,
   :meth:`~lakesink.store.base.ObjectStore.confirmed_heads`; a HEAD each where listing is refused).

Then each destination partition is restored by :func:`lakesink.executor.restore.restore_partition` (its own
transactional producer, progress in the same Kafka transaction), several partitions to a task
(:func:`task_groups`). A dry run stops after the
manifest-only checks and reports the objects, records and bytes the restore would read
(:func:`lakesink.executor.restore.dry_run`; Spark evaluates the where clause). The records are exact: an object an
offset or time cut falls inside is counted from its record-metadata side file (the only file a dry run reads; an
object without one is counted whole, and the report says the count is an upper bound).

**Exactly once whatever the spelling.** Progress is keyed by what is restored where: per destination
topic-partition, the progress group (``lakesink-restore``, or ``lakesink-restore-<name>`` with ``name``) records
which source offsets of which source topic-partition are already there (:mod:`lakesink.executor.coverage`). Any
later restore into that destination skips those records, whether it is the same command again, another
spelling of it (``--to-topic`` or ``--topic-map``, an equivalent ``--where``), a time window inside an earlier
one, or an overlapping selection (only the new records are produced). Two cases refuse before anything is
produced, naming the earlier restore, unless ``again`` (``--again``: produce them again, duplicates and all):
the selection reaches offsets an earlier restore may have produced only in part (its ``--where`` chose some of
the objects whose offsets interleave there), or offsets that a restore with another ``name`` recorded.

**Another partition count** (``partitioner="default"`` / ``partition_map``, :mod:`lakesink.executor.partitioning`):
:func:`build_routers` reads each destination topic's partition count (a dry run too) and builds its
:class:`~lakesink.executor.partitioning.Router`; a map naming a partition the topic lacks, or leaving out a source
partition the selection reads, is a usage error (exit 2). Several sources may then meet in one destination
partition. Each source partition is one task whose progress lives in a group of its own
(:func:`~lakesink.executor.restore_progress.routed_group`, the routing's spec in its name), so progress written
under another routing -- or by a plain restore -- is another restore's: a selection reaching it is refused unless
``again``, as for a restore with another ``name``.

Size: over the ~500-line guide because the checks of every restore mode (plain, routed, latest per key, another
registry) run in one order before anything is produced; they read best together.

**Latest per key** (``latest_per_key``): each worker produces only the last selected record of each key of its
source partition (:mod:`lakesink.executor.latest`; tombstones too, unless ``drop_tombstones``). The keys come
from the ``.keys`` side files, so a selection with an object archived without one (``store.kafka.keys=false``)
is refused before anything is read, dry run included (exit 2).
"""
from __future__ import annotations

import datetime as dt
import functools
import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from lakesink import wiring
from lakesink.driver.archive import as_config, manifest_frame, resolve_source, split_objects
from lakesink.errors import (InvalidArgumentError, ObjectChangedError, RestoreError, RestoreFencedError,
                             RestoreRefusedError, StoreError)
from lakesink.executor.coverage import Coverage, Interval, SourceCoverage, merge
from lakesink.executor.readback import ArchivedObject, Cut
from lakesink.manifest.rows import object_files
from lakesink.executor.partitioning import KEYLESS_RULE, PARTITIONERS, PartitionMap, Router
from lakesink.executor.restore_progress import check_group_idle, group_coverages, progress_group, routed_group
from lakesink.executor.restore import clusters
from lakesink.executor.restore import dry_run as summarize

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.config import SinkConfig

__all__ = ["PartitionRestore", "RestoreReport", "restore", "plan_partitions", "parse_time", "destination_topic",
           "archived_topics", "unselected_spans", "overlap_refusal", "unrestored", "check_keys_stored", "latest_reads",
           "run_failure", "build_routers"]


@dataclass
class PartitionRestore:
    """One destination partition: what the manifest says it holds (``objects``, ``records``, ``bytes``; with
    ``exact`` False the records are an upper bound) and, after a run, what the worker did: ``produced``
    records, ``skipped`` (records read but already in the destination from an earlier restore), with latest per
    key ``superseded`` (older versions of a key left out) and ``tombstones_dropped``, ``resumed_from``
    (one past the highest source offset earlier restores recorded, None: none), ``next_offset`` (the same after
    this run)."""

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
    superseded: int = 0
    tombstones_dropped: int = 0
    #: objects the worker read (the manifest's bounds leave out those a cut cannot reach; progress, those restored)
    objects_read: int = 0
    #: Avro blocks / Block-GZIP chunks of those objects a cut inside them decoded, and left unread
    blocks_read: int = 0
    blocks_skipped: int = 0
    #: a routed restore (``--partitioner`` / ``--partition-map``; ``partition`` is then -1): where its records go,
    #: e.g. ``orders6-0..5 by key (keyless: orders6-1)`` or ``orders2-1``, and the progress group of its source
    route: str | None = None
    group: str | None = None

    @property
    def destination(self) -> str:
        return f"{self.topic}-{self.partition}" if self.route is None else self.route


@dataclass
class RestoreReport:
    """What :func:`restore` did (or, with ``dry_run``, would read)."""

    name: str | None
    group: str
    dry_run: bool
    partitions: list[PartitionRestore] = field(default_factory=list)
    seconds: float = 0.0
    latest_per_key: bool = False
    drop_tombstones: bool = False
    #: with a target registry: one line per schema copied (``value id 3 -> 12 under orders-value (AVRO)``)
    schema_copies: list[str] = field(default_factory=list)
    #: with groups: one line per consumer group and partition (the plan, or where the run placed it)
    groups: list[str] = field(default_factory=list)
    #: a routed restore: one line per destination topic saying how records are routed there
    routing: list[str] = field(default_factory=list)

    @property
    def mode(self) -> str:
        """What the restore produces: ``every record``, ``latest per key`` or ``latest per key, no tombstones``
        (with latest per key, a dry run's ``records`` is what it reads: an upper bound of what it produces)."""
        if not self.latest_per_key:
            return "every record"
        return "latest per key, no tombstones" if self.drop_tombstones else "latest per key"

    @property
    def superseded(self) -> int:
        return sum(p.superseded for p in self.partitions)

    @property
    def tombstones_dropped(self) -> int:
        return sum(p.tombstones_dropped for p in self.partitions)

    @property
    def objects(self) -> int:
        return sum(p.objects for p in self.partitions)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def objects_read(self) -> int:
        return sum(p.objects_read for p in self.partitions)

    @property
    def blocks_read(self) -> int:
        return sum(p.blocks_read for p in self.partitions)

    @property
    def blocks_skipped(self) -> int:
        return sum(p.blocks_skipped for p in self.partitions)

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
    expected = {key: etag for o in objects for key, etag, _version in object_files(o)}
    current = store.confirmed_heads(expected)  # S3: a listing per directory, not a HEAD per file
    for key, etag in expected.items():
        info = current[key]
        if info is None:
            raise StoreError(f"{store.uri(key)} is missing: the manifest records it (etag {etag}); nothing was "
                             f"produced")
        if etag is not None and info.etag != etag:
            raise ObjectChangedError(f"{store.uri(key)} was altered after it was archived: etag {info.etag}, the "
                                     f"manifest recorded {etag}; nothing was produced")


def unselected_spans(left_out: list[ArchivedObject]) -> dict[tuple[str, int], list[Interval]]:
    """Per source partition, the merged offset spans of the objects a ``--where`` left out: a restore's progress
    must not claim records there."""
    out: dict[tuple[str, int], list[Interval]] = {}
    for o in left_out:
        out.setdefault((o.topic, o.kafka_partition), []).append((o.first_offset, o.last_offset))
    return {k: merge(v) for k, v in out.items()}


def overlap_refusal(part: PartitionRestore, objs: list[ArchivedObject], cut: Cut, own: Coverage,
                    others: dict[str, Coverage], own_group: str) -> str | None:
    """Why restoring ``objs`` into ``part``'s destination could duplicate records (None: it cannot): offsets
    the own group's progress marks as possibly produced in part, or offsets another group's progress records."""
    lo = cut.from_offset if cut.from_offset is not None else 0
    hi = cut.to_offset if cut.to_offset is not None else max((o.last_offset for o in objs), default=-1)
    spans = [(max(o.first_offset, lo), min(o.last_offset, hi)) for o in objs]
    spans = merge([(a, b) for a, b in spans if a <= b])
    where = part.destination
    src = f"{part.source_topic}-{part.source_partition}"
    hit = own.source(part.source_topic, part.source_partition).conflicts(spans)
    if hit:
        a, b = hit[0]
        return (f"offsets {a}-{b} of {src} may already be in {where}: an earlier restore recorded in group "
                f"{own_group!r} produced some of the records there (its --where chose part of the objects whose "
                f"offsets interleave there); nothing was produced: narrow the selection, or pass --again to produce "
                f"them again (duplicates)")
    for group, cov in sorted(others.items()):
        hit = cov.source(part.source_topic, part.source_partition).conflicts(spans, foreign=True)
        if hit:
            a, b = hit[0]
            how = ("restore with that restore's --partitioner / --partition-map (and --name) to skip what it "
                   "produced" if ":" in group else "restore with that restore's --name to skip what it produced")
            return (f"offsets {a}-{b} of {src} were already restored into {where} by the restore recorded in group "
                    f"{group!r}; nothing was produced: {how}, or pass --again to produce them again (duplicates)")
    return None


def unrestored(objs: list[ArchivedObject], cut: Cut, done: SourceCoverage) -> list[ArchivedObject]:
    """The objects of ``objs`` a restore with ``cut`` still reads: not those whose every record inside the cut is
    already in the destination (``done``), which the workers skip unread."""
    return [o for o in objs if not (cut.object_overlap(o) is True and
                                    done.holds(o.first_offset, o.last_offset, o.min_timestamp_ms, o.max_timestamp_ms))]


def check_keys_stored(objects: list[ArchivedObject]) -> None:
    """Refuse a latest-per-key restore of objects archived without their keys (no ``.keys`` side file)."""
    from lakesink import plugins
    from lakesink.objects.formats import format_kind

    keyless = [o for o in objects if o.side("keys") is None]
    adopted = [o for o in keyless if o.format and format_kind(o.format) == "import_format"]
    if adopted:
        o = adopted[0]
        inside = ("any keys are inside its own lines, and this restore does not read them there"
                  if plugins.load("import_format", o.format).holds_record_parts else "it holds values only")
        raise InvalidArgumentError(
            f"--latest-per-key reads each record's key from lakesink's keys side files, and {len(adopted)} selected "
            f"object(s) were adopted from another archiver by `lakesink manifest import` (format {o.format}: "
            f"{inside}), e.g. {o.object_key} ({o.topic}-"
            f"{o.kafka_partition}@{o.first_offset}..{o.last_offset}): restore them without --latest-per-key, or "
            f"narrow --where to objects lakesink archived with store.kafka.keys=true; nothing was read")
    if keyless:
        raise InvalidArgumentError(
            f"--latest-per-key needs each record's key, and {len(keyless)} selected object(s) were archived without "
            f"a keys side file (store.kafka.keys=false), e.g. {keyless[0].object_key} ({keyless[0].topic}-"
            f"{keyless[0].kafka_partition}@{keyless[0].first_offset}..{keyless[0].last_offset}): restore without "
            f"--latest-per-key, or narrow --where to objects archived with keys; nothing was read")


def latest_reads(objs: list[ArchivedObject], cut: Cut, done: SourceCoverage) -> list[ArchivedObject]:
    """The objects of ``objs`` (one source partition) a latest-per-key restore reads: from the first commit
    group of objects not wholly in the destination (``done``) on, covered or not (a later version of a key
    supersedes an earlier record wherever it is); the covered groups before it are skipped unread."""
    out: list[ArchivedObject] = []
    for cluster in clusters(sorted(objs, key=lambda o: (o.first_offset, o.last_offset))):
        members = [o for o in cluster if cut.object_overlap(o) is not False]
        if out or not all(cut.object_overlap(o) is True and done.holds(o.first_offset, o.last_offset,
                                                                      o.min_timestamp_ms, o.max_timestamp_ms)
                          for o in members):
            out += members
    return out


def run_failure(cause: str, name: str | None) -> RestoreError:
    """The error of a restore whose task failed with ``cause`` (the task's own error line): a fencing by a newer
    restore into the same partition is :class:`RestoreFencedError` (exit 4, like the sink's lost race); a worker's
    refusal stays a :class:`RestoreRefusedError`, without the advice to run it again."""
    label = "restore" if name is None else f"restore {name!r}"
    if cause.startswith("RestoreRefusedError:"):  # a worker's refusal (a keyless record with --latest-per-key)
        return RestoreRefusedError(f"{label} refused: {cause.split(':', 1)[1].strip()}")
    if cause.startswith("RestoreFencedError:"):
        return RestoreFencedError(f"{label} stopped: {cause.split(':', 1)[1].strip()} (what this run committed "
                                  f"stays; the newer restore goes on)")
    again = "the same restore again" if name is None else f"it again with --name {name}"
    return RestoreError(f"{label} failed: {cause} (every committed transaction stays; run {again} to resume: "
                        f"records already produced are skipped)")


#: restore tasks per task slot of the runner (:meth:`~lakesink.runners.TaskRunner.parallelism`): enough that a slot
#: whose partitions hold more records than planned still ends near the others
TASKS_PER_SLOT = 4
#: what a destination partition weighs in :func:`task_groups` besides its bytes (its clients and transactions)
PARTITION_COST_BYTES = 1 << 20


def task_groups(sizes: list[int], parallelism: int) -> list[list[int]]:
    """The destination partitions of a restore (by index; ``sizes``: the bytes each reads) in at most
    :data:`TASKS_PER_SLOT` tasks per task slot: the largest first, each to the task with the fewest bytes so far;
    each task's partitions in index order. A task's partitions share its admin client and progress consumer
    (:class:`~lakesink.executor.committed.KafkaClients`: at 64 partitions every one started both), and each
    partition's producer starts while the one before it is restored
    (:class:`~lakesink.executor.restore.ProducerStarts`). How the partitions are grouped never changes what is
    produced or how a zombie is fenced (each partition keeps its own transactional producer and id)."""
    import heapq

    n = min(len(sizes), max(1, TASKS_PER_SLOT * parallelism))
    loads = [(0, g) for g in range(n)]
    groups: list[list[int]] = [[] for _ in range(n)]
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        load, g = heapq.heappop(loads)
        groups[g].append(i)
        heapq.heappush(loads, (load + sizes[i] + PARTITION_COST_BYTES, g))
    return [sorted(g) for g in groups]


def plan_partitions(objects: list[ArchivedObject], to_topic: str | None, topic_map: tuple[str, str] | None,
                    cut: Cut, routed: bool = False,
                    count: Any = None) -> list[tuple[PartitionRestore, list[ArchivedObject]]]:
    """Objects grouped by source partition, each group's destination (same partition number) and what the
    manifest says it holds inside ``cut``; groups with nothing inside the cut are left out. Refuses two
    sources mapping to one destination partition, unless ``routed`` (a router decides the partitions: the
    destination partition is -1 here, several sources may meet in one). ``count``: exact counts of the objects the
    cut falls inside (:func:`lakesink.executor.restore.dry_run`)."""
    by_source: dict[tuple[str, int], list[ArchivedObject]] = {}
    for o in objects:
        by_source.setdefault((o.topic, o.kafka_partition), []).append(o)
    out: list[tuple[PartitionRestore, list[ArchivedObject]]] = []
    taken: dict[tuple[str, int], tuple[str, int]] = {}
    for (src_topic, src_part), objs in sorted(by_source.items()):
        dest = (destination_topic(src_topic, to_topic, topic_map), -1 if routed else src_part)
        if dest in taken and not routed:
            other = taken[dest]
            raise RestoreRefusedError(f"{other[0]}-{other[1]} and {src_topic}-{src_part} would both be restored to "
                                      f"{dest[0]}-{dest[1]}: map them to different topics")
        taken[dest] = (src_topic, src_part)
        plan = summarize(objs, cut, count)
        if plan.objects:
            out.append((PartitionRestore(src_topic, src_part, dest[0], dest[1], plan.objects, plan.records,
                                         plan.bytes, plan.exact),
                        sorted((o for o in objs if cut.object_overlap(o) is not False), key=lambda o: o.first_offset)))
    return out


def build_routers(admin, parts: list[PartitionRestore], partitioner: str | None,
                  partition_map: "PartitionMap | None", timeout_s: float) -> dict[str, Router]:
    """The :class:`Router` of each destination topic of ``parts`` (from its partition count on the destination
    cluster), each part's ``route`` and ``group`` set. A map naming a partition the topic lacks or leaving out a
    source partition the restore reads is a usage error (InvalidArgumentError, exit 2); a missing destination
    topic is refused (RestoreRefusedError)."""
    try:
        meta = admin.list_topics(timeout=timeout_s)
    except Exception as e:  # noqa: BLE001 - KafkaException: broker unreachable
        raise RestoreError(f"cannot read the destination cluster's topics: {e}") from None
    routers: dict[str, Router] = {}
    for topic in sorted({p.topic for p in parts}):
        t = meta.topics.get(topic)
        if t is None or t.error is not None:
            raise RestoreRefusedError(f"destination topic {topic!r} does not exist: create it first (with "
                                      f"--partitioner / --partition-map the restore routes records into the "
                                      f"partitions it has; nothing was produced)")
        try:
            router = Router.from_options(len(t.partitions), partitioner, partition_map)
            router.check_sources({p.source_partition for p in parts if p.topic == topic})
        except RestoreRefusedError as e:  # a flag that does not fit the topic: bad usage
            raise InvalidArgumentError(f"{e} (destination topic {topic!r})") from None
        routers[topic] = router
    for p in parts:
        r = routers[p.topic]
        n = r.num_partitions
        p.route = (f"{p.topic}-0..{n - 1} by key (keyless: {p.topic}-{p.source_partition % n})" if r.keyed
                   else f"{p.topic}-{r.route(p.source_partition, None)}")
        p.group = None  # set by restore() once the name is known
    return routers


def _routing_lines(routers: dict[str, Router]) -> list[str]:
    out = []
    for topic, r in sorted(routers.items()):
        if r.keyed:
            out.append(f"{topic} ({r.num_partitions} partitions): --partitioner default, murmur2 on the key as the "
                       f"Java producer's default partitioner; {KEYLESS_RULE}")
        else:
            out.append(f"{topic} ({r.num_partitions} partitions): --partition-map {r.partition_map}")
    return out


def restore(spark, config: Any, where: str | None = None, *, to_topic: str | None = None,
            topic_map: tuple[str, str] | None = None, from_offset: int | None = None, to_offset: int | None = None,
            from_time: Any = None, to_time: Any = None, dry_run: bool = False, name: str | None = None,
            force: bool = False, manifest: Any = None, producer_config: Mapping[str, Any] | None = None,
            records_per_txn: int | None = None, again: bool = False, timeout_s: float = 60.0,
            runner: Any = None, latest_per_key: bool = False, drop_tombstones: bool = False,
            target_registry: Any = None, target_subject_strategy: str = "topic",
            target_registry_roles: Any = None, partitioner: str | None = None,
            partition_map: Any = None, groups: Any = None, groups_regex: str | None = None,
            max_rate: float | None = None, on_progress: Any = None) -> RestoreReport:
    """Restore the archived records of the committed objects ``where`` selects (a boolean expression over the
    manifest's columns, rows of the config's job) to ``to_topic`` or ``topic_map=(REGEX, REPLACEMENT)``, same
    partition numbers, exactly once for ``read_committed`` consumers: records an earlier restore already
    produced into the destination are skipped (see the module docstring for the checks, ``name`` and ``again``).

    ``from_offset`` / ``to_offset`` (inclusive, source offsets, every partition) and ``from_time`` /
    ``to_time`` (ISO-8601, UTC when no zone; inclusive; CreateTime of the records) cut inside objects.
    ``spark``: a session or a zero-argument callable returning one, called only when Spark is needed (a catalog
    manifest, or the default runner); ``runner``: what runs the restore's tasks (:mod:`lakesink.runners`; default
    Spark, in that session). With a path manifest and a local runner no JVM starts. ``producer_config``: librdkafka settings
    added to the config's ``kafka.*`` ones (security, ``bootstrap.servers`` of another cluster, ...).
    ``latest_per_key``: only the last selected record of each key of each source partition, in source-offset
    order (as of the selection's end), tombstones kept unless ``drop_tombstones`` (see the module docstring).
    ``target_registry``: restore into another Schema Registry (a URL, a RegistrySettings or the sink's
    ``schema.registry.*`` keys): the schemas the records use are copied there under ``target_subject_strategy``
    (``topic``: ``<destination>-value``/``-key``; ``source``: the source subjects) and every wire-format value
    and key (``target_registry_roles``: ``value``/``key``/``both``, default from the config's decoders) is
    produced with its id there, datum bytes unchanged (:mod:`lakesink.driver.restore_registry`).
    ``partitioner="default"`` (Kafka's murmur2 on the key, as the Java producer's default partitioner; keyless
    records keep their source partition number modulo the destination's count) or ``partition_map`` (``"0=3,1=3"``,
    a dict or a PartitionMap): restore into a destination with another partition count (see the module
    docstring); a dry run then reads the destination's partition count too.
    ``groups`` (names, or a comma list) / ``groups_regex``: consumer groups whose archived offsets (the sink's
    ``consumer.groups``) are placed on the destination, each at the first restored record it had not consumed, in
    the restore's transactions (:mod:`lakesink.driver.restore_groups`); with a routed restore only where no
    destination partition gets records of two source partitions (each group is placed on every partition its
    source partition's records reach).
    ``max_rate``: at most this many records a second per task (one source partition; ``--max-rate``).
    ``on_progress``: called with a :class:`lakesink.runners.progress.Progress` while the tasks run (records
    produced so far of the records the restore reads, ``label`` ``restore``; a CLI display)."""
    t0 = time.monotonic()
    if partitioner is not None and partition_map is not None:
        raise InvalidArgumentError("--partitioner and --partition-map exclude each other: give one of them")
    if partitioner is not None and partitioner not in PARTITIONERS:
        raise InvalidArgumentError(f"--partitioner {partitioner!r} is not known; it takes {', '.join(PARTITIONERS)} "
                                   f"(Kafka's murmur2 on the key)")
    pmap = PartitionMap.of(partition_map) if partition_map is not None else None
    routed = partitioner is not None or pmap is not None
    if max_rate is not None and not (isinstance(max_rate, (int, float)) and max_rate > 0):
        raise InvalidArgumentError(f"--max-rate (max_rate) is a number of records a second > 0, not {max_rate!r}")
    if drop_tombstones and not latest_per_key:
        raise InvalidArgumentError("--drop-tombstones (drop_tombstones) needs --latest-per-key (latest_per_key): a "
                                   "restore of every record keeps its tombstones")
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
    # Spark only when something needs it: a catalog manifest, or the Spark runner (a path manifest is read and
    # filtered by delta-rs and DuckDB, and local workers run the tasks)
    session = functools.cache(spark) if callable(spark) else (lambda: spark)
    cfg, manifest = resolve_source(session, manifest if manifest is not None else config, as_config(config))
    if name is not None and not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", name):
        raise InvalidArgumentError(f"restore name {name!r}: use letters, digits, '.', '_' and '-' (it names a "
                                   f"consumer group and transactional ids)")
    report = RestoreReport(name=name, group=progress_group(name), dry_run=dry_run, latest_per_key=latest_per_key,
                           drop_tombstones=drop_tombstones)

    objects, left_out = split_objects(None if hasattr(manifest, "scan") else session(), cfg, manifest, where)
    holes = unselected_spans(left_out)
    count = None
    if dry_run and (cut.by_time or cut.from_offset is not None or cut.to_offset is not None):
        # the records of an object the cut falls inside, counted from its metadata side file: an exact dry run
        from lakesink.executor.readback import count_in_cut
        from lakesink.store import open_store

        store = open_store(wiring.task_parts(cfg).store)
        count = functools.partial(count_in_cut, store, cut=cut)
    planned = plan_partitions(objects, to_topic, topic_map, cut, routed=routed, count=count)
    report.partitions = [p for p, _objs in planned]
    if latest_per_key:
        check_keys_stored([o for _p, objs in planned for o in objs])
    _check_feedback(None if hasattr(manifest, "arrow") else session(), cfg, manifest,
                    {p.topic for p in report.partitions}, force)
    targets = None
    if groups or groups_regex is not None:
        from lakesink.driver import restore_groups as rg

        targets = rg.group_targets(cfg, *rg.parse_groups(groups, groups_regex), planned, wiring.s3_settings(cfg),
                                   session)
        if not routed:
            report.groups = rg.plan_lines(targets, planned)
    if not report.partitions or (dry_run and not routed):
        report.seconds = time.monotonic() - t0
        return report

    from confluent_kafka.admin import AdminClient

    from lakesink.config.kafka import CONSUMER_ONLY
    from lakesink.driver.kafka_admin import client_config

    admin_conf = {**client_config(cfg.kafka_options),
                  **{k: v for k, v in (producer_config or {}).items() if k not in CONSUMER_ONLY}}
    admin = AdminClient(admin_conf)
    routers: dict[str, Router] = {}
    if routed:  # the routing needs the destination's partition count: read even by a dry run
        routers = build_routers(admin, report.partitions, partitioner, pmap, timeout_s)
        for p in report.partitions:
            p.group = routed_group(name, p.source_topic, p.source_partition, routers[p.topic].spec)
        report.routing = _routing_lines(routers)
        report.group = routed_group(name, "<source topic>", "<partition>", "<routing>")  # type: ignore[arg-type]
        if targets is not None:  # a group's position on a partition two sources reach has no single offset
            rg.check_unmerged(planned, routers)
            report.groups = rg.plan_lines(targets, planned, routers)
    if dry_run:
        report.seconds = time.monotonic() - t0
        return report

    from lakesink.executor.archive_tasks import RESTORE_RESULT_DDL, PartitionJob, restore_task
    from lakesink.store import open_store

    producer = {**wiring.librdkafka_config(cfg.kafka_options), **dict(producer_config or {})}
    _check_destinations(admin, report.partitions, timeout_s)
    for g in sorted({p.group for p in report.partitions if p.group}) if routed else [report.group]:
        check_group_idle(admin, g, timeout_s)
    if targets is not None:
        rg.check_groups_idle(admin, targets, timeout_s)
    to_read = [o for _p, objs in planned for o in objs]
    if routed and not again:
        to_read = _routed_checks(admin, admin_conf, report, planned, routers, cut, timeout_s)
    elif not again:
        dests = sorted({(p.topic, p.partition) for p in report.partitions})
        own, others = group_coverages(admin, admin_conf, report.group, dests, timeout_s)
        for p, objs in planned:
            why = overlap_refusal(p, objs, cut, own.get((p.topic, p.partition), Coverage()),
                                  {g: c[(p.topic, p.partition)] for g, c in others.items()
                                   if (p.topic, p.partition) in c}, report.group)
            if why:
                raise RestoreRefusedError(why)
        reads = latest_reads if latest_per_key else unrestored
        to_read = [o for p, objs in planned for o in reads(objs, cut, own.get((p.topic, p.partition), Coverage())
                                                             .source(p.source_topic, p.source_partition))]
    parts = wiring.task_parts(cfg)  # what the tasks get in place of the config
    _check_objects(open_store(parts.store), to_read)
    schema_ids = None
    if target_registry is not None:  # copied before any task starts: a refusal produces nothing
        from lakesink.driver.restore_registry import schema_id_map

        schema_ids = schema_id_map(cfg, target_registry, [o for _p, objs in planned for o in objs],
                                   {p.source_topic: p.topic for p in report.partitions}, target_subject_strategy,
                                   target_registry_roles)
        report.schema_copies = schema_ids.describe()

    tasks = [PartitionJob(p.source_topic, p.source_partition, p.topic, p.partition, tuple(objs),
                          tuple(holes.get((p.source_topic, p.source_partition), ())))
             for p, objs in planned]
    options: dict[str, Any] = {"timeout_s": timeout_s, "again": again}
    if schema_ids is not None:
        options["schema_ids"] = schema_ids
    if latest_per_key:
        options.update(latest_per_key=True, drop_tombstones=drop_tombstones)
    if routers:
        options["routers"] = routers
    if records_per_txn is not None:
        options["records_per_txn"] = records_per_txn
    if max_rate is not None:
        options["max_rate"] = float(max_rate)
    if targets is not None:
        options["groups"] = targets
    if runner is None:
        from lakesink.runners.spark import SparkRunner

        runner = SparkRunner(session())
    from lakesink.runners.progress import with_total

    try:  # destination partitions in task_groups, tracked like a sink batch (lakesink.runners.progress)
        with runner.track(with_total(on_progress, summarize(to_read, cut).records, "restore"), 0,
                          len(tasks)) as tracking:
            count = tracking.count  # not `tracking` itself in the task's closure: it holds driver state
            if tracking.live_to is not None:  # workers send the records produced so far there
                options["progress_to"] = tracking.live_to
            bundles = task_groups([summarize(j.objects).bytes for j in tasks], runner.parallelism())
            out = runner.run(lambda ids: count(restore_task([j for g in ids for j in bundles[g]], tasks, parts, name,
                                                            producer, cut, options)),
                             len(bundles), RESTORE_RESULT_DDL, tracking.done)
    except Exception as e:  # noqa: BLE001 - executor errors arrive wrapped by py4j/PySpark
        from lakesink.driver.sink import executor_error

        raise run_failure(executor_error(e), name) from e
    for line in out:
        res = json.loads(line)
        p = report.partitions[res["id"]]
        p.produced, p.transactions = res["produced"], res["transactions"]
        p.resumed_from, p.next_offset, p.seconds = res["resumed_from"], res["next_offset"], res["seconds"]
        p.skipped, p.superseded, p.tombstones_dropped = res["skipped"], res["superseded"], res["tombstones_dropped"]
        p.objects_read = res.get("objects_read", 0)
        p.blocks_read, p.blocks_skipped = res.get("blocks_read", 0), res.get("blocks_skipped", 0)
        if targets is not None:
            report.groups = [ln for ln in report.groups if not ln.startswith(tuple(
                f"{w.group}: {p.source_topic}-{p.source_partition} " for w in
                targets.for_source(p.source_topic, p.source_partition)))] + rg.result_lines(p, res.get("groups", []))
    report.seconds = time.monotonic() - t0
    return report



def _routed_checks(admin, admin_conf: dict, report: RestoreReport,
                   planned: list[tuple[PartitionRestore, list[ArchivedObject]]], routers: dict[str, Router], cut: Cut, timeout_s: float) -> list[ArchivedObject]:
    """The overlap refusals of a routed restore (each source against its own group's progress, and against every
    other restore's progress -- the plain group's, another name's, another routing's -- at every destination
    partition it can reach), and the objects its workers still read."""
    dests = sorted({(p.topic, d) for p, _o in planned for d in routers[p.topic].destinations(p.source_partition)})
    plain, others = group_coverages(admin, admin_conf, progress_group(report.name), dests, timeout_s)
    foreign_all = {**others, progress_group(report.name): plain}
    to_read: list[ArchivedObject] = []
    for p, objs in planned:
        slots = [(p.topic, d) for d in routers[p.topic].destinations(p.source_partition)]
        own = foreign_all.get(p.group, {}).get(slots[0], Coverage())
        why = overlap_refusal(p, objs, cut, own, {}, p.group or report.group)
        for g, covs in sorted(foreign_all.items()):  # another restore's progress at any partition S can reach
            for slot in slots:
                if why is None and g != p.group and slot in covs:
                    why = overlap_refusal(p, objs, cut, Coverage(), {g: covs[slot]}, g)
        if why:
            raise RestoreRefusedError(why)
        reads = latest_reads if report.latest_per_key else unrestored
        to_read += reads(objs, cut, own.source(p.source_topic, p.source_partition))
    return to_read
