"""Adopting an archive that has no manifest: objects written by Confluent's S3 sink (or by lakesink without a
manifest) become manifest rows of the config's job, committed in ONE Delta transaction.

:func:`import_archive` lists the store under ``topics.dir`` (or ``prefix``), parses every key as the config's
naming builds them (``<topics.dir>/<topic>/<encoded partition>/<topic>+<partition>+<start offset><ext>``, any
partitioner layout: :func:`lakesink.objects.naming.parse_key`), groups value objects with their side files
(``.keys``, ``.headers``, ``.metadata.avro``, Block-GZIP ``.index.json``), reads each value object once (at the
ETag it was listed with) to count its records, and commits one ``object`` row per object.

Offsets: a ``.metadata.avro`` side file gives them exactly (and the timestamps); without one (Confluent) the
object's records are taken as contiguous from the offset in its name (Confluent names a file by its first
record's offset; compacted topics and transaction markers make real gaps, which such a bucket cannot show).
Per partition, an object whose range overlaps an already accepted one (or a range the job's manifest already
holds) is reported and NOT imported; a gap between consecutive objects is reported (and both are imported).
Keys no row could describe (another naming, another format) are reported as unrecognized. Objects any manifest
row already references are skipped, so running the import again adds nothing.
"""
from __future__ import annotations

import io
import uuid
from dataclasses import dataclass, field
from typing import Any

from lakesink import wiring
from lakesink.driver.archive import as_config
from lakesink.errors import KeyNameError, LakesinkError
from lakesink.manifest.rows import SideFile, object_row

__all__ = ["ImportedObject", "ImportReport", "import_archive"]


@dataclass(frozen=True)
class ImportedObject:
    key: str
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    records: int
    side_files: tuple[str, ...] = ()


@dataclass
class ImportReport:
    """What :func:`import_archive` found and committed (``batch_id`` None: nothing committed)."""

    imported: list[ImportedObject] = field(default_factory=list)
    already_in_manifest: int = 0
    unrecognized: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    batch_id: int | None = None
    dry_run: bool = False

    @property
    def records(self) -> int:
        return sum(o.records for o in self.imported)


def import_archive(spark: Any, config: Any, prefix: str | None = None, *, dry_run: bool = False) -> ImportReport:
    """Commit manifest rows for the config's objects under ``prefix`` (default: ``topics.dir``) that no manifest
    row references yet; see the module docstring. ``spark``: a session or a callable returning one (only a
    catalog-table manifest needs it)."""
    from lakesink.objects.formats.metadata import METADATA_EXTENSION, MetadataFormat
    from lakesink.objects.naming import KeyExtensions, parse_key
    from lakesink.store import open_store

    cfg = as_config(config)
    naming = wiring.naming(cfg)
    fmt = wiring.value_format(cfg)
    exts = KeyExtensions(value=fmt.extension, keys=wiring.keys_format(cfg).extension,
                         headers=wiring.headers_format(cfg).extension, index=fmt.has_index,
                         metadata=METADATA_EXTENSION)
    store = open_store(wiring.store_settings(cfg))
    manifest = wiring.manifest(cfg, spark)
    known = manifest.committed_keys() if manifest.exists() else set()
    state = manifest.snapshot(cfg.name).partitions if manifest.exists() else {}
    report = ImportReport(dry_run=dry_run)

    values: dict[str, Any] = {}
    sides: dict[tuple, dict[str, Any]] = {}
    for info in store.list(prefix if prefix is not None else naming.prefix):
        if "/_lakesink/" in f"/{info.key}":  # the manifest's own files, when it lives in the bucket
            continue
        try:
            parsed = parse_key(info.key, naming, exts)
        except KeyNameError:
            report.unrecognized.append(info.key)
            continue
        ident = (parsed.topic, parsed.partition, parsed.start_offset, parsed.encoded_partition)
        if parsed.view == "value":
            values[info.key] = (ident, parsed, info)
        else:
            sides.setdefault(ident, {})[parsed.view] = info

    found: dict[tuple[str, int], list] = {}
    for key, (ident, parsed, info) in sorted(values.items()):
        if key in known:
            report.already_in_manifest += 1
            continue
        data = store.read(key, etag=info.etag)
        try:
            count = sum(1 for _ in fmt.read(io.BytesIO(data)))
        except LakesinkError:
            raise
        except Exception as e:  # noqa: BLE001 - a format's decoder error: the object is not what its name says
            raise LakesinkError(f"{store.uri(key)}: cannot be read as {fmt.name}: {type(e).__name__}: {e}") from None
        if count == 0:
            report.empty.append(key)
            continue
        side_infos = sides.get(ident, {})
        first, last, tmin, tmax = parsed.start_offset, parsed.start_offset + count - 1, None, None
        md_info = side_infos.get("metadata")
        if md_info is not None:
            md = MetadataFormat().read_columns(io.BytesIO(store.read(md_info.key, etag=md_info.etag)))
            if len(md) == count and md.offsets:
                first, last = md.offsets[0], md.offsets[-1]
                ts = [t for t in md.timestamps if t is not None]
                tmin, tmax = (min(ts), max(ts)) if ts else (None, None)
        files = tuple(SideFile(view, i.key, i.etag, i.version_id, i.size) for view, i in sorted(side_infos.items()))
        row = object_row(parsed.topic, parsed.partition, first, last, first_offset=first, last_offset=last,
                         record_count=count, encoded_partition=parsed.encoded_partition, object_key=key,
                         object_uri=store.uri(key), side_files=files, format=fmt.name, compression=wiring.value_compression(cfg),
                         size_bytes=info.size, etag=info.etag, version_id=info.version_id, min_timestamp_ms=tmin,
                         max_timestamp_ms=tmax)
        found.setdefault((parsed.topic, parsed.partition), []).append(row)

    rows = []
    for tp, objs in sorted(found.items()):
        held = state.get(tp)
        prev_last = held.next_offset - 1 if held is not None else None
        prev_key = "the manifest" if held is not None else None
        for r in sorted(objs, key=lambda r: (r.first_offset, r.last_offset)):
            if prev_last is not None and r.first_offset <= prev_last:
                report.overlaps.append(f"{store.uri(r.object_key)}: offsets {r.first_offset}..{r.last_offset} overlap "
                                       f"{prev_key} (up to {prev_last}); not imported")
                continue
            if prev_last is not None and r.first_offset > prev_last + 1:
                report.gaps.append(f"{tp[0]}-{tp[1]}: offsets {prev_last + 1}..{r.first_offset - 1} are in no object "
                                   f"(before {store.uri(r.object_key)})")
            rows.append(r)
            report.imported.append(ImportedObject(r.object_key, r.topic, r.kafka_partition, r.first_offset,
                                                  r.last_offset, r.record_count,
                                                  tuple(s.key for s in r.side_files or ())))
            prev_last, prev_key = r.last_offset, store.uri(r.object_key)
    if rows and not dry_run:
        manifest.ensure()
        batch_id = manifest.snapshot(cfg.name).next_batch_id
        manifest.commit(cfg.name, batch_id, f"import-{uuid.uuid4().hex[:12]}", rows)
        report.batch_id = batch_id
    return report
