"""The sink's capture of consumer-group offsets (``consumer.groups`` / ``consumer.groups.regex``).

After each committed batch, :class:`GroupCapture` reads the committed offsets of the configured groups (the
named ones and every group the regex matches, the union; lakesink's own ``lakesink-*`` groups never) for the
partitions of the topics the job archives, with :func:`lakesink.executor.committed.read_committed` (stable
offsets: a transaction's offsets still settling are not taken) and appends them to the groups table
(:mod:`lakesink.manifest.groups`). A batch that committed nothing records the groups only if their offsets
moved since this run last recorded them (an idle job polling every 30 s adds no rows). Best effort: a failure is
a warning line, never a failed batch (the records are committed); see the groups table's docstring for why.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
from typing import Any, Mapping

from lakesink.manifest.groups import GroupOffsetRow, GroupsTable, groups_location

__all__ = ["GroupCapture", "read_group_offsets"]

log = logging.getLogger("lakesink.driver.group_offsets")


def read_group_offsets(admin: Any, conf: Mapping[str, Any], names: tuple[str, ...], regex: str | None,
                       partitions: list[tuple[str, int]], timeout_s: float = 30.0
                       ) -> dict[tuple[str, str, int], tuple[int, str | None]]:
    """``{(group, topic, partition): (committed offset, metadata)}`` of the groups ``names`` and those ``regex``
    fully matches (listed by ``admin``), on ``partitions``; partitions without a committed offset are left out.
    The offsets are read with ``conf`` (the admin's client config) by
    :func:`~lakesink.executor.committed.read_committed` (stable offsets, never joining the group)."""
    from lakesink.executor.committed import read_committed

    groups = set(names)
    if regex:
        pattern = re.compile(regex)
        listed = admin.list_consumer_groups(request_timeout=timeout_s).result()
        groups |= {g.group_id for g in listed.valid if pattern.fullmatch(g.group_id)}
    groups = {g for g in groups if not g.startswith("lakesink-")}
    out: dict[tuple[str, str, int], tuple[int, str | None]] = {}
    for g in sorted(groups):
        for (t, p), (off, md) in read_committed(conf, g, partitions, timeout_s).items():
            if off is not None:
                out[(g, t, p)] = (off, md)
    return out


class GroupCapture:
    """Records the configured groups' offsets after each batch of one sink run."""

    def __init__(self, cfg: Any, s3: Any = None, spark: Any = None):
        self.cfg = cfg
        self.location = groups_location(cfg.manifest_location)
        self.table = GroupsTable(self.location, s3, spark)
        self.last: dict | None = None
        self._admin = None
        self.conf: dict = {}

    @staticmethod
    def wanted(cfg: Any) -> bool:
        return bool(getattr(cfg, "consumer_groups", ()) or getattr(cfg, "consumer_groups_regex", None))

    def admin(self):
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            from lakesink.driver.kafka_admin import client_config

            self.conf = client_config(self.cfg.kafka_options)
            self._admin = AdminClient(self.conf)
        return self._admin

    def record(self, batch_id: int, run_id: str, committed: bool, partitions: list[tuple[str, int]]) -> str | None:
        """Read and append the groups' offsets on ``partitions`` (the batch's: its Kafka snapshot's, so the topics
        are not asked for again); a warning line instead of an exception (None: recorded, or nothing moved since
        the last record of this run and the batch committed nothing)."""
        try:
            timeout_s = self.cfg.kafka_retry_deadline_ms / 1000.0
            parts = sorted(partitions)
            seen = read_group_offsets(self.admin(), self.conf, tuple(self.cfg.consumer_groups),
                                      self.cfg.consumer_groups_regex, parts, timeout_s)
            if not committed and seen == self.last:
                return None
            now = dt.datetime.now(dt.timezone.utc)
            rows = [GroupOffsetRow(self.cfg.name, run_id, batch_id, g, t, p, off, md, now)
                    for (g, t, p), (off, md) in sorted(seen.items())]
            if rows:
                self.table.append(rows)
            self.last = seen
        except Exception as e:  # noqa: BLE001 - observability must not fail a committed batch
            first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
            first = re.sub(r"(?<=://)[^@\s/]+@", "******@", first)
            msg = (f"batch {batch_id}: consumer group offsets not recorded in {self.location}: "
                   f"{type(e).__name__}: {first[:300]}")
            log.warning(msg)
            return msg
        return None
