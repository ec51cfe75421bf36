"""Orphans: objects under a job's topics that no manifest row references, and their removal.

An orphan is left by a batch that failed or lost a race after uploading. Readers never see one
(they go through the manifest); ``vacuum`` deletes them once older than the retention period, so a
batch still in flight (whose objects are not committed *yet*) is never touched. Dry-run by default.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from lakesink.store import ObjectInfo, S3Store

DEFAULT_RETENTION_S = 24 * 3600.0


@dataclass
class VacuumReport:
    orphans: list[ObjectInfo] = field(default_factory=list)
    uploads: list[tuple[str, str]] = field(default_factory=list)  # open multipart uploads (key, id)
    kept_recent: int = 0
    deleted: bool = False

    def lines(self, uri) -> list[str]:
        verb = "deleted" if self.deleted else "would delete"
        out = [f"{verb} {uri(o.key)} ({o.size} bytes)" for o in self.orphans]
        out += [f"{'aborted' if self.deleted else 'would abort'} multipart upload {uid[:12]}… of {uri(k)}"
                for k, uid in self.uploads]
        out.append(f"{len(self.orphans)} orphan object(s), {len(self.uploads)} open upload(s); "
                   f"{self.kept_recent} uncommitted object(s) younger than the retention kept")
        return out


def vacuum(spark, cfg, retention_s: float = DEFAULT_RETENTION_S, execute: bool = False,
           now: float | None = None) -> VacuumReport:
    """Find (and with ``execute`` delete) orphans of job ``cfg.name`` older than ``retention_s``."""
    from lakesink.manifest import Manifest
    from lakesink.store import StoreSettings, open_store

    now = time.time() if now is None else now
    manifest = Manifest(spark, cfg.manifest_location)
    store = open_store(StoreSettings.from_config(cfg))
    committed = manifest.committed_keys(cfg.name)
    report = VacuumReport()
    for prefix in _prefixes(spark, cfg, manifest):
        for obj in store.list(prefix):
            if obj.key in committed:
                continue
            if now - obj.last_modified < retention_s:
                report.kept_recent += 1
            else:
                report.orphans.append(obj)
        if isinstance(store, S3Store):
            report.uploads += [(k, uid) for k, uid, started in store.list_uploads(prefix)
                               if now - started >= retention_s]
    if execute:
        for obj in report.orphans:
            store.delete(obj.key)
        if isinstance(store, S3Store):
            for k, uid in report.uploads:
                store.client.abort_multipart_upload(Bucket=store.settings.bucket, Key=k, UploadId=uid)
        report.deleted = True
    return report


def _prefixes(spark, cfg, manifest) -> list[str]:
    """``<topics.dir>/<topic>/`` for every topic the job is configured for or has archived."""
    from pyspark.sql import functions as F

    topics = set(cfg.topics or [])
    topics.update(r.topic for r in manifest.df().where(F.col("job") == cfg.name).select("topic").distinct().collect())
    from lakesink.naming import validate_topic

    naming = cfg.naming()
    # keys are <topics.dir><delim><topic><delim>... (naming.value_key): list exactly one topic's tree
    return sorted(naming.prefix + validate_topic(t) + naming.directory_delim for t in topics)
