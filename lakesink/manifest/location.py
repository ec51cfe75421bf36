"""One rule for a table location (``manifest.location``, ``metrics.location``): a path table or a catalog table.

:func:`parse_location` is the only place lakesink tells the two apart; the config validator, the engine choice,
both manifest engines, the metrics table and preflight all ask it. The rule:

* a URI with a scheme is a **path**: ``s3a://b/p``, ``s3://b/p`` and ``s3n://b/p`` (one S3 location: delta-rs is
  given ``s3://``), ``file:/p`` / ``file:///p`` (a local directory), any other ``scheme:`` (``abfss://``,
  ``gs://``, ``dbfs:/``) as given;
* an absolute path (``/p``), a path under the home directory (``~/p``) or a relative path (``data/manifest``,
  ``./manifest``: anything with a ``/`` or starting with ``.``) is a local **path**; a relative one is made
  absolute against the current directory once, when the config is loaded (:func:`resolve_location`), so the
  driver, its workers and a later ``lakesink sql`` mean the same directory;
* anything else must be a **catalog** table name of one to three parts (``tbl``, ``db.tbl``, ``cat.db.tbl``;
  a part is ``[A-Za-z0-9_]+`` or back-quoted); ``manifest`` alone is the table ``manifest`` of the current
  database, write ``./manifest`` for a directory.

Pure: no I/O beyond ``os.getcwd()``/``~`` expansion for relative paths.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from lakesink.errors import BadValue

#: ``metrics.location`` values that turn the metrics table off (here, beside the location rule, so the config's
#: layout check reads it without importing the metrics writer).
DISABLED = ("none", "off", "false", "disabled")

__all__ = ["TableLocation", "parse_location", "resolve_location", "S3_SCHEMES", "prefixes_overlap"]

#: schemes that name one S3 location (Hadoop's s3a/s3n and plain s3)
S3_SCHEMES = ("s3", "s3a", "s3n")

_PART = r"(?:[A-Za-z0-9_]+|`(?:[^`]|``)+`)"
_CATALOG = re.compile(rf"{_PART}(?:\.{_PART}){{0,2}}")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):(.*)", re.S)  # two letters at least: not a drive letter
_PATHS = "a path (s3a://bucket/prefix, file:///dir, /dir, ./dir)"
_NAMES = "a catalog table name (tbl, db.tbl, catalog.db.tbl)"


@dataclass(frozen=True)
class TableLocation:
    """A parsed table location.

    ``kind``: ``"path"`` or ``"catalog"``; ``text``: the location as Spark and messages take it (relative local
    paths already absolute); ``scheme``: ``"s3"`` for every S3 spelling, ``"file"`` for a local path, another
    scheme as given, ``""`` for a catalog name; ``bucket``: the S3 bucket (or another scheme's authority);
    ``path``: the key prefix in the bucket (S3, no leading or trailing ``/``) or the absolute local path;
    ``name``: the catalog table name."""

    kind: str
    text: str
    scheme: str = ""
    bucket: str = ""
    path: str = ""
    name: str = ""

    @property
    def is_path(self) -> bool:
        return self.kind == "path"

    @property
    def uri(self) -> str:
        """The delta-rs URI of a path table: ``s3://bucket/key`` for every S3 spelling, the absolute path of a
        local one, other schemes as given (a catalog table has none: its name)."""
        if self.kind == "catalog":
            return self.name
        if self.scheme == "s3":
            return f"s3://{self.bucket}/{self.path}" if self.path else f"s3://{self.bucket}"
        if self.scheme == "file":
            return self.path
        return self.text

    @property
    def sql_target(self) -> str:
        """The table in Spark SQL: ``delta.`<path>``` or the catalog name."""
        return f"delta.`{self.text}`" if self.is_path else self.name

    def with_suffix(self, suffix: str) -> "TableLocation":
        """The sibling table whose last path segment or name part has ``suffix`` appended (the metrics table:
        ``s3a://b/m`` → ``s3a://b/m_metrics``, ``db.m`` → ``db.m_metrics``,
        ``db.`m-1``` → ``db.`m-1_metrics```)."""
        if self.kind == "catalog":
            name = self.name[:-1] + suffix + "`" if self.name.endswith("`") else self.name + suffix
            return parse_location(name)
        return parse_location(self.text.rstrip("/") + suffix)

    def files_prefix(self) -> tuple[str, str] | None:
        """(namespace, prefix) of every file of the table, for overlap checks: ``("s3:bkt", "a/b/")`` for
        ``s3a://bkt/a/b``, ``("file", "/abs/dir/")`` for a local directory; None for a catalog table (its
        directory is the metastore's)."""
        if self.kind == "catalog":
            return None
        if self.scheme == "s3":
            return f"s3:{self.bucket}", (self.path + "/" if self.path else "")
        if self.scheme == "file":
            return "file", self.path.rstrip("/") + "/"
        return f"{self.scheme}:{self.bucket}", self.path.strip("/") + "/"


def prefixes_overlap(a: str, b: str) -> bool:
    """Whether a key can start with both prefixes (one is a prefix of the other)."""
    return a.startswith(b) or b.startswith(a)


def parse_location(text: str, cwd: str | None = None) -> TableLocation:
    """The location ``text`` as a path or catalog table (see the module's rule). A relative local path is made
    absolute against ``cwd`` (default: the current directory); its ``text`` is then that absolute path.
    Raises :class:`~lakesink.errors.BadValue` for an empty location, an S3 URI without a bucket, a relative
    ``file:`` URI or a string that is neither a path nor a table name."""
    text = str(text).strip()
    if not text:
        raise BadValue(f"is empty: give {_PATHS} or {_NAMES}")
    m = _SCHEME.fullmatch(text)
    if m:
        scheme, rest = m.group(1).lower(), m.group(2)
        if scheme in S3_SCHEMES:
            if not rest.startswith("//") or not rest[2:].split("/", 1)[0]:
                raise BadValue(f"names no bucket: write {scheme}://bucket/prefix")
            bucket, _, key = rest[2:].partition("/")
            return TableLocation("path", text, "s3", bucket, key.strip("/"))
        if scheme == "file":
            if rest.startswith("//"):  # file://host/path: only the local host
                host, _, path = rest[2:].partition("/")
                if host not in ("", "localhost"):
                    raise BadValue(f"names host {host!r}: a file: location is a local directory "
                                   f"(file:///dir)")
                rest = "/" + path
            if not rest.startswith("/"):
                raise BadValue("is a relative file: URI: write file:///absolute/dir, or the plain relative path")
            return TableLocation("path", text, "file", "", os.path.normpath(rest))
        authority, path = "", rest
        if rest.startswith("//"):
            authority, _, path = rest[2:].partition("/")
        return TableLocation("path", text, scheme, authority, path.strip("/"))
    if text.startswith(("/", "~", ".")) or "/" in text:
        path = os.path.expanduser(text)
        if not os.path.isabs(path):
            path = os.path.join(cwd if cwd is not None else os.getcwd(), path)
        path = os.path.normpath(path)
        # Spark and delta-rs expand neither '~' nor a relative path the same way: keep the absolute one
        return TableLocation("path", text if text.startswith("/") else path, "file", "", path)
    if _CATALOG.fullmatch(text):
        return TableLocation("catalog", text, name=text)
    raise BadValue(f"is neither {_PATHS} nor {_NAMES}")


def resolve_location(text: str, cwd: str | None = None) -> str:
    """``text`` as the config keeps it: a relative local path made absolute (once, at load), else unchanged."""
    return parse_location(text, cwd).text
