"""Consumer groups across a restore: where a group that had consumed part of a source partition resumes on the
restored topic (issue #29, item 1).

A group's committed offset ``C`` on a source partition is the next record it would read: it consumed every
record below ``C`` and none from ``C`` on. On the destination the same logical position is **the destination
offset of the first restored record whose source offset is >= C** (:func:`translate`). Records the restore did
not select (before ``--from-time``, say) are not in the destination at all, so a group at 125,000 restored from
50,000 resumes at the first restored record with source offset >= 125,000. When every restored record is below
``C`` the group consumed them all: it resumes after the last one the restore produced, i.e. the offset the next
record would get (the producer's delivery report of the last record + 1, or the partition's end when this run
produced nothing; a transaction marker there is skipped by consumers), never a count of records.

:class:`GroupCommitter` is the worker's side (one per destination partition, the hook that
:func:`lakesink.executor.restore.restore_partition` calls): it learns destination offsets from the delivery
reports of the records it must know, and hands the group offsets to add to the SAME transaction as those
records (``send_offsets_to_transaction``, one call per group; Kafka allows several groups in one transaction),
so a killed restore never leaves a group ahead of its records. A group that already has a committed offset on
the destination partition when the worker starts is left alone (an earlier run of this restore placed it in
the transaction that produced its record, or someone else did: the restore does not move a group that has a
position there); a group with members is refused, before anything is produced.

:class:`GroupTargets` is the picklable value the driver builds (the groups' archived offsets per source
partition) and the tasks get in their options.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

__all__ = ["translate", "GroupOffset", "GroupTargets", "Pending", "GroupCommitter", "Committers", "AFTER_LAST"]

#: what a plan says for a group every selected record of which it already consumed
AFTER_LAST = "after the restore's last record"


def translate(committed: int, pairs: Sequence[tuple[int, int]], next_offset: int | None) -> int | None:
    """The destination offset a group committed at source offset ``committed`` resumes at: the destination offset
    of the first restored record whose source offset is >= ``committed`` (``pairs``: (source offset, destination
    offset) of every record the restore produced from one source partition into one destination partition, in
    source-offset order), or, when every restored record is below ``committed``, ``next_offset``: the offset after
    the last one (taken from the broker, markers included; None when unknown)."""
    if committed < 0:
        raise ValueError(f"a committed offset is >= 0, not {committed}")
    srcs = [s for s, _d in pairs]
    if any(a > b for a, b in zip(srcs, srcs[1:])):
        raise ValueError("pairs must be in source-offset order")
    i = bisect_left(srcs, committed)
    if i < len(pairs):
        return pairs[i][1]
    return next_offset


@dataclass(frozen=True)
class GroupOffset:
    """A group's archived committed offset on one source partition (``observed_at_ms``: when the sink read it)."""

    group: str
    topic: str
    partition: int
    offset: int
    metadata: str | None = None
    observed_at_ms: int | None = None


@dataclass(frozen=True)
class GroupTargets:
    """The groups to place, per source partition: ``{(topic, partition): (GroupOffset, ...)}``."""

    offsets: Mapping[tuple[str, int], tuple[GroupOffset, ...]] = field(default_factory=dict)

    def for_source(self, topic: str, partition: int) -> tuple[GroupOffset, ...]:
        return tuple(self.offsets.get((topic, partition), ()))

    def committers(self, src_topic: str, src_part: int, topic: str, partitions: Sequence[int],
                   conf: Mapping[str, Any], admin: Any, timeout_s: float) -> "Committers | None":
        """The hook of one worker producing ``src_topic``-``src_part``'s records into ``partitions`` of ``topic``
        (one, or several for a routed restore): a :class:`GroupCommitter` per destination partition (None when no
        group has an offset on the source partition)."""
        from confluent_kafka import Consumer

        from lakesink.executor.committed import consumer_conf, read_committed

        wanted = self.for_source(src_topic, src_part)
        if not wanted:
            return None
        placed = {d: {} for d in partitions}  # partition -> {group: offset already there}
        # one never-subscribing consumer per group: it reads the group's offsets here, and supplies its metadata to
        # the transactions of every destination partition's committer that still has to place the group
        consumers: dict[str, Any] = {}
        try:
            for w in wanted:  # once per group, not per destination partition
                check_idle(admin, w.group, timeout_s)
                consumers[w.group] = Consumer(consumer_conf(conf, w.group))
                for (_t, d), (offset, _md) in read_committed(conf, w.group, [(topic, d) for d in partitions],
                                                             timeout_s, consumer=consumers[w.group]).items():
                    if offset is not None:
                        placed[d][w.group] = offset
        except BaseException:
            for c in consumers.values():
                c.close()
            raise
        for g in [g for g in consumers if all(g in placed[d] for d in partitions)]:
            consumers.pop(g).close()  # placed everywhere already: nothing to commit for it
        out = {d: GroupCommitter(wanted, topic, d, {g: c for g, c in consumers.items() if g not in placed[d]},
                                 placed[d], timeout_s) for d in partitions}
        return Committers(out, consumers)


class Pending:
    """Which groups a produced record resolves: the first produced record with source offset >= a group's
    committed offset is that group's position (pure bookkeeping; records arrive in source-offset order)."""

    def __init__(self, targets: Mapping[str, int]):
        self.waiting = dict(sorted(targets.items(), key=lambda kv: kv[1]))
        self.low = min(self.waiting.values(), default=None)

    def claim(self, src_offset: int) -> tuple[str, ...]:
        """The groups record ``src_offset`` resolves (they stop waiting)."""
        if self.low is None or src_offset < self.low:
            return ()
        hit = tuple(g for g, c in self.waiting.items() if c <= src_offset)
        for g in hit:
            del self.waiting[g]
        self.low = min(self.waiting.values(), default=None)
        return hit

    def unclaim(self, targets: Mapping[str, int]) -> None:
        self.waiting.update(targets)
        self.waiting = dict(sorted(self.waiting.items(), key=lambda kv: kv[1]))
        self.low = min(self.waiting.values(), default=None)


class GroupCommitter:
    """Places consumer groups on one destination partition inside the restore's transactions (see the module
    docstring). The worker calls :meth:`callback` for each record it produces, :meth:`due` and :meth:`offsets`
    (after flushing, before committing a transaction), :meth:`committed` after the commit, :meth:`close` at the end."""

    def __init__(self, wanted: Iterable[GroupOffset], topic: str, partition: int, consumers: Mapping[str, Any],
                 placed: Mapping[str, int], timeout_s: float = 30.0):
        self.topic, self.partition, self.timeout_s = topic, partition, timeout_s
        self.source = {w.group: w for w in wanted}
        self.consumers = dict(consumers)  # group -> Consumer (never subscribes: it supplies group metadata)
        #: groups already at a position on the destination partition when the worker started
        self.placed = dict(placed)
        self.pending = Pending({g: w.offset for g, w in self.source.items() if g not in self.placed})
        self.found: dict[str, int] = {}     # group -> destination offset, delivered in the open transaction
        self.claimed: dict[str, int] = {}   # group -> source offset of the record that resolves it (not yet delivered)
        self.sent: dict[str, int] = {}      # group -> destination offset handed to the open transaction
        self.done: dict[str, int] = {}      # group -> destination offset committed by this run
        self.last_delivered: int | None = None

    @property
    def active(self) -> bool:
        """Whether some group still waits for its position in this run."""
        return bool(self.pending.waiting or self.claimed or self.found)

    def callback(self, src_offset: int, inner: Callable) -> Callable:
        """The delivery callback of the record with source offset ``src_offset`` (``inner``: the worker's own)."""
        if not self.pending.waiting:
            return inner
        hit = self.pending.claim(src_offset)
        for g in hit:
            self.claimed[g] = src_offset

        def delivered(err, msg, hit=hit):
            inner(err, msg)
            if err is None and msg is not None:
                off = msg.offset()
                if self.last_delivered is None or off > self.last_delivered:
                    self.last_delivered = off
                for g in hit:
                    self.found[g] = off
                    self.claimed.pop(g, None)
        return delivered

    def due(self, final: bool) -> bool:
        """Whether the transaction about to commit must carry group offsets even if it carries nothing else."""
        return bool(self.found) or (final and bool(self.pending.waiting))

    def offsets(self, final: bool, end_offset: Callable[[], int]) -> list[tuple[Any, list]]:
        """``(group metadata, [TopicPartition])`` per group to send with the open transaction (its records
        flushed: their delivery reports served). With ``final``, groups no produced record resolved (every
        restored record is below their offset) go after the last record: its delivery report + 1, or
        ``end_offset()`` (the partition's end) when this run produced nothing."""
        from confluent_kafka import TopicPartition

        if self.claimed:  # a record was flushed without its delivery report: cannot place the group truthfully
            from lakesink.errors import RestoreProduceError

            raise RestoreProduceError(f"{self.topic}-{self.partition}: no delivery report for the record(s) of source "
                                      f"offset(s) {sorted(self.claimed.values())} that place consumer group(s) "
                                      f"{sorted(self.claimed)}; the open transaction was aborted")
        place = dict(self.found)
        if final and self.pending.waiting:
            after = self.last_delivered + 1 if self.last_delivered is not None else end_offset()
            place.update({g: after for g in self.pending.waiting})
        out = []
        for g, off in sorted(place.items()):
            md = self.source[g].metadata
            out.append((self.consumers[g].consumer_group_metadata(),
                        [TopicPartition(self.topic, self.partition, off, md) if md else
                         TopicPartition(self.topic, self.partition, off)]))
        self.sent = place
        return out

    def committed(self) -> None:
        """The transaction carrying :meth:`offsets` committed."""
        for g, off in self.sent.items():
            self.done[g] = off
            self.found.pop(g, None)
            self.pending.waiting.pop(g, None)
        self.pending.low = min(self.pending.waiting.values(), default=None)
        self.sent = {}

    def aborted(self) -> None:
        self.sent = {}

    def report(self) -> list[dict]:
        """One entry per group: source offset, destination offset and what happened (``committed``, ``already``)."""
        out = []
        for g, w in sorted(self.source.items()):
            if g in self.done:
                out.append({"group": g, "source_offset": w.offset, "offset": self.done[g], "state": "committed"})
            elif g in self.placed:
                out.append({"group": g, "source_offset": w.offset, "offset": self.placed[g], "state": "already"})
            else:
                out.append({"group": g, "source_offset": w.offset, "offset": None, "state": "not placed"})
        return out

    def close(self) -> None:
        for c in self.consumers.values():
            try:
                c.close()
            except Exception:  # noqa: BLE001 - nothing to release on the broker
                pass


class Committers:
    """The :class:`GroupCommitter` of each destination partition one worker produces into (a routed restore sends
    one source partition's records to several; each destination partition places the group at ITS first record
    the group had not consumed, or after its last). The worker calls :meth:`callback` with each record's
    destination partition; the rest is :class:`GroupCommitter`'s, over all of them."""

    def __init__(self, by_partition: Mapping[int, GroupCommitter], consumers: Mapping[str, Any] | None = None):
        self.by_partition = dict(by_partition)
        self.consumers = dict(consumers or {})  # the groups' consumers the committers share (closed once)

    def callback(self, src_offset: int, inner: Callable, partition: int) -> Callable:
        c = self.by_partition.get(partition)
        return inner if c is None else c.callback(src_offset, inner)

    def due(self, final: bool) -> bool:
        return any(c.due(final) for c in self.by_partition.values())

    def offsets(self, final: bool, end_offset: Callable[[int], int]) -> list[tuple[Any, list]]:
        """:meth:`GroupCommitter.offsets` of every destination partition (``end_offset(partition)``: its end)."""
        out = []
        for d, c in sorted(self.by_partition.items()):
            out += c.offsets(final, lambda d=d: end_offset(d))
        return out

    def committed(self) -> None:
        for c in self.by_partition.values():
            c.committed()

    def aborted(self) -> None:
        for c in self.by_partition.values():
            c.aborted()

    def report(self) -> list[dict]:
        """:meth:`GroupCommitter.report` of every destination partition, each entry with its ``partition``."""
        return [{**e, "partition": d} for d, c in sorted(self.by_partition.items()) for e in c.report()]

    def close(self) -> None:
        for c in self.consumers.values():
            try:
                c.close()
            except Exception:  # noqa: BLE001 - nothing to release on the broker
                pass


def check_idle(admin: Any, group: str, timeout_s: float) -> None:
    """Refuse (RestoreGroupActiveError) when consumer group ``group`` has members on the destination cluster."""
    from lakesink.errors import RestoreGroupActiveError
    from lakesink.executor.restore_progress import check_group_idle

    try:
        check_group_idle(admin, group, timeout_s)
    except RestoreGroupActiveError as e:
        members = str(e).split(" has ", 1)[1].split(":", 1)[0] if " has " in str(e) else "members"
        raise RestoreGroupActiveError(
            f"consumer group {group!r} has {members} on the destination cluster: its offsets can only be set while "
            f"it has none; stop its consumers and run the restore again (nothing was produced for it)") from None
