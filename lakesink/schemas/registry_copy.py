"""Restore into another Schema Registry: copy the schemas an archive's records use, then rewrite their ids.

Confluent wire format is magic byte 0, a 4-byte big-endian schema id of the registry that serialized the
record, then the datum. In another registry that id means nothing (or another schema), so a restore with a
target registry

1. collects the **source ids** its records carry, per role (``value``/``key``):
   :func:`manifest_ids` (the manifest's ``schema_id``/``schema_subject`` per object: values only, one id per
   object as the sink recorded it), :func:`subject_ids` (every version registered under subjects, e.g. the
   source topic's ``<topic>-value``/``<topic>-key``) and :func:`scan_ids` (the 5-byte headers of a column of
   records, no decode: what a pre-pass over the archive would use);
2. **copies** each source schema (Avro, Protobuf, JSON Schema; references first, depth first) from the
   source registry into the target under the destination subject of a stated strategy
   (:data:`TARGET_STRATEGIES`: ``topic`` -- TopicNameStrategy on the destination topic,
   ``<dest-topic>-value``/``<dest-topic>-key``, the default; ``source`` -- the subjects the source registry
   lists for the id, those of the source topic when it has any). Referenced schemas keep their subject name.
   Ids are copied in ascending order, the order they were registered in the source, so the target's
   compatibility checks see the versions in their original order. :func:`copy_schemas` returns an
   immutable :class:`IdMap` (``{source id: target id}`` per role), plain tuples: it pickles into tasks;
3. **rewrites** each record (:func:`rewrite`, :meth:`IdMap.rewrite`): the 4 id bytes are replaced, the
   datum bytes are kept as they are (slicing, no decode). A null (tombstone / keyless) passes unchanged; a
   record that is not wire format, or whose id is not in the map, is a :class:`~lakesink.errors.DecodeError`
   naming ``topic-partition@offset`` -- never produced with the source id.

Which ids to copy (the choice): the driver copies, before any task starts, the ids of the manifest rows of
the selection plus every version of the source topic's subjects (and of the subjects the manifest names) --
no read of the archive. Records inside one object may carry other ids than its row's (a ByteArray archive of
a topic written under RecordNameStrategy, keys): each task checks every record's header as it rewrites it, so
such a record fails the restore with one line naming it and the id, before it is produced. A complete map at
the cost of reading the selection once more is :func:`scan_ids` over a pre-pass.

Failures while copying (nothing has been produced): the target refusing a schema (HTTP 409 incompatible,
422 invalid) is :class:`~lakesink.errors.SchemaCopyError` naming the subject, the source id and the
registry's message; 401/403 is :class:`~lakesink.errors.RegistryAuthError`; an unreachable registry or other
answers :class:`~lakesink.errors.RegistryError` (URLs without credentials, never a secret).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from lakesink.errors import DecodeError, InvalidArgumentError, RegistryAuthError, RegistryError, SchemaCopyError
from lakesink.schemas.registry import RegisteredSchema, RegistryClient, redact_url

__all__ = ["ROLES", "TARGET_STRATEGIES", "IdMap", "SchemaCopy", "wire_id", "scan_ids", "manifest_ids",
           "subject_ids", "target_subject", "copy_schemas", "rewrite"]

ROLES: tuple[str, ...] = ("value", "key")
#: how the destination subject of a copied schema is named (see the module docstring)
TARGET_STRATEGIES: tuple[str, ...] = ("topic", "source")


# ---------------------------------------------------------------------------------------------- ids

def wire_id(raw: Any) -> int | None:
    """The schema id of a Confluent wire-format payload, None when ``raw`` is null or not wire format."""
    if raw is None or len(raw) < 5 or raw[0] != 0:
        return None
    return int.from_bytes(raw[1:5], "big")


def scan_ids(raws: Any) -> frozenset[int]:
    """The schema ids in the 5-byte headers of ``raws`` (an iterable of bytes/None, or an Arrow binary array),
    one vectorised pass, nothing decoded. Nulls and values that are not wire format are skipped (the rewrite
    names them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = raws if isinstance(raws, pa.Array) else pa.array(list(raws), pa.binary())
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not len(values):
        return frozenset()
    if values.type != pa.binary():
        values = values.cast(pa.binary())
    framed = pc.and_(pc.greater_equal(pc.binary_length(values), 5),
                     pc.equal(pc.binary_slice(values, 0, 1), pa.scalar(b"\x00", pa.binary())))
    heads = pc.unique(pc.binary_slice(pc.filter(values, pc.fill_null(framed, False)), 1, 5))
    return frozenset(int.from_bytes(h, "big") for h in heads.to_pylist())


def manifest_ids(rows: Iterable[Any]) -> tuple[frozenset[int], dict[int, frozenset[str]]]:
    """The value schema ids the manifest rows (dicts, Rows or objects with ``schema_id``/``schema_subject``)
    record, and for each the subjects the rows name with it."""
    ids: set[int] = set()
    subjects: dict[int, set[str]] = {}
    for row in rows:
        get = row.get if isinstance(row, Mapping) else (lambda k, r=row: getattr(r, k, None))
        sid = get("schema_id")
        if sid is None:
            continue
        ids.add(int(sid))
        subject = get("schema_subject")
        if subject:
            subjects.setdefault(int(sid), set()).add(str(subject))
    return frozenset(ids), {k: frozenset(v) for k, v in subjects.items()}


def subject_ids(source: RegistryClient, subjects: Iterable[str]) -> frozenset[int]:
    """Every id registered under ``subjects`` in ``source`` (an unknown subject adds none)."""
    out: set[int] = set()
    for subject in dict.fromkeys(subjects):
        out.update(reg.id for _, reg in source.subject_schemas(subject))
    return frozenset(out)


# ---------------------------------------------------------------------------------------------- id map

@dataclass(frozen=True)
class SchemaCopy:
    """One schema copied: ``role``'s source id, its target id, the subject it was registered under."""

    role: str
    source_id: int
    target_id: int
    subject: str
    schema_type: str = "AVRO"


@dataclass(frozen=True)
class IdMap:
    """``{source id: target id}`` per role as sorted pairs (immutable, picklable). A role whose pairs are None
    is not rewritten (its bytes are not wire format); an empty tuple means every non-null record of it fails."""

    values: tuple[tuple[int, int], ...] | None = None
    keys: tuple[tuple[int, int], ...] | None = None
    target: str = "the target Schema Registry"     # credential-free URL, for messages
    copies: tuple[SchemaCopy, ...] = field(default=(), compare=False)

    @classmethod
    def of(cls, values: Mapping[int, int] | None = None, keys: Mapping[int, int] | None = None,
           target: str = "the target Schema Registry", copies: Iterable[SchemaCopy] = ()) -> "IdMap":
        pairs = (lambda m: None if m is None else tuple(sorted((int(a), int(b)) for a, b in m.items())))
        return cls(pairs(values), pairs(keys), redact_url(target), tuple(copies))

    def mapping(self, role: str) -> dict[int, int] | None:
        """The role's map as a dict (None: the role is not rewritten)."""
        pairs = self._pairs(role)
        return None if pairs is None else dict(pairs)

    def _pairs(self, role: str) -> tuple[tuple[int, int], ...] | None:
        if role not in ROLES:
            raise InvalidArgumentError(f"schema id map: role {role!r} not in {list(ROLES)}")
        return self.values if role == "value" else self.keys

    def rewriter(self, role: str):
        """``f(raw, topic, partition, offset) -> bytes`` rewriting ``role``'s bytes (identity when the role is
        not rewritten). The 5-byte prefixes are built once."""
        pairs = self._pairs(role)
        if pairs is None:
            return lambda raw, topic, partition, offset: raw
        prefixes = prefix_table(dict(pairs))
        target = self.target

        def rewrite_one(raw: Any, topic: str, partition: int, offset: int) -> Any:
            if raw is None:
                return None
            prefix = prefixes.get(bytes(raw[:5])) if len(raw) >= 5 else None
            if prefix is None:
                raise unmapped(raw, prefixes, role, target, topic, partition, offset)
            return prefix + raw[5:]

        return rewrite_one

    def rewrite(self, role: str, raw: Any, topic: str, partition: int, offset: int) -> Any:
        """One record's ``role`` bytes rewritten (see :meth:`rewriter` for many)."""
        return self.rewriter(role)(raw, topic, partition, offset)

    def describe(self) -> list[str]:
        """One line per copied schema: ``value id 3 -> 12 under orders-value (AVRO)``."""
        return [f"{c.role} id {c.source_id} -> {c.target_id} under {c.subject} ({c.schema_type})"
                for c in self.copies]


def prefix_table(id_map: Mapping[int, int]) -> dict[bytes, bytes]:
    """``{source 5-byte wire prefix: target 5-byte wire prefix}``."""
    return {b"\x00" + int(s).to_bytes(4, "big"): b"\x00" + int(t).to_bytes(4, "big") for s, t in id_map.items()}


def unmapped(raw: Any, prefixes: Mapping[bytes, bytes], role: str, target: str, topic: str, partition: int,
             offset: int) -> DecodeError:
    """The DecodeError of a record ``rewrite`` cannot map (not wire format, or an id without a copy)."""
    sid = wire_id(raw)
    if sid is None:
        why = ("empty" if not len(raw) else f"bad magic byte {raw[0]}" if raw[0] != 0 else "shorter than 5 bytes")
        return DecodeError(topic, partition, offset, f"{role} is not Confluent wire format ({why}): its schema id "
                                                     f"cannot be rewritten for {target}")
    known = sorted(int.from_bytes(p[1:5], "big") for p in prefixes)
    shown = ", ".join(map(str, known[:10])) + (", ..." if len(known) > 10 else "")
    return DecodeError(topic, partition, offset, f"{role} schema id {sid} was not copied to {target} (copied: "
                                                 f"{shown or 'none'}); not produced with the source id")


def rewrite(datum: Any, id_map: Mapping[int, int], topic: str = "?", partition: int = -1, offset: int = -1,
            role: str = "value") -> Any:
    """``datum`` with its schema id replaced through ``id_map`` (the datum bytes after the 5-byte prefix are
    the same bytes); None stays None. DecodeError naming ``topic-partition@offset`` when ``datum`` is not
    wire format or its id is not in ``id_map``. For many records build :meth:`IdMap.rewriter` once."""
    if datum is None:
        return None
    prefixes = prefix_table(id_map)
    prefix = prefixes.get(bytes(datum[:5])) if len(datum) >= 5 else None
    if prefix is None:
        raise unmapped(datum, prefixes, role, "the target Schema Registry", topic, partition, offset)
    return prefix + datum[5:]


# ---------------------------------------------------------------------------------------------- copy

def target_subject(strategy: str, role: str, topic: str, source_subjects: Sequence[str] = (),
                   source_topic: str | None = None) -> list[str]:
    """The target subjects a schema of ``role`` is registered under: ``[<topic>-<role>]`` for ``topic``; for
    ``source`` the source subjects of the id, only those of ``source_topic`` (``<source_topic>-...``) when it
    has any."""
    if strategy == "topic":
        return [f"{topic}-{role}"]
    if strategy != "source":
        raise InvalidArgumentError(f"target registry subject strategy {strategy!r} not in {list(TARGET_STRATEGIES)}")
    own = [s for s in source_subjects if source_topic and s.startswith(f"{source_topic}-")]
    return sorted(own or source_subjects)


class _Copier:
    """One copy run: source schemas fetched once, references registered once per (subject, version)."""

    def __init__(self, source: RegistryClient, target: RegistryClient):
        self.source, self.target = source, target
        self.refs_done: dict[tuple[str, int], int] = {}          # source (subject, version) -> target version
        self.versions: dict[str, dict[int, RegisteredSchema]] = {}

    def source_version(self, subject: str, version: int, for_id: int) -> RegisteredSchema:
        if subject not in self.versions:
            self.versions[subject] = dict(self.source.subject_schemas(subject))
        found = self.versions[subject].get(int(version))
        if found is None:
            raise RegistryError(f"schema id {for_id} references {subject!r} version {version}, which the source "
                                f"Schema Registry at {self.source.shown_url} does not have")
        return found

    def references(self, reg: RegisteredSchema, for_id: int, depth: int = 0) -> list[Any]:
        """The target's SchemaReferences for ``reg``'s references, registering each referenced schema first."""
        from confluent_kafka.schema_registry import SchemaReference

        if depth > 32:
            raise RegistryError(f"schema id {for_id}: references nested more than 32 deep (a cycle?)")
        out = []
        for name, subject, version in reg.references:
            key = (subject, int(version))
            if key not in self.refs_done:
                ref = self.source_version(subject, int(version), for_id)
                schema = self.schema(ref, for_id, depth + 1)
                self.register(subject, schema, for_id)
                self.refs_done[key] = self.lookup_version(subject, schema, for_id)
            out.append(SchemaReference(name, subject, self.refs_done[key]))
        return out

    def schema(self, reg: RegisteredSchema, for_id: int, depth: int = 0) -> Any:
        from confluent_kafka.schema_registry import Schema

        return Schema(reg.text, reg.schema_type, self.references(reg, for_id, depth))

    def register(self, subject: str, schema: Any, source_id: int) -> int:
        what = f"registering source schema id {source_id} under subject {subject!r}"
        return int(self.call(lambda: self.target.client.register_schema(subject, schema), what, subject, source_id))

    def lookup_version(self, subject: str, schema: Any, source_id: int) -> int:
        what = f"looking up the version of source schema id {source_id} under subject {subject!r}"
        found = self.call(lambda: self.target.client.lookup_schema(subject, schema), what, subject, source_id)
        return int(found.version)

    def call(self, fn, what: str, subject: str, source_id: int) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        url = self.target.shown_url
        try:
            return fn()
        except SchemaRegistryError as e:
            status, code = e.http_status_code, e.error_code
            msg = " ".join(str(getattr(e, "error_message", "") or e).split())[:300]
            if status in (401, 403):
                raise RegistryAuthError(f"target Schema Registry at {url} refused the credentials (HTTP {status}) "
                                        f"{what}: check the target registry's basic auth user info") from None
            if status in (409, 422):
                why = "incompatible with the subject's versions" if status == 409 else "invalid schema"
                raise SchemaCopyError(f"target Schema Registry at {url} refused source schema id {source_id} under "
                                      f"subject {subject!r} ({why}, HTTP {status}, error {code}): "
                                      f"{redact_url(msg)}; nothing was restored") from None
            raise RegistryError(f"target Schema Registry at {url} answered HTTP {status} (error {code}) {what}: "
                                f"{redact_url(msg)}") from None
        except Exception as e:  # connection refused, DNS, timeouts, TLS: after the client's retries
            text = redact_url(" ".join(str(e).split()))[:300]
            raise RegistryError(f"target Schema Registry at {url} unreachable {what}: {type(e).__name__}: "
                                f"{text}") from None


def copy_schemas(source: RegistryClient, target: RegistryClient, ids: Mapping[str, Iterable[int] | None], *,
                 topic: str, strategy: str = "topic", source_topic: str | None = None,
                 subjects: Mapping[int, Iterable[str]] | None = None) -> IdMap:
    """Copy the schemas of ``ids`` (``{"value": ids, "key": ids}``; a role missing or None is not rewritten)
    from ``source`` into ``target`` under the destination ``topic``'s subjects by ``strategy``
    (:data:`TARGET_STRATEGIES`), ascending id order; the :class:`IdMap`. ``subjects``: subject hints per
    source id for ``strategy="source"`` when the source registry cannot list an id's subjects. Raises
    SchemaCopyError (the target refused a schema), SchemaNotFoundError (an id the source does not know),
    RegistryAuthError, RegistryError."""
    if strategy not in TARGET_STRATEGIES:
        raise InvalidArgumentError(f"target registry subject strategy {strategy!r} not in {list(TARGET_STRATEGIES)}")
    unknown = set(ids) - set(ROLES)
    if unknown:
        raise InvalidArgumentError(f"schema ids for roles {sorted(unknown)}: roles are {list(ROLES)}")
    copier = _Copier(source, target)
    maps: dict[str, dict[int, int] | None] = {}
    copies: list[SchemaCopy] = []
    for role in ROLES:
        role_ids = ids.get(role)
        if role_ids is None:
            maps[role] = None
            continue
        maps[role] = {}
        for sid in sorted({int(i) for i in role_ids}):
            reg = source.schema(sid)
            listed = [s for s, _ in (source.versions(sid) or ())] if strategy == "source" else []
            hints = sorted(set(listed) | set((subjects or {}).get(sid, ())))
            targets = target_subject(strategy, role, topic, hints, source_topic)
            if not targets:
                raise SchemaCopyError(f"source schema id {sid} ({role}) is registered under no subject in "
                                      f"{source.shown_url}: subject strategy 'source' has no subject to keep; "
                                      f"use 'topic'")
            schema = copier.schema(reg, sid)
            got = {subject: copier.register(subject, schema, sid) for subject in targets}
            if len(set(got.values())) != 1:
                raise SchemaCopyError(f"{target.shown_url} gave source schema id {sid} different ids under "
                                      f"{sorted(got)}: {sorted(set(got.values()))}")
            maps[role][sid] = next(iter(got.values()))
            copies += [SchemaCopy(role, sid, tid, subject, reg.schema_type) for subject, tid in got.items()]
    return IdMap.of(maps["value"], maps["key"], target.shown_url, copies)
