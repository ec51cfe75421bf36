"""Erasure: remove single records from the archive by a predicate over records (``lakesink erase --where``).

**What is selected.** ``--where`` is one boolean Spark SQL expression over each archived record of the job's live
objects (only the job's own rows of its manifest, so only its own topics and prefix): ``topic``, ``partition``,
``offset``, ``timestamp``, ``timestamp_type``, ``key`` (bytes: ``key = 'customer-42'`` compares them), ``value``
(the decoded value: a struct for JSON objects, Avro and Parquet records, so ``value.customer = 'c42'``; the bytes for
other values), ``value_bytes`` (the bytes a restore sends) and ``headers`` (array of key/value structs:
``exists(headers, h -> h.key = 'gdpr')``). It is checked as read_archive's is
(:func:`lakesink.manifest.queries.where_predicate`: no subquery, table reference or ``;``) and evaluated in an
in-memory DuckDB holding nothing but records of the job's objects. The plan (:mod:`lakesink.driver.erase_plan`)
reads only the objects the manifest cannot rule out (the predicate's bounds on topic, partition, offset and
timestamp against each row) and of those only the files the predicate names, as tasks of the job's runner
(:mod:`lakesink.executor.erase_match`). Erasure is per Kafka offset: a record that matches takes every record of
its offset with it. Dry run by default: the objects and the count per object.

**The manifest.** An erased object is rewritten without the records under the same key (same format and codec; its
keys, headers, record-metadata and Block-GZIP index files cut at the same positions:
:mod:`lakesink.executor.rewrite`). Its old row is superseded by an ``erased`` row (its key and old ETag, the erased
offsets, their count, the predicate, the run) and a new ``object`` row records the new bytes (ETag, version, size,
record count; the same commit range and span, so the sink's offsets and the offset chain are untouched; a
record-metadata side file is written if the object had none, as its offsets are no longer contiguous).

**The protocol (crash and race safety).**

1. *Stage.* Each file's new bytes are uploaded to its own key guarded by the old ETag: the store's conditional
   write (``PutObject If-None-Match`` refuses, so the bytes are staged as an unfinished multipart upload,
   invisible, see :meth:`lakesink.store.base.ObjectStore.put_bytes`). Nothing readers see has changed.
2. *Intent.* One manifest commit appends an ``erasing`` row per object: its identity (key, old ETag) and, as JSON
   in ``note``, every staged upload (upload id, parts, the ETags the new bytes will have), the erased offsets and
   the new record count. No reader reads ``erasing`` rows.
3. *Replace.* Each staged upload is completed only if the key still holds the old ETag (``CompleteMultipartUpload
   If-Match``; moto ignores If-Match there, so the store compares the ETag first as well: check-then-complete).
4. *Commit.* One manifest commit appends the ``erased`` row and the new object row of every replaced object.
5. *Delete.* On a versioned bucket the old versions are deleted for good (without it the overwrite removed them).

A kill at any point: before 2, nothing changed (the staged uploads are abandoned and reclaimed by ``vacuum``);
after 2, the next ``lakesink erase --execute`` (any predicate) finishes every unfinished intent: a key already
holding the new bytes (its ETag is one the intent recorded) is done, one still holding the old ETag has its staged
upload completed, then step 4 and 5 follow. On a versioned bucket readers of the manifest read the version it
recorded, so between 3 and 4 they still read the old object consistently; on an unversioned bucket a reader of an
object replaced but not yet committed gets a clear ETag-mismatch error (never the erased records, never a wrong
record) until the rerun commits it. A sink committing at the same time is never touched: the commits append notes
without the sink's batch number and retry after a concurrent commit (:meth:`~lakesink.manifest.deltars.DeltaRsManifest.commit_notes`),
rebuilt from the manifest as it then is (an object no longer live is left alone).
"""
from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping

from lakesink import wiring
from lakesink.driver.erase_plan import ErasedObject, plan
from lakesink.errors import InvalidArgumentError, ObjectChangedError, StoreError
from lakesink.hooks import NO_HOOKS, Hooks
from lakesink.manifest.rows import (ERASED, ERASING, REWRITTEN_NOTE, SideFile, erased_row, erasing_row, live_objects,
                                    rewritten_row, tombstone_identity)
from lakesink.store import strip_etag

__all__ = ["EraseReport", "ErasedObject", "erase", "unfinished_intents"]


@dataclass
class EraseReport:
    """What an erase found (dry run) or did (``executed``)."""

    job: str
    where: str
    run_id: str
    scanned_objects: int = 0  # objects read (after the manifest pruned the others)
    scanned_records: int = 0
    pruned: int = 0  # live objects the manifest ruled out: not read
    matched: list[ErasedObject] = field(default_factory=list)
    unfinished: list[Mapping[str, Any]] = field(default_factory=list)  # intents of earlier runs (erasing rows)
    executed: bool = False
    committed: int = 0  # objects this run rewrote and committed
    finished: int = 0  # objects of earlier runs' intents this run finished
    skipped: list[str] = field(default_factory=list)  # objects left alone (changed or gone meanwhile), with why
    deleted_versions: list[str] = field(default_factory=list)  # key@version deleted for good

    @property
    def records(self) -> int:
        return sum(len(m.offsets) for m in self.matched)


def erase(cfg, where: str, execute: bool = False, run_id: str | None = None,
          hooks: Hooks = NO_HOOKS, runner: Any = None) -> EraseReport:
    """Find (and with ``execute`` erase) the records of ``cfg.name``'s archive that ``where`` selects (see the module
    docstring). ``runner``: runs the plan's tasks (:mod:`lakesink.runners`, or a callable returning one, called
    only for a plan of more than one task; None: the driver reads the objects itself,
    :mod:`lakesink.driver.erase_plan`). ``hooks``: driver points ``after_stage`` (new bytes staged),
    ``before_commit``/``during_commit`` (the intent commit), ``after_intent``, ``after_replace`` (after each object's files were replaced),
    ``after_commit`` (the erased rows committed), ``after_delete`` (after each old version deleted)."""
    from lakesink.executor.archive_tasks import ObjectReader
    from lakesink.manifest.queries import RECORD_PREDICATE_HINT, where_predicate

    if where is None or not where.strip():
        raise InvalidArgumentError("--where: a predicate over records is required (e.g. \"key = 'customer-42'\")")
    predicate = where_predicate(where, hint=RECORD_PREDICATE_HINT)  # refused before anything is read
    report = EraseReport(cfg.name, where.strip(), run_id or uuid.uuid4().hex)
    manifest = wiring.path_manifest(cfg, "erase")
    parts = wiring.task_parts(cfg)
    reader = ObjectReader(parts)

    def read_rows() -> list[dict]:
        return manifest.arrow(job=cfg.name).to_pylist()

    rows = read_rows()
    report.unfinished = unfinished_intents(rows)
    if execute and report.unfinished:
        report.finished = _finish(cfg, manifest, reader, report, report.unfinished, hooks)
        rows = read_rows()
    found = plan(parts, sorted(live_objects(rows), key=lambda r: (r["topic"], r["kafka_partition"], r["first_offset"])),
                 predicate, where, runner)
    report.matched, report.pruned = found.matched, found.pruned
    report.scanned_objects, report.scanned_records = found.scanned_objects, found.scanned_records
    if not execute:
        return report
    report.executed = True
    if not report.matched:
        _delete_old_versions(reader.store, rows, report, hooks)
        return report
    staged = _stage(cfg, reader, report)
    hooks.driver("after_stage")
    by_identity = {tombstone_identity(m.row): (m, note) for m, note in staged}

    def build_intents():
        live = {tombstone_identity(r): r for r in live_objects(read_rows())}
        return [erasing_row(live[ident], note) for ident, (_m, note) in by_identity.items() if ident in live]

    hooks.driver("before_commit")
    hooks.driver("during_commit")
    intents = manifest.commit_notes(cfg.name, report.run_id, "erase", build_intents)
    committed = {tombstone_identity(r.to_json()) for r in intents}
    for ident, (m, note) in by_identity.items():
        if ident not in committed:  # erased or expired meanwhile: drop what was staged for it
            report.skipped.append(f"{m.row['object_key']}: no longer live when the erase committed")
            _abort_staged(reader.store, json.loads(note))
    hooks.driver("after_intent")
    report.committed = _finish(cfg, manifest, reader, report, [r.to_json() for r in intents], hooks)
    return report


# ------------------------------------------------------------------------------------------------------- stage


def _stage(cfg, reader, report: EraseReport) -> list[tuple[ErasedObject, str]]:
    """Each matched object's files rewritten and staged under their own keys (see the protocol); with each, the
    note of its intent row (JSON)."""
    from lakesink.executor.readback import ArchivedObject
    from lakesink.executor.rewrite import REWRITABLE, metadata_bytes, rewrite_file, rewrite_metadata
    from lakesink.objects import naming
    from lakesink.objects.formats.base import RecordView
    from lakesink.objects.formats.blockgzip import INDEX_SUFFIX
    from lakesink.objects.formats.metadata import METADATA_EXTENSION
    from lakesink.store.base import PendingWrite, upload_metadata

    for m in report.matched:  # refused before anything is staged
        fmt_name = m.row.get("format") or reader.parts.value_format.name
        if fmt_name not in REWRITABLE:
            raise InvalidArgumentError(f"{reader.store.uri(m.row['object_key'])}: format {fmt_name!r}: lakesink erase "
                                       f"cannot rewrite it (it rewrites {', '.join(REWRITABLE)}); nothing was changed")
    store = reader.store
    meta = upload_metadata(cfg.name, report.run_id, -1)
    out = []
    for m in report.matched:
        obj = ArchivedObject.from_row(m.row)
        fmt = reader.value_format(obj)
        topic, part = m.row["topic"], int(m.row["kafka_partition"])
        value = store.read(obj.object_key, etag=obj.etag, version_id=obj.version_id)
        new_value, extra = rewrite_file(fmt, RecordView.VALUE, value, m.keep, m.all_offsets, topic, part)
        files: list[tuple[str, str, str | None, str | None, bytes]] = [
            ("value", obj.object_key, obj.etag, obj.version_id, new_value)]
        has_metadata = False
        for side in obj.side_files:
            view, key = side.get("view"), side.get("key")
            data = store.read(key, etag=side.get("etag"), version_id=side.get("version_id"))
            if view == "index":
                new = extra.get(INDEX_SUFFIX)
                if new is None:
                    raise InvalidArgumentError(f"{store.uri(key)}: an index side file of a {fmt.name} object: "
                                               f"lakesink erase cannot rewrite it; nothing was changed")
            elif view == "metadata":
                new, has_metadata = rewrite_metadata(data, m.keep), True
            elif view in ("keys", "headers"):
                sfmt = reader.keys_format if view == "keys" else reader.headers_format
                new, _ = rewrite_file(sfmt, RecordView(view), data, m.keep, m.all_offsets, topic, part)
            else:
                raise InvalidArgumentError(f"{store.uri(key)}: a {view!r} side file: lakesink erase cannot rewrite "
                                           f"it; nothing was changed")
            files.append((view, key, side.get("etag"), side.get("version_id"), new))
        if not has_metadata:  # the offsets are no longer contiguous: readers need each record's offset
            key = (naming.side_key(obj.object_key, fmt.extension, "metadata", METADATA_EXTENSION)
                   if obj.object_key.endswith(fmt.extension) else obj.object_key + ".metadata" + METADATA_EXTENSION)
            new = metadata_bytes([m.all_offsets[i] for i in m.keep], [m.timestamps[i] for i in m.keep],
                                 [m.types[i] for i in m.keep])
            files.append(("metadata", key, None, None, new))
        staged = []
        for view, key, etag, version, data in files:
            res = store.put_bytes(key, data, meta)
            entry = {"view": view, "key": key, "old_etag": strip_etag(etag) if etag else None,
                     "old_version": version, "size": len(data)}
            if isinstance(res, PendingWrite):
                if etag is None or strip_etag(res.existing_etag) != strip_etag(etag):
                    store.abort_pending(res)  # changed since the manifest recorded it: never replaced by us
                    raise ObjectChangedError(f"{store.uri(key)}: holds ETag {res.existing_etag}, the manifest recorded "
                                             f"{etag}: changed under the erase; nothing was committed")
                entry["pending"] = dataclasses.asdict(res)
            elif etag is not None:  # the key is gone: the object changed under the erase
                raise ObjectChangedError(f"{store.uri(key)}: no longer stored (the manifest recorded ETag {etag}); "
                                         f"nothing was committed")
            else:
                entry["written"] = {"etag": strip_etag(res.etag), "version_id": res.version_id}
            staged.append(entry)
        kept_ts = [m.timestamps[i] for i in m.keep if m.timestamps[i] is not None]
        note = {"run_id": report.run_id, "predicate": report.where, "offsets": m.offsets,
                "record_count": len(m.keep), "min_timestamp": min(kept_ts) if kept_ts else None,
                "max_timestamp": max(kept_ts) if kept_ts else None, "files": staged}
        out.append((m, json.dumps(note, separators=(",", ":"))))
    return out


def _abort_staged(store, note: Mapping[str, Any]) -> None:
    from lakesink.store.base import PendingWrite

    for f in note.get("files", ()):
        if f.get("pending"):
            try:
                store.abort_pending(PendingWrite(**_pending_fields(f["pending"])))
            except StoreError:
                pass  # an abandoned upload is reclaimed by vacuum


def _pending_fields(p: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(p)
    out["parts"] = tuple(tuple(x) for x in out.get("parts") or ())
    out["content_etags"] = tuple(out.get("content_etags") or ())
    return out


# ------------------------------------------------------------------------------------------------------ finish


def unfinished_intents(rows: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Intent rows (``erasing``) no ``erased`` row of the same key and old ETag follows, whose object is still live:
    erases killed between their intent commit and their final commit."""
    erased = {tombstone_identity(r) for r in rows if r.get("kind") == ERASED}
    live = {tombstone_identity(r) for r in live_objects(rows)}
    out, seen = [], set()
    for r in rows:
        ident = tombstone_identity(r)
        if r.get("kind") == ERASING and ident not in erased and ident in live and ident not in seen:
            seen.add(ident)
            out.append(r)
    return out


def _replace(store, f: Mapping[str, Any]) -> tuple[str, str | None, int]:
    """Make one staged file visible (or find it already is): its ``(etag, version_id, size)``."""
    from lakesink.store.base import PendingWrite

    key = f["key"]
    head = store.head(key)
    if f.get("written"):
        if head is None or strip_etag(head.etag) != f["written"]["etag"]:
            raise ObjectChangedError(f"{store.uri(key)}: the side file this erase wrote is gone or changed")
        return head.etag, head.version_id, head.size
    pending = PendingWrite(**_pending_fields(f["pending"]))
    if head is not None and strip_etag(head.etag) in {strip_etag(e) for e in pending.content_etags}:
        return strip_etag(head.etag), head.version_id, head.size  # replaced before a crash
    written = store.finish_pending(pending)  # only if the key still holds the old ETag (ObjectChangedError)
    return strip_etag(written.etag), written.version_id, written.size


def _finish(cfg, manifest, reader, report: EraseReport, intents: list[Mapping[str, Any]], hooks: Hooks) -> int:
    """Replace every intent's files, commit the ``erased`` and new object rows, delete the old versions; how many
    objects were committed."""
    store = reader.store
    done: dict[tuple, tuple[Mapping[str, Any], dict, dict[str, tuple]]] = {}
    for intent in intents:
        note = json.loads(intent["note"])
        try:
            written = {f["key"]: _replace(store, f) for f in note["files"]}
        except ObjectChangedError as e:
            report.skipped.append(f"{intent['object_key']}: {e}")
            continue
        except StoreError as e:  # a staged upload vacuum reclaimed: the object is still the old one
            head = store.head(intent["object_key"])
            if head is not None and strip_etag(head.etag) == strip_etag(intent.get("etag")):
                report.skipped.append(f"{intent['object_key']}: its staged rewrite is gone ({e}); still the old "
                                      f"object: erase it again")
                continue
            raise
        done[tombstone_identity(intent)] = (intent, note, written)
        hooks.driver("after_replace")
    if not done:
        return 0

    def build():
        rows = manifest.arrow(job=cfg.name).to_pylist()
        live = {tombstone_identity(r): r for r in live_objects(rows)}
        out = []
        for ident, (intent, note, written) in done.items():
            old = live.get(ident)
            if old is None:
                continue  # committed by a concurrent run
            out.append(erased_row(old, note["offsets"], note["predicate"]))
            value = next(f for f in note["files"] if f["view"] == "value")
            etag, version, size = written[value["key"]]
            sides = tuple(SideFile(f["view"], f["key"], written[f["key"]][0], written[f["key"]][1],
                                   written[f["key"]][2]) for f in note["files"] if f["view"] != "value")
            out.append(rewritten_row(old, etag=etag, version_id=version, size_bytes=size,
                                     record_count=note["record_count"], side_files=sides,
                                     min_timestamp_ms=note["min_timestamp"], max_timestamp_ms=note["max_timestamp"],
                                     note=f"{REWRITTEN_NOTE} (run {note['run_id']})"))
        return out

    committed = manifest.commit_notes(cfg.name, report.run_id, "erase", build)
    hooks.driver("after_commit")
    _delete_old_versions(store, manifest.arrow(job=cfg.name).to_pylist(), report, hooks)
    return sum(1 for r in committed if r.kind == ERASED)


def _delete_old_versions(store, rows: list[Mapping[str, Any]], report: EraseReport, hooks: Hooks) -> None:
    """On a versioned bucket, delete for good every version an ``erased`` row recorded (the bytes before the
    rewrite) that is not the version a live row reads; a version already gone is skipped."""
    from lakesink.manifest.rows import object_files

    live_versions = {(k, v) for r in live_objects(rows) for k, _e, v in object_files(r) if v}
    for r in rows:
        if r.get("kind") != ERASED:
            continue
        for key, _etag, version in object_files(r):
            if not version or (key, version) in live_versions or f"{key}@{version}" in report.deleted_versions:
                continue
            if not _version_exists(store, key, version):
                continue
            store.delete_version(key, version)
            report.deleted_versions.append(f"{key}@{version}")
            hooks.driver("after_delete")


def _version_exists(store, key: str, version: str) -> bool:
    """Whether ``key`` still has version ``version`` (a store without versions: never)."""
    client = getattr(store, "client", None)
    if client is None:
        return False
    from botocore.exceptions import ClientError

    try:
        client.head_object(Bucket=store.settings.bucket, Key=key, VersionId=version)
        return True
    except ClientError:
        return False
