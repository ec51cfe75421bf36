"""Retention: delete whole archived objects whose newest record is older than a limit (``lakesink expire``).

An object is due when its ``max_timestamp`` (its newest record's Kafka timestamp) is before ``now - older_than``;
an object without record timestamps is never due (it is counted as kept). Dry run by default.

The manifest is append-only, so an expired object's row stays and an ``expired`` row (its tombstone,
:func:`lakesink.manifest.rows.expired_row`) supersedes it: the ``objects`` view, restore, ``read_archive`` and
``verify`` skip a superseded object, the ``gaps`` view shows its offsets with reason ``expired: ...`` and the
``erasures`` view lists the run.

Order, for crash safety: **the manifest first, then the objects.** One Delta commit appends every tombstone of
the run; only then are the objects and their side files deleted. A kill at any point therefore leaves no live
row pointing at a missing object: before the commit nothing changed; after it, the objects are superseded
(nothing reads them) and merely still take space. Every run finishes what an earlier one left: each tombstone's
keys that still hold the recorded ETag are deleted (a key rewritten since, under another ETag, is left alone).
On a versioned bucket the recorded version is deleted for good (a plain delete would only add a delete marker
and keep the bytes); without a recorded version the key is deleted.
"""
from __future__ import annotations

import datetime as dt
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Mapping

from lakesink import wiring
from lakesink.hooks import NO_HOOKS, Hooks
from lakesink.manifest.queries import naive_utc
from lakesink.manifest.rows import EXPIRED, expired_row, live_objects, object_files, tombstone_identity
from lakesink.store import strip_etag


@dataclass
class ExpireReport:
    """What an expire found (dry run) or did (``executed``)."""

    job: str
    older_than: str
    cutoff: dt.datetime  # naive UTC: objects whose newest record is before this are due
    run_id: str
    due: list[Mapping[str, Any]] = field(default_factory=list)  # live object rows past the limit
    unfinished: list[Mapping[str, Any]] = field(default_factory=list)  # tombstones of earlier runs whose keys remain
    kept_untimed: int = 0  # live objects without record timestamps: never due
    executed: bool = False
    committed: int = 0  # tombstones committed by this run
    deleted: list[str] = field(default_factory=list)  # keys deleted (value objects and side files)

    @property
    def records(self) -> int:
        return sum(int(r.get("record_count") or 0) for r in self.due)


def parse_age(text: str, what: str = "--older-than") -> float:
    """An age: ``400d``, ``2w``, or anything :func:`lakesink.driver.batch.parse_interval` takes (``12h``, ``90m``,
    ``30s``), in seconds; must be positive."""
    from lakesink.driver.batch import parse_interval
    from lakesink.errors import InvalidArgumentError

    t = text.strip().lower()
    for suffix, mult in (("d", 86400), ("w", 7 * 86400)):
        if t.endswith(suffix) and t[: -1].replace(".", "", 1).isdigit():
            seconds = float(t[: -1]) * mult
            break
    else:
        try:
            seconds = parse_interval(text, what)
        except InvalidArgumentError:
            raise InvalidArgumentError(f"{what} {text!r}: expected an age like 400d, 2w, 12h or 90m") from None
    if seconds <= 0:
        raise InvalidArgumentError(f"{what} {text!r}: must be more than 0")
    return seconds


def note_for(older_than: str, cutoff: dt.datetime) -> str:
    """An expired row's ``note`` (the ``gaps`` reason; the ``erasures`` view's predicate after ``expired: ``)."""
    return f"expired: newest record older than {older_than} (before {cutoff:%Y-%m-%dT%H:%M:%S}Z)"


def due_objects(rows: list[Mapping[str, Any]], cutoff: dt.datetime) -> tuple[list[Mapping[str, Any]], int]:
    """The live object rows whose newest record is before ``cutoff`` (naive UTC), and how many live objects have
    no record timestamp (never due)."""
    live = live_objects(rows)
    due = [r for r in live if r.get("max_timestamp") is not None and naive_utc(r["max_timestamp"]) < cutoff]
    untimed = sum(1 for r in live if r.get("max_timestamp") is None)
    return sorted(due, key=lambda r: (r["topic"], r["kafka_partition"], r["first_offset"])), untimed


def expire(cfg, older_than_s: float, older_than: str, execute: bool = False, now: dt.datetime | None = None,
           run_id: str | None = None, hooks: Hooks = NO_HOOKS) -> ExpireReport:
    """Find (and with ``execute`` expire) ``cfg.name``'s objects whose newest record is older than ``older_than_s``
    seconds before ``now`` (naive UTC; default the clock). ``older_than``: the limit as the user wrote it (in the
    note). ``hooks``: ``before_commit`` and ``during_commit`` just before the manifest commit, ``after_commit`` between
    it and the deletions, ``after_delete`` after each deleted file."""
    from lakesink.store import open_store

    now = naive_utc(now) if now is not None else dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    cutoff = now - dt.timedelta(seconds=older_than_s)
    report = ExpireReport(cfg.name, older_than, cutoff, run_id or uuid.uuid4().hex)
    manifest = wiring.path_manifest(cfg, "expire")
    store = open_store(wiring.store_settings(cfg))

    def read_rows() -> list[dict]:
        return manifest.arrow(job=cfg.name).to_pylist()

    rows = read_rows()
    report.due, report.kept_untimed = due_objects(rows, cutoff)
    report.unfinished = _unfinished(store, rows)
    if not execute:
        return report
    note = note_for(older_than, cutoff)

    def build():
        report.due, report.kept_untimed = due_objects(read_rows(), cutoff)
        return [expired_row(r, note) for r in report.due]

    hooks.driver("before_commit")
    hooks.driver("during_commit")
    committed = manifest.commit_notes(cfg.name, report.run_id, "expire", build)
    report.committed = len(committed)
    report.executed = True
    hooks.driver("after_commit")
    done = {tombstone_identity(r) for r in report.unfinished}
    todo = list(report.unfinished) + [r for r in report.due if tombstone_identity(r) not in done]
    report.deleted = _delete(store, todo, hooks)
    return report


def _unfinished(store, rows: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Tombstones whose value object or a side file is still stored with the recorded ETag (an expire killed
    between its commit and its deletions)."""
    tombs = [r for r in rows if r.get("kind") == EXPIRED]
    files = [(r, f) for r in tombs for f in object_files(r)]
    with ThreadPoolExecutor(max_workers=16) as pool:  # HEADs are latency-bound
        heads = list(pool.map(lambda rf: store.head(rf[1][0]), files))
    out: dict[tuple, Mapping[str, Any]] = {}
    for (r, (_key, etag, _vid)), head in zip(files, heads):
        if head is not None and strip_etag(head.etag) == strip_etag(etag):
            out[tombstone_identity(r)] = r
    return list(out.values())


def _delete(store, rows: list[Mapping[str, Any]], hooks: Hooks = NO_HOOKS) -> list[str]:
    """Delete each row's files that still hold the recorded ETag: the recorded version on a versioned bucket."""
    deleted = []
    for r in rows:
        for key, etag, version_id in object_files(r):
            head = store.head(key)
            if head is None or strip_etag(head.etag) != strip_etag(etag):
                continue  # gone already, or rewritten since: not this object any more
            if version_id:
                store.delete_version(key, version_id)
            else:
                store.delete(key)
            deleted.append(key)
            hooks.driver("after_delete")
    return deleted
