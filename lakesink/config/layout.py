"""Where the job's tables and objects live: ``manifest.location`` / ``metrics.location`` parsed by the one
path-or-catalog rule (:mod:`lakesink.manifest.location`; relative paths made absolute here, once, at load), the
engine a manifest needs, and the refusal of a layout whose archive objects could lie inside a table's directory.

Why the refusal: a Delta table owns every file under its directory. ``topics.dir=_lakesink`` with topic
``manifest`` next to ``manifest.location=s3a://bkt/_lakesink/manifest`` writes the archive's objects into the
manifest's directory, where a full ``VACUUM`` of the table deletes them (they are in no Delta version); a table
inside a topic's directory is the same overlap the other way round (``lakesink vacuum`` sweeps the topic
directories for orphans). The archive's object keys are ``[<topics.dir><directory.delim>]<topic>
<directory.delim>…`` in ``s3.bucket.name`` (for a ``file://`` store.url: under ``<dir>/<bucket>/``); a path
table's files are under ``<location>/``. They overlap when one prefix starts with the other. A catalog table's
directory is the metastore's and is not checked.
"""
from __future__ import annotations

import os
import re
from typing import Any, Callable
from urllib.parse import urlparse

from lakesink.errors import BadValue
from lakesink.manifest.location import DISABLED, TableLocation, parse_location, prefixes_overlap

__all__ = ["check_locations", "manifest_engine", "archive_prefix", "topics_inside", "check_layout"]

_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def check_locations(vals: dict[str, Any], problem: Callable[[str, Any, str], None]
                    ) -> tuple[TableLocation | None, TableLocation | None]:
    """(manifest table, metrics table or None when turned off / unparsable). ``vals``' ``manifest_location`` and
    ``metrics_location`` become the resolved texts (relative local paths absolute, against the current
    directory)."""
    manifest = metrics = None
    given = vals.get("manifest_location")
    if given:
        try:
            manifest = parse_location(given)
            vals["manifest_location"] = manifest.text
        except BadValue as e:
            problem("manifest.location", given, str(e))
    mgiven = vals.get("metrics_location")
    if mgiven and mgiven.strip().lower() not in DISABLED:
        try:
            metrics = parse_location(mgiven)
            vals["metrics_location"] = metrics.text
        except BadValue as e:
            problem("metrics.location", mgiven, str(e))
    elif not mgiven and manifest is not None:
        metrics = manifest.with_suffix("_metrics")
    return manifest, metrics


def manifest_engine(engine: str, location: TableLocation | None, problem: Callable[[str, Any, str], None]) -> str:
    """``auto`` resolved: delta-rs for a path table, Spark for a catalog table (delta-rs cannot reach a
    metastore); ``delta-rs`` with a catalog table is a problem."""
    engine = engine.lower()
    if engine == "delta-rs" and location is not None and not location.is_path:
        problem("manifest.engine", engine, f"needs a path manifest.location (s3a://..., /...), not the catalog "
                f"table {location.text!r}; use manifest.engine=spark")
    if engine == "auto":
        return "spark" if location is not None and not location.is_path else "delta-rs"
    return engine


def archive_prefix(store_url: str | None, bucket: str) -> tuple[str, str]:
    """(namespace, prefix) every archive object key is appended to, comparable with
    :meth:`TableLocation.files_prefix`: ``("s3:<bucket>", "")`` on S3, ``("file", "<dir>/<bucket>/")`` for a
    ``file://`` store (the local store keeps objects at ``<dir>/<bucket>/<key>``)."""
    if store_url and store_url.startswith("file:"):
        root = os.path.normpath(os.path.join(urlparse(store_url).path or "/", bucket))
        return "file", root.rstrip("/") + "/"
    return f"s3:{bucket}", ""


def topics_inside(table_prefix: str, base: str, topics_dir: str, delim: str) -> list[str] | None:
    """The topic names whose object keys (``base + [topics_dir + delim] + topic + delim + …``) could lie under
    ``table_prefix`` (which ends with ``/`` or is empty), or the table under a topic's directory; None when every
    topic's would (``topics.dir`` itself is inside the table). Topic names hold no ``/``, so the candidates are
    the finitely many leading parts of the table's prefix."""
    pre = base + (topics_dir + delim if topics_dir.strip() else "")
    if pre.startswith(table_prefix):
        return None
    if not table_prefix.startswith(pre):
        return []
    rest = table_prefix[len(pre):]
    return [rest[:i] for i in range(1, len(rest)) if prefixes_overlap(rest[i:], delim)
            and _TOPIC.fullmatch(rest[:i]) and rest[:i] not in (".", "..")]


def _matches(regex: str, topic: str) -> bool:
    try:
        return re.fullmatch(regex, topic) is not None
    except re.error:
        return False


def check_layout(vals: dict[str, Any], topics: tuple[str, ...], regex: str | None, delim: str,
                 manifest: TableLocation | None, metrics: TableLocation | None,
                 problem: Callable[[str, Any, str], None]) -> None:
    """Refuse archive objects inside the manifest or metrics table's directory (or a table inside a topic's),
    and a metrics table inside the manifest's (or the other way round)."""
    bucket, tdir = vals.get("s3_bucket_name"), vals.get("topics_dir") or ""
    if not bucket or not delim:
        return
    namespace, base = archive_prefix(vals.get("store_url"), bucket)
    found: list[str] = []  # one problem line for topics.dir, however many tables and topics overlap
    for what, key, table in (("manifest", "manifest.location", manifest), ("metrics", "metrics.location", metrics)):
        files = table.files_prefix() if table is not None else None
        if files is None or files[0] != namespace:
            continue
        inside = topics_inside(files[1], base, tdir, delim)
        if inside is None:
            found.append(f"puts every topic's archive objects inside the {what} table {table.text} (a Delta "
                         f"VACUUM of the table would delete them): use a topics.dir outside it, or move {key}")
            continue
        hits = [t for t in inside if t in topics or (regex and _matches(regex, t))]
        if hits and not found:
            which = f"topic {hits[0]!r}" if not regex else f"topic {hits[0]!r} (matched by topics.regex {regex!r})"
            found.append(f"with {which}: the archive objects and the {what} table {table.text} share a directory "
                         f"(a Delta VACUUM of the table would delete the objects): use another topics.dir, or "
                         f"move {key}")
        elif hits:
            found.append(f"also topic {hits[0]!r} and the {what} table {table.text}")
    if found:
        problem("topics.dir", tdir, "; ".join(found))
    if manifest is not None and metrics is not None:
        a, b = manifest.files_prefix(), metrics.files_prefix()
        if a is not None and b is not None and a[0] == b[0] and prefixes_overlap(a[1], b[1]):
            problem("metrics.location", metrics.text, f"lies inside (or holds) the manifest table {manifest.text}: "
                                                      f"one Delta table's VACUUM would delete the other's files; "
                                                      f"use a sibling directory (the default is "
                                                      f"{manifest.with_suffix('_metrics').text})")
