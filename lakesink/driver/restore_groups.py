"""`lakesink restore --groups` on the driver: which archived group offsets are placed where, and the plan lines.

The groups' offsets come from the groups table the sink wrote (:mod:`lakesink.manifest.groups`): for each group
and source partition the restore restores, the **newest observed** committed offset (the latest observation is
the position the group had when the archive was last taken; a restore with ``--to-time`` still uses it: a group
that had read past the selection resumes after the restore's last record). Per source partition the result is
a :class:`~lakesink.executor.groups.GroupTargets` for the workers, which commit each group's translated offset in
the transaction that produces its record (:mod:`lakesink.executor.groups`).

Refused, before anything is produced, with one line: a named group without archived offsets for the restored
partitions (``consumer.groups`` did not name it when the sink ran), a ``--groups-regex`` matching none, a group
with members on the destination cluster (checked again by each worker).

A routed restore (``--partitioner`` / ``--partition-map``) places each group on every destination partition its
source partition's records can reach, each at its own first restored record the group had not consumed (or after
its last). That needs each destination partition to get the records of ONE source partition
(:func:`check_unmerged`): where two source partitions meet, their records interleave, and no single offset there
separates what a group had read of the one from what it had read of the other. So ``--partition-map`` that sends
each source partition to its own destination, or ``--partitioner default`` from one source partition, work; a
``--partitioner default`` restore of several partitions, or a map merging partitions, is refused with ``--groups``.
"""
from __future__ import annotations

import re
from typing import Any

from lakesink.errors import InvalidArgumentError, RestoreRefusedError
from lakesink.executor.groups import AFTER_LAST, GroupOffset, GroupTargets, check_idle

__all__ = ["parse_groups", "group_targets", "check_unmerged", "plan_lines", "result_lines", "check_groups_idle"]


def parse_groups(groups: Any, regex: str | None) -> tuple[tuple[str, ...], str | None]:
    """``groups`` (a comma list or a sequence) and ``regex`` checked: group ids, and a compiling expression."""
    if isinstance(groups, str):
        groups = [g.strip() for g in groups.split(",")]
    names = tuple(groups or ())
    for g in names:
        if not g or len(g) > 255 or any(c.isspace() for c in g):
            raise InvalidArgumentError(f"--groups: {g!r} is not a consumer group id (1..255 characters, no whitespace)")
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as e:
            raise InvalidArgumentError(f"--groups-regex {regex!r}: {e}") from None
    return names, regex


def group_targets(cfg: Any, names: tuple[str, ...], regex: str | None, planned: list, s3: Any = None,
                  spark: Any = None) -> GroupTargets:
    """The archived offsets of the groups ``names`` and those ``regex`` matches, for the source partitions of
    ``planned`` (``[(PartitionRestore, objects)]``)."""
    from lakesink.manifest.groups import GroupsTable, groups_location, latest_offsets

    loc = groups_location(cfg.manifest_location)
    table = GroupsTable(loc, s3, spark).arrow()
    latest = latest_offsets(table, cfg.name, set(names), regex)
    sources = {(p.source_topic, p.source_partition) for p, _objs in planned}
    out: dict[tuple[str, int], list[GroupOffset]] = {}
    found: set[str] = set()
    for (g, topic, part), r in sorted(latest.items()):
        if (topic, part) not in sources:
            continue
        found.add(g)
        seen = r["observed_at"]
        out.setdefault((topic, part), []).append(GroupOffset(
            g, topic, part, int(r["committed_offset"]), r["metadata"],
            int(seen.timestamp() * 1000) if seen is not None else None))
    missing = [g for g in names if g not in found]
    if missing:
        raise RestoreRefusedError(
            f"consumer group {missing[0]!r} has no archived offsets for the restored partitions in {loc} (the sink "
            f"records a group only when consumer.groups / consumer.groups.regex names it, after a batch): nothing "
            f"was produced")
    if regex is not None and not any(re.fullmatch(regex, g) for g in found):
        raise RestoreRefusedError(f"--groups-regex {regex!r} matches no group with archived offsets for the restored "
                                  f"partitions in {loc}: nothing was produced")
    return GroupTargets({k: tuple(v) for k, v in out.items()})


def check_groups_idle(admin: Any, targets: GroupTargets, timeout_s: float) -> None:
    """Refuse when a group to place has members on the destination cluster."""
    for g in sorted({w.group for ws in targets.offsets.values() for w in ws}):
        check_idle(admin, g, timeout_s)


def check_unmerged(planned: list, routers: dict) -> None:
    """Refuse consumer groups with a routing under which two source partitions reach one destination partition."""
    reach: dict[tuple[str, int], list[str]] = {}
    for p, _objs in planned:
        router = routers.get(p.topic)
        dests = router.destinations(p.source_partition) if router is not None else (p.partition,)
        for d in dests:
            reach.setdefault((p.topic, d), []).append(f"{p.source_topic}-{p.source_partition}")
    for (topic, d), sources in sorted(reach.items()):
        if len(sources) > 1:
            raise InvalidArgumentError(
                f"--groups with this routing: {' and '.join(sources[:2])} both reach {topic}-{d}, where their records "
                f"interleave, so no one offset there is where a group stopped in each; restore without --groups, or "
                f"route each source partition to partitions of its own (a --partition-map sending each source "
                f"partition to another destination, or --partitioner default from one source partition); nothing "
                f"was produced")


def plan_lines(targets: GroupTargets, planned: list, routers: dict | None = None) -> list[str]:
    """The dry run's plan: per group and partition, the archived source offset and where it goes (the destination
    offset is the broker's, known once the record is produced); routed (``routers``): every destination partition
    the source partition's records can reach."""
    lines = []
    for p, objs in planned:
        last = max((o.last_offset for o in objs), default=-1)
        router = (routers or {}).get(p.topic)
        dests = router.destinations(p.source_partition) if router is not None else (p.partition,)
        for w in targets.for_source(p.source_topic, p.source_partition):
            where = (f"the destination offset of the first restored record at or after source offset {w.offset}"
                     if w.offset <= last else AFTER_LAST)
            if len(dests) > 1:
                where = f"on each, {where} there"
            to = ",".join(map(str, dests))
            lines.append(f"{w.group}: {p.source_topic}-{p.source_partition} -> {p.topic}-{to}: source offset "
                         f"{w.offset} -> {where}")
    return lines


def result_lines(p: Any, entries: list[dict]) -> list[str]:
    """After a run: per group on one destination partition, where it was placed."""
    out = []
    for e in entries:
        src = f"{p.source_topic}-{p.source_partition}"
        dest = f"{p.topic}-{e.get('partition', p.partition)}"
        if e["state"] == "committed":
            what = f"{e['offset']} (committed with the restore)"
        elif e["state"] == "already":
            what = f"left at its offset {e['offset']} there (placed by an earlier run)"
        else:
            what = "not placed (this run produced nothing for it)"
        out.append(f"{e['group']}: {src} -> {dest}: source offset {e['source_offset']} -> {what}")
    return out
