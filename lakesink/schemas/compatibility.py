"""Schema compatibility decisions and projection (spec §4, Confluent ``StorageSchemaCompatibility``).

Only the value schema counts. For the current schema of an open file and an incoming record:

* both None, or equal (fingerprint and version) → keep writing, no projection;
* exactly one None → :class:`SchemaSwitchError` ("Switch between schema-based and schema-less data is
  not supported"); the rotator avoids this by rotating first (spec §3 step 2);
* mode ≠ NONE and a version is None → :class:`SchemaVersionError`;
* NONE: rotate iff the schemas differ; never project (interleaved v1/v2 ⇒ a file per switch);
* BACKWARD / FULL (FULL ≡ BACKWARD, as in Confluent): structurally incompatible → rotate;
  ``record.version > current.version`` → rotate (the newer schema becomes current);
  else project the record to the current schema;
* FORWARD: structurally incompatible → rotate; ``record.version < current.version`` → rotate;
  else project.

"Structurally compatible" = the current schema can read data written with the record's schema
(Apache ``avro`` ``ReaderWriterCompatibilityChecker``, reader = current, writer = record). That is
the question projection needs answered; it covers Confluent's type/name/params/required-field rules.

Projection (:func:`project_value`) is Avro schema resolution done by fastavro: encode with the
writer schema, decode with the reader schema (defaults fill missing fields, extra fields dropped,
numeric promotion). It costs an encode+decode per projected record — acceptable because it only
happens for records of an older/newer version than their file; when both sides are Confluent
wire-format Avro a caller can instead decode the raw bytes directly with the reader schema.
"""
from __future__ import annotations

import dataclasses
import io
import json
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any


from lakesink.objects.records import SinkRecord, ValueSchema
from lakesink.errors import SchemaSwitchError, SchemaVersionError

__all__ = [
    "Mode",
    "Decision",
    "SchemaSwitchError",
    "SchemaVersionError",
    "SchemaCompatibility",
    "same_schema",
    "structurally_compatible",
    "project_value",
    "CHECK_MODES",
    "Finding",
    "Incompatibility",
    "PriorSchema",
    "explain",
    "word",
    "check_modes",
    "check_candidate",
]


class Mode(str, Enum):
    NONE = "NONE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"


class Decision(Enum):
    SAME = "same"          # write as is
    PROJECT = "project"    # write after projecting to the current schema
    ROTATE = "rotate"      # close the files; the record's schema becomes current


def same_schema(a: ValueSchema | None, b: ValueSchema | None) -> bool:
    """Equal identity: fingerprint and version (None only equals None)."""
    if a is None or b is None:
        return a is b
    return a.fingerprint == b.fingerprint and a.version == b.version


@lru_cache(maxsize=512)
def _parsed_avro(text: str) -> Any:
    import avro.schema

    return avro.schema.parse(text)


@lru_cache(maxsize=512)
def _parsed_fast(text: str) -> Any:
    import fastavro

    return fastavro.parse_schema(json.loads(text))


def _text(schema: ValueSchema) -> str:
    a = schema.avro
    return a if isinstance(a, str) and a.lstrip()[:1] in ("{", "[", '"') else json.dumps(a, sort_keys=True)


@lru_cache(maxsize=1024)
def _compatible_texts(reader: str, writer: str) -> bool:
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    result = ReaderWriterCompatibilityChecker().get_compatibility(
        reader=_parsed_avro(reader), writer=_parsed_avro(writer)
    )
    return result.compatibility is SchemaCompatibilityType.compatible


def structurally_compatible(reader: ValueSchema, writer: ValueSchema) -> bool:
    """True when data written with ``writer`` can be read (projected) with ``reader``."""
    if reader.fingerprint == writer.fingerprint:
        return True
    try:
        return _compatible_texts(_text(reader), _text(writer))
    except Exception:  # an unparsable schema cannot be projected: treat as incompatible → rotate
        return False


def project_value(value: Any, from_schema: ValueSchema, to_schema: ValueSchema) -> Any:
    """Avro schema resolution of ``value`` (written with ``from_schema``) into ``to_schema``."""
    if from_schema.fingerprint == to_schema.fingerprint:
        return value
    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _parsed_fast(_text(from_schema)), value)
    buf.seek(0)
    return fastavro.schemaless_reader(buf, _parsed_fast(_text(from_schema)), _parsed_fast(_text(to_schema)))


class SchemaCompatibility:
    """Decides, per record, whether the open files must rotate or the record be projected."""

    def __init__(self, mode: Mode | str = Mode.NONE):
        self.mode = Mode(mode) if not isinstance(mode, Mode) else mode

    def decide(self, record: SinkRecord, current: ValueSchema | None) -> Decision:
        """SAME, PROJECT or ROTATE for ``record`` against the file's ``current`` schema."""
        incoming = record.value_schema
        if same_schema(incoming, current):
            return Decision.SAME
        if incoming is None or current is None:
            raise SchemaSwitchError(record.topic, record.partition, record.offset,
                                    "Switch between schema-based and schema-less data is not supported")
        if self.mode is not Mode.NONE and (incoming.version is None or current.version is None):
            raise SchemaVersionError(record.topic, record.partition, record.offset,
                                     f"Schema version required for {self.mode.value} compatibility")
        if self.mode is Mode.NONE:
            return Decision.ROTATE
        if not structurally_compatible(current, incoming):
            return Decision.ROTATE
        assert incoming.version is not None and current.version is not None
        if self.mode is Mode.FORWARD:
            return Decision.ROTATE if incoming.version < current.version else Decision.PROJECT
        return Decision.ROTATE if incoming.version > current.version else Decision.PROJECT

    def should_change(self, record: SinkRecord, current: ValueSchema | None) -> bool:
        """Confluent ``shouldChangeSchema``."""
        return self.decide(record, current) is Decision.ROTATE

    def project(self, record: SinkRecord, current: ValueSchema | None) -> SinkRecord:
        """The record with its value projected to ``current`` (unchanged when not needed)."""
        incoming = record.value_schema
        if current is None or incoming is None or same_schema(incoming, current):
            return record
        if self.mode is Mode.NONE:
            return record
        try:
            value = project_value(record.value, incoming, current)
        except Exception as e:
            raise SchemaSwitchError(record.topic, record.partition, record.offset,
                                    f"cannot project value to schema {current.name or current.fingerprint} "
                                    f"v{current.version}: {e}") from None
        return dataclasses.replace(record, value=value, value_schema=current)


# ---------------------------------------------------------------------------------------------------------------
# Checking a candidate schema against earlier versions (``lakesink schema check``), in plain words.
#
# The verdict is always the Apache ``avro`` checker's (the same one ``structurally_compatible`` asks); the walk
# below only locates and words what it found, because the checker's own result merges its messages and
# locations into unordered sets (index paths such as ``/fields/1/type``) that cannot be paired up.

#: Modes of a schema check: Confluent's, transitive variants included.
CHECK_MODES: tuple[str, ...] = ("NONE", "BACKWARD", "FORWARD", "FULL", "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE",
                                "FULL_TRANSITIVE")


@dataclass(frozen=True)
class Finding:
    """One reason a reader schema cannot read a writer schema's data (``reader_type``/``writer_type`` described)."""

    path: str           # dotted field path ('' = the whole schema); '[]' = array items, '{}' = map values
    kind: str           # type_changed | field_missing_default | enum_symbols | name_changed | fixed_size | other
    reader_type: str
    writer_type: str
    detail: str = ""    # the enum symbols, the checker's message, ...


@dataclass(frozen=True)
class Incompatibility:
    """A finding worded for one rule: the candidate against one earlier version (``against``)."""

    rule: str           # BACKWARD | FORWARD (what failed; FULL and the transitive modes check both/all)
    against: str        # the earlier version as named to people: "version 3", "schema id 7", "schema 1a2b3c4d"
    path: str
    kind: str
    old_type: str
    new_type: str
    message: str


@dataclass(frozen=True)
class PriorSchema:
    """An earlier schema a candidate is checked against; ``label`` names it in messages (e.g. "version 3")."""

    label: str
    schema: Any


def _describe(s: Any) -> str:
    """A short type description: ``long``, ``long (timestamp-millis)``, ``record ex.User``, ``array<string>``,
    ``union[null, string]``."""
    t = s.type
    if t == "union":
        return "union[" + ", ".join(_describe(b) for b in s.schemas) + "]"
    if t == "array":
        return f"array<{_describe(s.items)}>"
    if t == "map":
        return f"map<{_describe(s.values)}>"
    if t in ("record", "error", "enum"):
        return f"{t} {s.fullname}"
    if t == "fixed":
        return f"fixed {s.fullname}({s.size})"
    logical = s.props.get("logicalType") if hasattr(s, "props") else None
    return f"{t} ({logical})" if logical else str(t)


def _same_kind(a: Any, b: Any) -> bool:
    """Two schemas the resolution rules pair up (same type; named types also by name or alias)."""
    from avro.compatibility import schema_name_equals

    if a.type != b.type:
        return False
    if a.type in ("record", "error", "enum", "fixed"):
        return schema_name_equals(a, b)
    return True


def _join(path: str, name: str) -> str:
    if name in ("[]", "{}"):
        return path + name
    return f"{path}.{name}" if path else name


class _Explainer:
    """Walks a reader/writer pair where the checker says they are incompatible and returns :class:`Finding` s."""

    def __init__(self) -> None:
        from avro.compatibility import ReaderWriterCompatibilityChecker

        self.checker = ReaderWriterCompatibilityChecker()

    def ok(self, reader: Any, writer: Any) -> bool:
        from avro.compatibility import SchemaCompatibilityType

        return self.checker.get_compatibility(reader, writer).compatibility is SchemaCompatibilityType.compatible

    def walk(self, reader: Any, writer: Any, path: str = "") -> list[Finding]:
        if self.ok(reader, writer):
            return []
        if reader.type == writer.type:
            return self.same_type(reader, writer, path)
        if writer.type == "union":
            out: list[Finding] = []
            others = [b for b in writer.schemas if not self.ok(reader, b)]
            twin = next((b for b in others if _same_kind(reader, b)), None)
            if twin is not None:
                out += self.walk(reader, twin, path)
            if any(b is not twin for b in others):
                out.append(Finding(path, "type_changed", _describe(reader), _describe(writer)))
            return out
        if reader.type == "union":
            twin = next((b for b in reader.schemas if _same_kind(b, writer)), None)
            if twin is not None:
                return self.walk(twin, writer, path)
        return [Finding(path, "type_changed", _describe(reader), _describe(writer))]

    def same_type(self, reader: Any, writer: Any, path: str) -> list[Finding]:
        from avro.compatibility import lookup_writer_field

        t, out = reader.type, []
        if t in ("record", "error", "enum", "fixed") and not _same_kind(reader, writer):
            out.append(Finding(path, "name_changed", reader.fullname, writer.fullname))
        if t in ("record", "error"):
            for field in reader.fields:
                wf = lookup_writer_field(writer_schema=writer, reader_field=field)
                fpath = _join(path, field.name)
                if wf is None:
                    if not field.has_default:
                        out.append(Finding(fpath, "field_missing_default", _describe(field.type), "absent"))
                else:
                    out += self.walk(field.type, wf.type, fpath)
        elif t == "enum":
            default = reader.props.get("default")
            missing = [s for s in writer.symbols if s not in reader.symbols]
            if missing and not (default and default in reader.symbols):
                out.append(Finding(path, "enum_symbols", _describe(reader), _describe(writer), ", ".join(missing)))
        elif t == "fixed" and reader.size != writer.size:
            out.append(Finding(path, "fixed_size", str(reader.size), str(writer.size)))
        elif t == "array":
            out += self.walk(reader.items, writer.items, _join(path, "[]"))
        elif t == "map":
            out += self.walk(reader.values, writer.values, _join(path, "{}"))
        elif t == "union":
            for branch in writer.schemas:
                if self.ok(reader, branch):
                    continue
                twin = next((b for b in reader.schemas if _same_kind(b, branch)), None)
                if twin is not None:
                    out += self.walk(twin, branch, path)
                else:
                    out.append(Finding(path, "type_changed", _describe(reader), _describe(writer),
                                       f"no branch for {_describe(branch)}"))
                    break  # one line per union: the types say the rest
        return out


def explain(reader: Any, writer: Any) -> list[Finding]:
    """Why data written with ``writer`` cannot be read with ``reader`` (empty when it can). Both are Avro schemas
    in JSON form; the verdict is the ``avro`` checker's, the findings locate it by field path."""
    r, w = _parsed_avro(_schema_text(reader)), _parsed_avro(_schema_text(writer))
    ex = _Explainer()
    if ex.ok(r, w):
        return []
    found = ex.walk(r, w)
    if not found:  # a rule the walk does not word: the checker's own message
        from avro.compatibility import ReaderWriterCompatibilityChecker

        res = ReaderWriterCompatibilityChecker().get_compatibility(r, w)
        found = [Finding("", "other", _describe(r), _describe(w), "; ".join(sorted(res.messages)))]
    return found


def _schema_text(schema: Any) -> str:
    return schema if isinstance(schema, str) else json.dumps(schema, sort_keys=True)


def _where(path: str) -> str:
    return f"field '{path}'" if path else "the schema"


def word(f: Finding, rule: str, against: str) -> Incompatibility:
    """``f`` (found with the candidate as reader for BACKWARD, as writer for FORWARD) in plain words."""
    backward = rule == "BACKWARD"
    old, new = (f.writer_type, f.reader_type) if backward else (f.reader_type, f.writer_type)
    why = (f"{rule}: a reader with the new schema cannot read data written with {against}" if backward else
           f"{rule}: a reader with {against} cannot read data written with the new schema")
    where = _where(f.path)
    if f.kind == "field_missing_default":
        # BACKWARD: the new schema reads a field old data lacks; FORWARD: old readers need a field the new one dropped
        if backward:
            text, old, new = f"{where} added without a default", "absent", f.reader_type
        else:
            text, old, new = f"{where} removed, and {against} gives it no default", f.reader_type, "absent"
    elif f.kind == "enum_symbols":
        text = f"{where}: enum symbols {'removed' if backward else 'added'}: {f.detail}"
    elif f.kind == "name_changed":
        text = f"{where}: name changed {old} → {new}"
    elif f.kind == "fixed_size":
        text = f"{where}: fixed size changed {old} → {new}"
    elif f.kind == "other":
        text = f"{where}: {f.detail}"
    else:
        text = f"{where}: type changed {old} → {new}" + (f" ({f.detail})" if f.detail else "")
    return Incompatibility(rule, against, f.path, f.kind, old, new, f"{text} ({why})")


def check_modes(mode: str) -> tuple[tuple[str, ...], bool]:
    """The rules a mode checks (BACKWARD and/or FORWARD) and whether against every earlier version."""
    m = mode.upper()
    if m not in CHECK_MODES:
        from lakesink.errors import InvalidArgumentError

        raise InvalidArgumentError(f"unknown compatibility mode {mode!r}; expected one of {', '.join(CHECK_MODES)}")
    base, transitive = m.removesuffix("_TRANSITIVE"), m.endswith("_TRANSITIVE")
    rules = {"NONE": (), "BACKWARD": ("BACKWARD",), "FORWARD": ("FORWARD",), "FULL": ("BACKWARD", "FORWARD")}[base]
    return rules, transitive


def check_candidate(candidate: Any, priors: list[PriorSchema], mode: str) -> list[Incompatibility]:
    """Every incompatibility of ``candidate`` with ``priors`` (oldest first) under ``mode``: non-transitive modes
    compare with the latest prior only, transitive ones with all; BACKWARD reads old data with the candidate,
    FORWARD reads the candidate's data with the old schema, FULL both."""
    rules, transitive = check_modes(mode)
    targets = priors if transitive else priors[-1:]
    out: list[Incompatibility] = []
    for prior in targets:
        for rule in rules:
            reader, writer = (candidate, prior.schema) if rule == "BACKWARD" else (prior.schema, candidate)
            out += [word(f, rule, prior.label) for f in explain(reader, writer)]
    return out
