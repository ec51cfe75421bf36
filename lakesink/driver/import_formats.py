"""How other S3 archivers named and wrote their objects, for ``lakesink manifest import --from OLD_CONFIG``.

:func:`foreign_naming` reads the old connector's config (as ``lakesink check --translate`` recognises it) and
returns a :class:`ForeignNaming`: the listing prefix, a parser of its object keys and the read-only format its
objects are read with (:mod:`lakesink.objects.formats.foreign`, or Block-GZIP). The layouts, from each
connector's documentation:

* **Aiven** (``[<aws.s3.prefix>]<file.name.template>[.gz|.zst]``, template default
  ``{{topic}}-{{partition}}-{{start_offset}}``; variables ``topic``, ``partition``, ``start_offset`` (with
  ``:padding=true``), ``timestamp:unit=..``, and in the prefix ``utc_date``/``local_date``). ``jsonl`` objects
  with any ``format.output.fields``; ``csv`` objects with the value alone (base64, or raw with
  ``format.output.fields.value.encoding=none``). A template with ``{{key}}`` (one file per key, no offset range),
  csv with several fields (the value's column is not recorded in the object), ``json``/``parquet``/``avro`` output
  and snappy files (snappy-java's stream) cannot be adopted: refused in one line.
* **DeviantArt/Spredfast** (``<s3.prefix>/[<date>/]<topic>-<partition, 5 digits>-<offset, 12 digits>.gz`` with its
  ``.index.json``): Block-GZIP, read as lakesink's ``blockgzip`` (the same chunk index). ``format=binary`` is
  refused.
* **Zooz** (``<root>/date=YYYY-mm-dd/hour=HH/<partition>_<offset of first message>.<extension>``, topic
  ``SOURCE_KAFKA_TOPIC``): newline-delimited values (``lines``), gzip when the name ends in ``.gz``.

A key such a naming builds is parsed back to (topic, partition, first offset); the offsets of the records are taken
as contiguous from there, except where Aiven's jsonl lines carry an ``offset`` field: those offsets are the records'
(:mod:`lakesink.driver.manifest_import` checks that they ascend from the name's), and their ``key``, ``headers`` and
``timestamp`` fields are read as well (:class:`lakesink.objects.formats.foreign.AivenJsonlFormat`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from lakesink.errors import InvalidArgumentError

__all__ = ["ForeignKeyName", "ForeignNaming", "foreign_naming", "aiven_key_pattern"]

_TOPIC = r"[A-Za-z0-9._-]+?"


@dataclass(frozen=True)
class ForeignKeyName:
    """One key parsed: ``view`` is ``value`` or ``index`` (a Block-GZIP index side file); ``refused``: why a value
    object of this naming cannot be adopted (None: it can)."""

    topic: str
    partition: int
    start_offset: int
    view: str
    compression: str
    refused: str | None = None


@dataclass(frozen=True)
class ForeignNaming:
    connector: str
    prefix: str                 # listed under this prefix
    pattern: "re.Pattern[str]"  # groups: topic (optional), partition, offset, ext
    format_name: str            # lakesink's (read-only) format of the value objects
    topic: str | None = None    # the one topic of a naming without one in the key (Zooz)

    def parse(self, key: str, topics: Sequence[str]) -> ForeignKeyName | None:
        """``key`` parsed, or None when this naming does not build it (or it names a topic not in ``topics``)."""
        m = self.pattern.fullmatch(key)
        if m is None:
            return None
        d = m.groupdict()
        topic = d.get("topic") or self.topic
        if topic not in topics:
            return None
        ext = d.get("ext") or ""
        view = "index" if ext.endswith(".index.json") else "value"
        compression, refused = "none", None
        if self.format_name == "blockgzip":
            compression = "gzip"
        elif ext.endswith(".gz"):
            compression = "gzip"
        elif ext.endswith(".zst"):
            compression = "zstd"
        elif ext.endswith(".snappy"):
            refused = "snappy files are snappy-java's stream format, which lakesink does not read"
        return ForeignKeyName(topic, int(d["partition"]), int(d["offset"]), view, compression, refused)


def _norm(raw: Mapping[str, object], *keys: str, default: str = "") -> str:
    for k in keys:
        if k in raw and str(raw[k]).strip():
            return str(raw[k]).strip()
    return default


def aiven_key_pattern(prefix: str, template: str) -> tuple[str, "re.Pattern[str]"]:
    """(static listing prefix, regex of the whole key) for Aiven's ``prefix + template`` with a compression
    suffix; InvalidArgumentError when the template cannot name an offset range."""
    full = prefix + template
    out, seen, pos = [], set(), 0
    for m in re.finditer(r"\{\{\s*(\w+)\s*(?::\s*([^}]*?))?\s*\}\}", full):
        out.append(re.escape(full[pos:m.start()]))
        var = m.group(1).lower()
        if var == "topic":
            out.append("(?P=topic)" if "topic" in seen else f"(?P<topic>{_TOPIC})")
        elif var == "partition":
            out.append("(?P=partition)" if "partition" in seen else r"(?P<partition>\d+)")
        elif var == "start_offset":
            out.append("(?P=offset)" if "offset" in seen else r"(?P<offset>\d+)")
            var = "offset"
        elif var == "timestamp":
            out.append(r"\d+")
        elif var in ("utc_date", "local_date"):
            out.append(r"\d{4}-\d{2}-\d{2}")
        elif var == "key":
            raise InvalidArgumentError(f"Aiven objects named by {template!r} cannot be adopted: a {{{{key}}}} template "
                                       f"keeps one file per record key, not an offset range")
        else:
            raise InvalidArgumentError(f"Aiven's file name template {full!r}: unknown variable {{{{{m.group(1)}}}}}")
        seen.add(var)
        pos = m.end()
    out.append(re.escape(full[pos:]))
    missing = [v for v in ("topic", "partition", "offset") if v not in seen]
    if missing:
        raise InvalidArgumentError(f"Aiven objects named by {full!r} cannot be adopted: the name has no "
                                   f"{', '.join('start_offset' if v == 'offset' else v for v in missing)}")
    static = full.split("{{", 1)[0]
    return static, re.compile("".join(out) + r"(?P<ext>\.gz|\.zst|\.snappy)?")


def _aiven(raw: Mapping[str, object]) -> ForeignNaming:
    kind = _norm(raw, "format.output.type", default="csv").lower()
    fields = [f.strip().lower() for f in _norm(raw, "format.output.fields", "output_fields",
                                                default="value").split(",") if f.strip()]
    encoding = _norm(raw, "format.output.fields.value.encoding", default="base64").lower()
    if kind == "jsonl":
        fmt = "aiven_jsonl"
    elif kind == "csv" and fields == ["value"]:
        fmt = "aiven_csv" if encoding == "base64" else "lines"
    elif kind == "csv":
        raise InvalidArgumentError(f"Aiven csv objects with format.output.fields={','.join(fields)} cannot be "
                                   f"adopted: lakesink reads Aiven csv objects holding the value alone "
                                   f"(format.output.fields=value; a manifest row records no column order), and "
                                   f"jsonl objects with any fields")
    else:
        raise InvalidArgumentError(f"Aiven objects with format.output.type={kind} cannot be adopted (jsonl and csv "
                                   f"can)")
    if "value" not in fields:
        raise InvalidArgumentError(f"Aiven objects with format.output.fields={','.join(fields)} cannot be adopted: "
                                   f"they hold no value")
    prefix = _norm(raw, "aws.s3.prefix", "aws_s3_prefix", "file.name.prefix")
    template = _norm(raw, "file.name.template", default="{{topic}}-{{partition}}-{{start_offset}}")
    static, pattern = aiven_key_pattern(prefix, template)
    return ForeignNaming("Aiven's S3 sink", static, pattern, fmt)


def _deviantart(raw: Mapping[str, object]) -> ForeignNaming:
    if _norm(raw, "format", default="text").lower() != "text":
        raise InvalidArgumentError(f"DeviantArt/Spredfast objects with format={_norm(raw, 'format')} cannot be "
                                   f"adopted (format=text, Block-GZIP, can)")
    prefix = _norm(raw, "s3.prefix").strip("/")
    lead = re.escape(prefix + "/") if prefix else ""
    pattern = re.compile(lead + rf"(?:[^/]+/)*(?P<topic>{_TOPIC})-(?P<partition>\d{{5}})-(?P<offset>\d{{12}})"
                                r"(?P<ext>\.gz|\.index\.json)")
    return ForeignNaming("the DeviantArt/Spredfast block-gzip sink", prefix + "/" if prefix else "", pattern,
                         "blockgzip")


def _zooz(raw: Mapping[str, object], prefix: str | None) -> ForeignNaming:
    topic = _norm(raw, "SOURCE_KAFKA_TOPIC")
    if not topic or "," in topic:
        raise InvalidArgumentError("Zooz objects name no topic: SOURCE_KAFKA_TOPIC must name the one topic they hold")
    root = (prefix or "").strip("/")
    lead = re.escape(root + "/") if root else ""
    pattern = re.compile(lead + r"(?:[^/]+/)*date=\d{4}-\d{2}-\d{2}/hour=\d{2}/(?P<partition>\d+)_(?P<offset>\d+)"
                                r"(?P<ext>(?:\.[A-Za-z0-9]+)*)")
    return ForeignNaming("the Zooz kafka-s3-connector", root + "/" if root else "", pattern, "lines", topic=topic)


def foreign_naming(raw: Mapping[str, object], prefix: str | None = None) -> ForeignNaming:
    """The naming of the objects the connector whose config is ``raw`` wrote; InvalidArgumentError (one line)
    when it is not another connector's config or its objects cannot be adopted."""
    from lakesink.config.translate import CONNECTORS, recognise

    conn = recognise(raw)
    if conn is CONNECTORS["aiven"]:
        return _aiven(raw)
    if conn is CONNECTORS["deviantart"]:
        return _deviantart(raw)
    if conn is CONNECTORS["zooz"]:
        return _zooz(raw, prefix)
    raise InvalidArgumentError(f"--from: not recognised as a config of another connector "
                               f"({', '.join(c.name for c in CONNECTORS.values())})")
