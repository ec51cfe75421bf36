"""Schema history and schema checks of an archive (issue #11 items 4 and 5), without Spark for a path manifest.

:func:`schema_history`: the manifest's value schemas per topic (:func:`lakesink.manifest.queries.schema_history`).

:func:`schema_check`: a candidate Avro schema against every schema version the archive holds, and the registry's
versions of the subject when one is configured and reachable, under a compatibility mode. The archive's versions
come from the manifest (one per distinct fingerprint of the topic's object rows) and the schema text from the
objects themselves — an Avro object's container header (a ranged read of its first bytes), a Parquet object's
footer key ``parquet.avro.schema`` — so the registry is not required: an archive may outlive it. Objects whose
rows carry no fingerprint (imported archives) are sampled: the latest object of each Kafka partition.

Versions are ordered oldest first by registry version (versions unknown to the manifest come first, by when the
archive last saw them); "latest" in a non-transitive mode is the last of that order.
"""
from __future__ import annotations

import copy
import datetime as dt
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import fastavro

from lakesink import plugins, wiring
from lakesink.errors import (ArchiveReadError, CorruptObjectError, LakesinkError, RegistryError, SchemaCheckInputError,
                             StoreError)
from lakesink.manifest import queries
from lakesink.manifest.rows import value_omitted
from lakesink.objects.formats.avro import HEADER_READ_BYTES  # re-exported: the Avro header read's first size
from lakesink.schemas import compatibility
from lakesink.schemas.avro import fingerprint

__all__ = ["ArchivedSchema", "SchemaCheckReport", "SchemaHistoryReport", "schema_check", "schema_history",
           "read_object_schema", "candidate_schema", "HEADER_READ_BYTES"]

#: The first ranged read of an Avro object's header; doubled while the header is longer.


@dataclass
class ArchivedSchema:
    """One earlier schema version a candidate is checked against, and where it was found."""

    label: str                    # "version 3", "schema id 7", "archived schema 1a2b3c4d" (how messages name it)
    schema: Any
    fingerprint: str
    subject: str | None = None
    version: int | None = None
    id: int | None = None
    sources: list[str] = field(default_factory=list)  # "archive: s3://b/k.avro", "registry: subject t-value v3"
    last_seen: dt.datetime | None = None


@dataclass
class SchemaCheckReport:
    """The result of a schema check (CLI ``lakesink schema check``, notebook ``lakesink.schema_check``)."""

    topic: str
    subject: str | None
    mode: str
    candidate_fingerprint: str
    versions: list[ArchivedSchema]             # every version known, oldest first
    compared: list[str]                        # labels of the versions the mode compared with
    incompatibilities: list[compatibility.Incompatibility]
    warnings: list[str] = field(default_factory=list)
    registry_checked: bool = False
    nothing_to_compare: str | None = None      # why no earlier version was found (None: some were)
    allow_empty: bool = False                  # nothing to compare passes (exit 0) instead of failing (exit 1)

    @property
    def compatible(self) -> bool:
        return not self.incompatibilities

    @property
    def passed(self) -> bool:
        """Compatible, and checked against something (or ``allow_empty``): a CI gate never passes vacuously."""
        return self.compatible and (self.nothing_to_compare is None or self.allow_empty)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1


@dataclass
class SchemaHistoryReport:
    """``lakesink schema history``: the entries of :func:`lakesink.manifest.queries.schema_history`."""

    job: str
    topic: str | None
    entries: list[queries.SchemaHistoryEntry]


# ----------------------------------------------------------------------------------------------- inputs

def _config(config: Any):
    from lakesink.config import SinkConfig, load_config

    return config if isinstance(config, SinkConfig) else load_config(config)


def candidate_schema(schema: Any) -> tuple[Any, str]:
    """The candidate as an Avro schema in JSON form and how to name it: ``schema`` is a path to an ``.avsc``
    file, a JSON string, or an already parsed schema. Raises SchemaCheckInputError naming the file."""
    import avro.schema

    from lakesink.schemas.avro import parse_schema

    name = "the schema"
    obj = schema
    if isinstance(schema, (str, os.PathLike)) and not str(schema).lstrip().startswith(("{", "[", '"')):
        name = f"schema file {schema}"
        try:
            with open(schema, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            raise SchemaCheckInputError(f"{name}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise SchemaCheckInputError(f"{name}: cannot be read: {e}") from None
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise SchemaCheckInputError(f"{name}: not valid JSON: {e}") from None
    elif isinstance(schema, str):
        try:
            obj = json.loads(schema)
        except ValueError as e:
            raise SchemaCheckInputError(f"{name}: not valid JSON: {e}") from None
    from fastavro.schema import UnknownType

    try:
        fastavro.parse_schema(copy.deepcopy(obj))
    except UnknownType as e:  # its message is the bare name
        raise SchemaCheckInputError(f"{name}: invalid Avro schema: unknown type {e.name!r}") from None
    except Exception:  # noqa: BLE001 - worded by parse_schema below
        pass
    try:
        obj = parse_schema(obj)
        avro.schema.parse(json.dumps(obj))  # the checker's parser: stricter about names than fastavro
    except LakesinkError as e:
        raise SchemaCheckInputError(f"{name}: {e}") from None
    except Exception as e:  # noqa: BLE001 - avro raises SchemaParseException and friends
        raise SchemaCheckInputError(f"{name}: invalid Avro schema: {e}") from None
    return obj, name


def _rows(cfg, spark: Any) -> list[dict[str, Any]]:
    """The job's object rows (the columns the history and the check read); none before the first commit."""
    m = wiring.manifest(cfg, spark)
    if not m.exists():
        return []
    if hasattr(m, "arrow"):
        return queries.row_dicts(m.arrow(queries.HISTORY_COLUMNS, job=cfg.name, kind="object"))
    from pyspark.sql import functions as F

    df = m.df().where((F.col("job") == cfg.name) & (F.col("kind") == "object")).select(*queries.HISTORY_COLUMNS)
    return [r.asDict() for r in df.collect()]


def _known_topic(cfg, topic: str, rows: list[dict[str, Any]]) -> bool:
    if topic in cfg.topics or any(r["topic"] == topic for r in rows):
        return True
    return bool(cfg.topics_regex and re.fullmatch(cfg.topics_regex, topic))


def _pick_topic(cfg, topic: str | None, rows: list[dict[str, Any]]) -> str:
    if topic is not None:
        if not _known_topic(cfg, topic, rows):
            listed = ", ".join(sorted(set(cfg.topics) | {r["topic"] for r in rows})) or "none"
            raise SchemaCheckInputError(f"--topic {topic}: job {cfg.name!r} does not archive this topic "
                                        f"(its topics: {listed})")
        return topic
    candidates = sorted(set(cfg.topics) | {r["topic"] for r in rows})
    if len(candidates) == 1:
        return candidates[0]
    raise SchemaCheckInputError(f"--topic is required: job {cfg.name!r} archives "
                                f"{', '.join(candidates) if candidates else 'topics matching ' + repr(cfg.topics_regex)}")


# ----------------------------------------------------------------------------------------------- history

def schema_history(config: Any, topic: str | None = None, spark: Any = None) -> SchemaHistoryReport:
    """Per topic and value schema: version, id, fingerprint, offsets and timestamps seen, objects (from the
    manifest; ``spark`` only for a catalog-table manifest). ``topic`` must be one the job archives."""
    cfg = _config(config)
    rows = _rows(cfg, spark)
    if topic is not None:
        _pick_topic(cfg, topic, rows)
    return SchemaHistoryReport(cfg.name, topic, queries.schema_history(rows, topic))


# ----------------------------------------------------------------------------------------------- objects

def _carries_schema(row: dict[str, Any]) -> bool:
    """Whether the row's object is of a format whose files carry their writer schema (Avro, Parquet)."""
    if value_omitted(row):  # tombstones only: no value object, so no writer schema
        return False
    key = plugins.canonical("format", row.get("format")) if row.get("format") else None
    return key is not None and plugins.load("format", key).schema_per_file


def read_object_schema(store: Any, row: dict[str, Any]) -> Any | None:
    """The writer schema an archived object carries (Avro: container header; Parquet: footer), reading only
    those bytes; None for formats that carry none (JSON, bytes). Raises ArchiveReadError naming the object."""
    key, name = row["object_key"], row.get("format")
    etag, vid = row.get("etag"), row.get("version_id")
    canonical = plugins.canonical("format", name) if name else None
    if canonical is None:
        return None

    def read_range(start: int, end: int) -> bytes:
        return store.read(key, etag=etag, version_id=vid, byte_range=(start, end))

    def size() -> int:
        if row.get("size_bytes") is not None:
            return int(row["size_bytes"])
        info = store.head(key)
        if info is None:
            raise StoreError("no such object")
        return info.size

    try:
        return plugins.load("format", canonical).writer_schema(read_range, size)  # Format.writer_schema
    except ArchiveReadError as e:
        raise CorruptObjectError(f"{store.uri(key)}: {e}") from None


# ----------------------------------------------------------------------------------------------- check

def _label(version: int | None, schema_id: int | None, fp: str) -> str:
    if version is not None:
        return f"version {version}"
    if schema_id is not None:
        return f"schema id {schema_id}"
    return f"archived schema {fp[:8]}"


def _archive_versions(cfg, topic: str, rows: list[dict[str, Any]], registry: Callable[[int], Any] | None,
                      warnings: list[str]) -> list[ArchivedSchema]:
    """One ArchivedSchema per distinct schema of ``topic``'s objects (one object read per fingerprint)."""
    from lakesink.store import open_store

    rows = [r for r in rows if r["topic"] == topic]
    by_fp: dict[str, list[dict[str, Any]]] = {}
    unfingerprinted: dict[int, dict[str, Any]] = {}  # latest object per partition
    for r in rows:
        fp = r.get("schema_fingerprint")
        if fp:
            by_fp.setdefault(fp, []).append(r)
        elif _carries_schema(r):
            cur = unfingerprinted.get(r["kafka_partition"])
            if cur is None or (r.get("last_offset") or -1) > (cur.get("last_offset") or -1):
                unfingerprinted[r["kafka_partition"]] = r
    store = open_store(wiring.store_settings(cfg)) if rows else None
    found: dict[str, ArchivedSchema] = {}

    def add(schema: Any, r: dict[str, Any], seen_rows: list[dict[str, Any]], origin: str) -> None:
        fp = fingerprint(schema)
        key = json.dumps(schema, sort_keys=True)
        last = max((queries.naive_utc(x.get("max_timestamp")) for x in seen_rows if x.get("max_timestamp")),
                   default=None)
        a = found.get(key)
        if a is None:
            found[key] = ArchivedSchema(_label(r.get("schema_version"), r.get("schema_id"), fp), schema, fp,
                                        r.get("schema_subject"), r.get("schema_version"), r.get("schema_id"),
                                        [origin], last)
        elif origin not in a.sources:
            a.sources.append(origin)

    for fp, group in by_fp.items():
        latest = max(group, key=lambda x: (x.get("last_offset") or -1))
        readable = [x for x in group if _carries_schema(x)]
        r = max(readable, key=lambda x: (x.get("last_offset") or -1)) if readable else latest
        schema = read_object_schema(store, r) if readable else None
        if schema is not None:
            if fingerprint(schema) != fp:
                warnings.append(f"{store.uri(r['object_key'])} carries a schema with fingerprint "
                                f"{fingerprint(schema)[:12]}, its manifest row says {fp[:12]}: the object's is used")
            add(schema, r, group, f"archive: {store.uri(r['object_key'])}")
            continue
        sid = r.get("schema_id")
        if sid is not None and registry is not None:
            try:
                schema = json.loads(registry(sid).text)
                add(schema, r, group, f"registry: schema id {sid} (archived in {r.get('format')} objects)")
                continue
            except (RegistryError, ValueError) as e:
                warnings.append(f"schema id {sid} of {len(group)} {r.get('format')} object(s): {e}")
                continue
        warnings.append(f"{_label(r.get('schema_version'), sid, fp)} of {len(group)} {r.get('format')} object(s) "
                        f"of {topic}: {r.get('format')} objects do not carry their schema and no registry answered "
                        f"for it; not compared")
    for r in unfingerprinted.values():
        schema = read_object_schema(store, r)
        if schema is not None:
            add(schema, r, [r], f"archive: {store.uri(r['object_key'])}")
    return list(found.values())


def _order(versions: list[ArchivedSchema]) -> list[ArchivedSchema]:
    epoch = dt.datetime(1970, 1, 1)
    return sorted(versions, key=lambda a: (a.version is not None, a.version or 0, a.last_seen or epoch))


def schema_check(config: Any, schema: Any, subject: str | None = None, topic: str | None = None,
                 mode: str | None = None, spark: Any = None, use_registry: bool = True,
                 allow_empty: bool = False) -> SchemaCheckReport:
    """Check the candidate ``schema`` (an ``.avsc`` path, JSON text or parsed schema) against every schema
    version the archive of ``topic`` holds and, when the config names a reachable Schema Registry, the
    registry's versions of ``subject`` (default: the config's value subject name strategy for the topic),
    under ``mode`` (default: the config's ``schema.compatibility``; transitive modes too).

    Raises SchemaCheckInputError (CLI exit 2) for a missing or invalid schema, an unknown topic or mode; a
    registry that cannot be reached is a warning when the archive holds versions, else the RegistryError.
    No earlier version anywhere (a JSON or schemaless archive, no registry versions): the report says there was
    nothing to compare (``nothing_to_compare``) and fails (exit 1) unless ``allow_empty``."""
    from lakesink.schemas.registry import shared_client, subject_name

    cfg = _config(config)
    mode = (mode or cfg.schema_compatibility).upper()
    if mode not in compatibility.CHECK_MODES:
        raise SchemaCheckInputError(f"--mode {mode}: expected one of {', '.join(compatibility.CHECK_MODES)}")
    candidate, _ = candidate_schema(schema)
    rows = _rows(cfg, spark)
    topic = _pick_topic(cfg, topic, rows)
    warnings: list[str] = []

    settings = wiring.registry_settings(cfg) if use_registry else None
    client = shared_client(settings) if settings is not None else None
    record_name = candidate.get("name") if isinstance(candidate, dict) else None
    if isinstance(candidate, dict) and record_name and "." not in record_name and candidate.get("namespace"):
        record_name = f"{candidate['namespace']}.{record_name}"
    if subject is None:
        subject = subject_name(cfg.value_subject_name_strategy, topic, record_name)
    versions = _archive_versions(cfg, topic, rows, client.schema if client is not None else None, warnings)

    registry_checked = False
    if client is not None:
        try:
            registered = client.subject_schemas(subject)
            registry_checked = True
        except RegistryError as e:
            if not versions:
                raise
            warnings.append(f"{e}; checked against the archive's versions only")
            registered = []
        if registry_checked and not registered:
            warnings.append(f"subject {subject!r} has no versions in the Schema Registry at {settings.shown_url}")
        by_text = {json.dumps(v.schema, sort_keys=True): v for v in versions}
        for v, reg in registered:
            if reg.schema_type != "AVRO":
                warnings.append(f"subject {subject!r} version {v} is {reg.schema_type}, not Avro; not compared")
                continue
            s = json.loads(reg.text)
            origin = f"registry: subject {subject} version {v} (id {reg.id})"
            hit = by_text.get(json.dumps(s, sort_keys=True))
            if hit is not None:
                hit.sources.append(origin)
                hit.version = hit.version if hit.version is not None else v
                hit.id = hit.id if hit.id is not None else reg.id
                hit.subject = hit.subject or subject
                hit.label = _label(hit.version, hit.id, hit.fingerprint)
            else:
                a = ArchivedSchema(_label(v, reg.id, fingerprint(s)), s, fingerprint(s), subject, v, reg.id, [origin])
                versions.append(a)
                by_text[json.dumps(s, sort_keys=True)] = a
    versions = _order(versions)
    empty = None if versions else _nothing_to_compare(topic, rows, subject if client is not None else None)
    rules, transitive = compatibility.check_modes(mode)
    targets = versions if transitive else versions[-1:]
    priors = [compatibility.PriorSchema(v.label, v.schema) for v in targets]
    found = compatibility.check_candidate(candidate, priors, mode)
    return SchemaCheckReport(topic=topic, subject=subject, mode=mode, candidate_fingerprint=fingerprint(candidate),
                             versions=versions, compared=[v.label for v in targets] if rules else [],
                             incompatibilities=found, warnings=warnings, registry_checked=registry_checked,
                             nothing_to_compare=empty, allow_empty=allow_empty)


def _nothing_to_compare(topic: str, rows: list[dict[str, Any]], subject: str | None) -> str:
    """Why a check found no earlier version: what the archive holds of ``topic`` and whether a registry was asked."""
    held = [r for r in rows if r["topic"] == topic]
    formats = ", ".join(sorted({str(r.get("format") or "?") for r in held}))
    unread = " lakesink could read (see the warnings)" if {r.get("format") for r in held} & {"avro", "parquet"} else ""
    archive = (f"its {len(held)} archived object(s) ({formats}) carry no schema{unread}" if held
               else "the archive holds no object of it")
    registry = f", and subject {subject!r} has no version in the Schema Registry" if subject else ""
    return f"no schema version of {topic} to compare with: {archive}{registry}"
