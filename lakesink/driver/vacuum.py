"""Orphans: this job's uploads that no manifest row references, and their removal.

An orphan is left by a batch of this job that failed or lost a race after uploading. Readers never
see one (they go through the manifest); ``vacuum`` deletes them once older than the retention period,
so a batch still in flight (whose objects are not committed *yet*) is never touched. Dry-run by default.

What vacuum may delete is decided object by object, never by prefix alone, because several jobs (in
one manifest or in several) may share a bucket, ``topics.dir`` and topic:

- an object that any row of the manifest references (any job) is never an orphan and is not listed;
- an unreferenced object whose upload metadata names this job (``lakesink-job``, written on every
  upload, see :func:`lakesink.store.upload_metadata`) is an orphan of one of its failed batches;
- any other unreferenced object (another job's, another manifest's, Confluent's, a user's) is
  *unknown*: reported, never deleted, unless the user names its key explicitly (``also_delete``).

With ``execute``, each chunk of deletions first re-reads the manifest and re-checks every object
(it must still exist with the ETag and owner seen by the scan), so an object committed or replaced
since the scan is kept. Open multipart uploads hold no readable metadata: only those at keys this
job's own naming produces (its topics, its formats' extensions) and no other job has committed are
aborted; aborting an upload never removes a stored object.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable

from lakesink import wiring
from lakesink.store import ObjectInfo, ObjectStore

DEFAULT_RETENTION_S = 24 * 3600.0
RECHECK_CHUNK = 200  # objects re-checked against the manifest per query before they are deleted


@dataclass
class VacuumReport:
    orphans: list[ObjectInfo] = field(default_factory=list)  # this job's, older than the retention
    unknown: list[ObjectInfo] = field(default_factory=list)  # not this job's: listed, never deleted
    uploads: list[tuple[str, str]] = field(default_factory=list)  # this job's open multipart uploads (key, id)
    kept_recent: int = 0
    kept_changed: list[str] = field(default_factory=list)  # keys committed or replaced since the scan
    deleted: bool = False

    def lines(self, uri) -> list[str]:
        verb = "deleted" if self.deleted else "would delete"
        out = [f"{verb} {uri(o.key)} ({o.size} bytes)" for o in self.orphans]
        out += [f"{'aborted' if self.deleted else 'would abort'} multipart upload {uid[:12]}… of {uri(k)}"
                for k, uid in self.uploads]
        out += [f"unknown, not deleted: {uri(o.key)} ({o.size} bytes, {_whose(o)})" for o in self.unknown]
        out += [f"kept {uri(k)}: committed or replaced since the scan" for k in self.kept_changed]
        out.append(f"{len(self.orphans)} orphan object(s), {len(self.uploads)} open upload(s), "
                   f"{len(self.unknown)} unknown object(s) not deleted; "
                   f"{self.kept_recent} uncommitted object(s) younger than the retention kept")
        return out


def _whose(o: ObjectInfo) -> str:
    return f"uploaded by job {o.owner!r}" if o.owner else "not uploaded by lakesink"


def vacuum(spark, cfg, retention_s: float = DEFAULT_RETENTION_S, execute: bool = False,
           now: float | None = None, also_delete: Iterable[str] = ()) -> VacuumReport:
    """Find (and with ``execute`` delete) orphans of job ``cfg.name`` older than ``retention_s``.

    ``spark``: a session, a zero-argument callable returning one, or None; only a manifest on the Spark
    engine (a catalog table) uses it.

    ``also_delete``: keys the user names explicitly; unreferenced objects at those keys are deleted
    like orphans even when they are not recognisably this job's. A referenced key is never deleted.
    """
    from lakesink.store import open_store

    now = time.time() if now is None else now
    manifest = wiring.manifest(cfg, spark)
    if not manifest.exists():  # the job never ran: nothing of its own can be committed, and nothing is created
        manifest = _EmptyManifest()
    store = open_store(wiring.store_settings(cfg))
    named = set(also_delete)
    committed = manifest.committed_keys()  # every job's: nothing a row references is ever touched
    report = VacuumReport()
    topics = _topics(cfg, manifest)
    own = _own_key_predicate(cfg, topics)
    for prefix in _prefixes(cfg, topics):
        unreferenced = [o.key for o in store.list(prefix) if o.key not in committed]
        with ThreadPoolExecutor(max_workers=16) as pool:  # the listing carries no metadata; HEADs are latency-bound
            heads = list(pool.map(store.head, unreferenced))
        for obj in heads:
            if obj is None:
                continue
            if obj.owner != cfg.name and obj.key not in named:
                report.unknown.append(obj)
            elif now - obj.last_modified < retention_s:
                report.kept_recent += 1
            else:
                report.orphans.append(obj)
        report.uploads += [(k, uid) for k, uid, started in store.list_uploads(prefix)
                           if now - started >= retention_s and own(k)]
    if report.uploads:
        owners = manifest.committed_owners({k for k, _ in report.uploads})
        report.uploads = [(k, u) for k, u in report.uploads if not (owners.get(k, set()) - {cfg.name})]
    if execute:
        report.orphans = _delete_rechecked(manifest, store, cfg.name, report, named)
        for k, uid in report.uploads:
            store.abort_upload(k, uid)
        report.deleted = True
    return report


def _delete_rechecked(manifest, store: ObjectStore, job: str, report: VacuumReport, named: set[str]) -> list[ObjectInfo]:
    """Delete the orphans chunk by chunk, each chunk re-checked against the manifest and the store."""
    deleted: list[ObjectInfo] = []
    for i in range(0, len(report.orphans), RECHECK_CHUNK):
        chunk = report.orphans[i:i + RECHECK_CHUNK]
        referenced = manifest.committed_owners({o.key for o in chunk})
        for obj in chunk:
            now_obj = store.head(obj.key)
            if (obj.key in referenced or now_obj is None or now_obj.etag != obj.etag
                    or (now_obj.owner != job and obj.key not in named)):
                report.kept_changed.append(obj.key)
                continue
            store.delete(obj.key)
            deleted.append(obj)
    return deleted


def _own_key_predicate(cfg, topics: set[str]):
    """Whether a key is one this job's naming produces: one of its topics, its formats' extensions."""
    from lakesink.errors import KeyNameError
    from lakesink.objects.naming import parse_key

    naming, exts = wiring.naming(cfg), wiring.key_extensions(cfg)

    def own(key: str) -> bool:
        try:
            return parse_key(key, naming, exts).topic in topics
        except KeyNameError:
            return False
    return own


class _EmptyManifest:
    """The manifest of a job that has not created its table yet: it references nothing."""

    def committed_keys(self) -> set[str]:
        return set()

    def committed_owners(self, keys: set[str]) -> dict[str, set[str]]:
        return {}

    def topics(self, job: str) -> set[str]:
        return set()


def _topics(cfg, manifest) -> set[str]:
    """Every topic the job is configured for or has archived."""
    return set(cfg.topics or []) | manifest.topics(cfg.name)


def _prefixes(cfg, topics: set[str]) -> list[str]:
    """``<topics.dir>/<topic>/`` for each topic: keys are <topics.dir><delim><topic><delim>... (value_key)."""
    from lakesink.objects.naming import validate_topic

    naming = wiring.naming(cfg)
    return sorted(naming.prefix + validate_topic(t) + naming.directory_delim for t in topics)
