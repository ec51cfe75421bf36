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
Files of tombstones only (``behavior.on.null.values=write``: a keys file, with headers and metadata when stored,
under the ``tombstone.encoded.partition`` directory and no value object) become rows of their own
(:data:`~lakesink.manifest.rows.TOMBSTONES_NOTE`), so their offsets are no gap and restore gives them back as nulls.
Per partition, an object whose range overlaps an already accepted one (or a range the job's manifest already
holds) is reported and NOT imported; a gap between consecutive objects is reported (and both are imported).
Keys no row could describe (another naming, another format) are reported as unrecognized. Objects any manifest
row already references are skipped, so running the import again adds nothing.

Another connector's objects (``naming``: :mod:`lakesink.driver.import_formats`, from the old connector's config)
are adopted in their own naming and format: Aiven's, DeviantArt's Block-GZIP with its ``.index.json``, Zooz's. Their
rows name the read-only format they are read with (``format``) and their file compression (``compression``), so
``read_archive``, ``restore`` and the views read them as they are. A value object that cannot be adopted (Aiven's
snappy, a Block-GZIP object without its index, records whose offsets are not the name's) is reported, one line
each, and not imported.
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
    #: value objects of another connector's naming that cannot be adopted, one line each (why)
    refused: list[str] = field(default_factory=list)
    batch_id: int | None = None
    dry_run: bool = False

    @property
    def records(self) -> int:
        return sum(o.records for o in self.imported)


def import_archive(spark: Any, config: Any, prefix: str | None = None, *, dry_run: bool = False,
                   naming: Any = None) -> ImportReport:
    """Commit manifest rows for the config's objects under ``prefix`` (default: ``topics.dir``) that no manifest
    row references yet; see the module docstring. ``spark``: a session or a callable returning one (only a
    catalog-table manifest needs it). ``naming``: another connector's
    (:class:`lakesink.driver.import_formats.ForeignNaming`): its objects, in its own naming and format, are adopted
    instead of Confluent's."""
    from lakesink.store import open_store

    cfg = as_config(config)
    store = open_store(wiring.store_settings(cfg))
    manifest = wiring.manifest(cfg, spark)
    known = manifest.committed_keys() if manifest.exists() else set()
    state = manifest.snapshot(cfg.name).partitions if manifest.exists() else {}
    report = ImportReport(dry_run=dry_run)
    if naming is None:
        found = _confluent_rows(cfg, store, prefix, known, report)
    else:
        found = _foreign_rows(cfg, store, naming, prefix, known, report)
    _commit(cfg, store, manifest, found, state, report, dry_run)
    return report


def _listing(store: Any, prefix: str):
    for info in store.list(prefix):
        if "/_lakesink/" in f"/{info.key}":  # the manifest's own files, when it lives in the bucket
            continue
        # a store whose listing has no ETags (file://: it would read every file) gives them per object
        yield info if info.etag else (store.head(info.key) or info)


def _count(store: Any, fmt: Any, key: str, etag: str | None) -> tuple[int, bytes]:
    data = store.read(key, etag=etag)
    try:
        return sum(1 for _ in fmt.read(io.BytesIO(data))), data
    except LakesinkError:
        raise
    except Exception as e:  # noqa: BLE001 - a format's decoder error: the object is not what its name says
        raise LakesinkError(f"{store.uri(key)}: cannot be read as {fmt.name}: {type(e).__name__}: {e}") from None


def _record_parts(store: Any, fmt: Any, key: str, etag: str | None) -> Any:
    """The records of an object that holds them whole (:meth:`Format.record_parts
    <lakesink.objects.formats.base.Format.record_parts>`), or one error line naming it."""
    data = store.read(key, etag=etag)
    try:
        return fmt.record_parts(data)
    except LakesinkError:
        raise
    except Exception as e:  # noqa: BLE001 - a format's decoder error: the object is not what its name says
        raise LakesinkError(f"{store.uri(key)}: cannot be read as {fmt.name}: {type(e).__name__}: {e}") from None


def _confluent_rows(cfg: Any, store: Any, prefix: str | None, known: set, report: ImportReport) -> dict:
    from lakesink.objects.formats.metadata import METADATA_EXTENSION
    from lakesink.objects.naming import KeyExtensions, parse_key

    naming = wiring.naming(cfg)
    fmt = wiring.value_format(cfg)
    exts = KeyExtensions(value=fmt.extension, keys=wiring.keys_format(cfg).extension,
                         headers=wiring.headers_format(cfg).extension, index=fmt.has_index,
                         metadata=METADATA_EXTENSION)
    values: dict[str, Any] = {}
    sides: dict[tuple, dict[str, Any]] = {}
    for info in _listing(store, prefix if prefix is not None else naming.prefix):
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
        count, _data = _count(store, fmt, key, info.etag)
        if count == 0:
            report.empty.append(key)
            continue
        side_infos = sides.get(ident, {})
        first, last, tmin, tmax = _span(store, side_infos.get("metadata"), parsed.start_offset, count)
        files = tuple(SideFile(view, i.key, i.etag, i.version_id, i.size) for view, i in sorted(side_infos.items()))
        row = object_row(parsed.topic, parsed.partition, first, last, first_offset=first, last_offset=last,
                         record_count=count, encoded_partition=parsed.encoded_partition, object_key=key,
                         object_uri=store.uri(key), side_files=files, format=fmt.name, compression=wiring.value_compression(cfg),
                         size_bytes=info.size, etag=info.etag, version_id=info.version_id, min_timestamp_ms=tmin,
                         max_timestamp_ms=tmax)
        found.setdefault((parsed.topic, parsed.partition), []).append(row)
    _tombstone_rows(cfg, store, exts, {ident for ident, _p, _i in values.values()}, sides, known, report, found)
    return found


def _span(store: Any, md_info: Any, start: int, count: int) -> tuple[int, int, int | None, int | None]:
    """(first offset, last offset, min timestamp, max timestamp) of a file of ``count`` records named at offset
    ``start``: from its record-metadata side file when it has one that holds them (offsets may have holes), else
    contiguous from ``start`` with no timestamps."""
    from lakesink.objects.formats.metadata import MetadataFormat

    if md_info is not None:
        md = MetadataFormat().read_columns(io.BytesIO(store.read(md_info.key, etag=md_info.etag)))
        if len(md) == count and md.offsets:
            ts = [t for t in md.timestamps if t is not None]
            return md.offsets[0], md.offsets[-1], (min(ts) if ts else None), (max(ts) if ts else None)
    return start, start + count - 1, None, None


def _tombstone_rows(cfg: Any, store: Any, exts: Any, with_value: set, sides: dict, known: set, report: ImportReport,
                    found: dict) -> None:
    """Rows for files of tombstones only (``behavior.on.null.values=write``): under the ``tombstone.encoded.partition``
    directory Confluent's sink (and lakesink's) writes a keys file (with headers and record metadata when stored) and
    no value object, named as the value object would be (spec §5). Such a row names that absent value object and
    carries :data:`~lakesink.manifest.rows.TOMBSTONES_NOTE`; its records read back with null values."""
    from lakesink.manifest.rows import TOMBSTONES_NOTE

    fmt, keys_fmt = wiring.value_format(cfg), wiring.keys_format(cfg)
    tomb = cfg.tombstone_encoded_partition
    for ident, side_infos in sorted(sides.items(), key=lambda kv: kv[0]):
        topic, partition, start, encoded = ident
        keys_info = side_infos.get("keys")
        if ident in with_value or encoded != tomb or keys_info is None:
            continue
        if keys_info.key in known:
            report.already_in_manifest += 1
            continue
        count, _data = _count(store, keys_fmt, keys_info.key, keys_info.etag)
        if count == 0:
            report.empty.append(keys_info.key)
            continue
        first, last, tmin, tmax = _span(store, side_infos.get("metadata"), start, count)
        key = keys_info.key[:-len(".keys" + exts.keys)] + fmt.extension  # the value object it would have
        files = tuple(SideFile(view, i.key, i.etag, i.version_id, i.size) for view, i in sorted(side_infos.items()))
        row = object_row(topic, partition, first, last, first_offset=first, last_offset=last, record_count=count,
                         encoded_partition=encoded, object_key=key, object_uri=store.uri(key), side_files=files,
                         format=fmt.name, compression=wiring.value_compression(cfg), size_bytes=0, etag=None,
                         version_id=None, min_timestamp_ms=tmin, max_timestamp_ms=tmax, note=TOMBSTONES_NOTE)
        found.setdefault((topic, partition), []).append(row)


def _foreign_rows(cfg: Any, store: Any, naming: Any, prefix: str | None, known: set, report: ImportReport) -> dict:
    """Rows for the objects another connector wrote in its own naming (``naming``), read with its format."""
    from lakesink.objects.formats import FormatSpec

    topics = list(cfg.topics or ())
    if cfg.topics_regex:
        import re

        pattern = re.compile(cfg.topics_regex)
        accept = lambda t: pattern.fullmatch(t) is not None  # noqa: E731
    else:
        accept = lambda t: t in topics  # noqa: E731
    values: dict[str, Any] = {}
    indexes: dict[tuple, Any] = {}
    for info in _listing(store, prefix if prefix is not None else naming.prefix):
        parsed = naming.parse(info.key, _Accepting(accept))
        if parsed is None:
            report.unrecognized.append(info.key)
        elif parsed.view == "index":
            indexes[(parsed.topic, parsed.partition, parsed.start_offset)] = info
        else:
            values[info.key] = (parsed, info)
    found: dict[tuple[str, int], list] = {}
    for key, (parsed, info) in sorted(values.items()):
        if key in known:
            report.already_in_manifest += 1
            continue
        if parsed.refused:
            report.refused.append(f"{store.uri(key)}: not imported: {parsed.refused}")
            continue
        fmt = FormatSpec(naming.format_name, {}).build(parsed.compression)
        first, tmin, tmax = parsed.start_offset, None, None
        if fmt.holds_record_parts:  # Aiven jsonl: the lines may carry each record's offset and timestamp
            parts = _record_parts(store, fmt, key, info.etag)
            count, offs = len(parts.values), parts.offsets
            if offs and (offs[0] != first or any(b <= a for a, b in zip(offs, offs[1:]))):
                report.refused.append(f"{store.uri(key)}: not imported: its records' offsets ({offs[0]}..{offs[-1]}) "
                                      f"do not ascend from {first}, the offset its name gives (lakesink would "
                                      f"misplace them)")
                continue
            last = offs[-1] if offs else first + count - 1
            ts = [t for t in parts.timestamps or () if t is not None]
            tmin, tmax = (min(ts), max(ts)) if ts else (None, None)
        else:
            count, _data = _count(store, fmt, key, info.etag)
            last = first + count - 1
        if count == 0:
            report.empty.append(key)
            continue
        files = ()
        index = indexes.get((parsed.topic, parsed.partition, parsed.start_offset))
        if naming.format_name == "blockgzip":
            if index is None:
                report.refused.append(f"{store.uri(key)}: not imported: no .index.json next to it")
                continue
            files = (SideFile("index", index.key, index.etag, index.version_id, index.size),)
        row = object_row(parsed.topic, parsed.partition, first, last, first_offset=first, last_offset=last,
                         record_count=count, encoded_partition=None, object_key=key, object_uri=store.uri(key),
                         side_files=files, format=naming.format_name, compression=parsed.compression,
                         size_bytes=info.size, etag=info.etag, version_id=info.version_id, min_timestamp_ms=tmin,
                         max_timestamp_ms=tmax)
        found.setdefault((parsed.topic, parsed.partition), []).append(row)
    return found


class _Accepting:
    """``topic in topics`` for a config's ``topics`` list or ``topics.regex``."""

    def __init__(self, accept):
        self.accept = accept

    def __contains__(self, topic: object) -> bool:
        return isinstance(topic, str) and self.accept(topic)


def _commit(cfg: Any, store: Any, manifest: Any, found: dict, state: dict, report: ImportReport,
            dry_run: bool) -> None:
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
