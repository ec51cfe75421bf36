"""Object keys: build and parse, exactly as Confluent's S3 sink names them (spec §1.1, §5).

Value object::

    [topics.dir + D] + <topic> D <encodedPartition> D <topic> F <partition> F <offset, %0{W}d> <ext>

with ``D`` = ``directory.delim``, ``F`` = ``file.delim``, ``W`` = ``filename.offset.zero.pad.width``
(longer offsets are never truncated). A blank ``topics.dir`` means no prefix. Side objects of the
same file: ``….keys<keysExt>`` and ``….headers<headersExt>`` (value extension stripped, same
directory and start offset); the Block-GZIP index replaces the value extension by ``.index.json``.
lakesink's record-metadata side file (``store.kafka.metadata``) follows the same rule:
``….metadata.avro``.

Safety (lakesink's choice; Confluent has none):

* Topic names must be legal Kafka names (``[a-zA-Z0-9._-]``, 1..249 chars, not ``.``/``..``),
  else :class:`~lakesink.errors.KeyNameError`.
* Field values (FieldPartitioner) are written raw like Confluent, **except** that ``%``, ``/``,
  ``\\``, the configured ``directory.delim`` characters and control characters (C0, DEL, C1) are
  percent-encoded (``a/b`` → ``a%2Fb``). Confluent writes ``/`` raw, which silently creates extra
  "directories" (and ``..`` segments a consumer mapping keys to paths would follow); lakesink
  keeps one segment per field instead. ``%`` is encoded too so the mapping stays injective.
  Values without those characters (the common case) produce byte-identical keys to Confluent.
* Every key built here is checked as a last line of defence: no empty, ``.`` or ``..`` segment
  (split on ``/`` and on ``directory.delim``), no backslash, no control character, no leading
  ``/``, no lone surrogate (not UTF-8; a field value holding one is a record error). So nothing built
  from data (topic, field value, time pattern output, custom partitioner) can land outside
  ``topics.dir/<topic>/``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from lakesink.errors import InvalidArgumentError, KeyNameError

__all__ = [
    "NamingSettings",
    "KeyExtensions",
    "ParsedKey",
    "validate_topic",
    "encode_field_value",
    "check_path_segments",
    "partitioned_path",
    "file_name",
    "value_key",
    "side_key",
    "index_key",
    "parse_key",
    "INDEX_EXTENSION",
]

INDEX_EXTENSION = ".index.json"
View = Literal["value", "keys", "headers", "index", "metadata"]
SideView = Literal["keys", "headers", "metadata"]

_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1 controls
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")  # lone surrogates: not UTF-8, so no S3 key


@dataclass(frozen=True)
class NamingSettings:
    """The naming knobs, with Confluent's defaults."""

    topics_dir: str = "topics"
    directory_delim: str = "/"
    file_delim: str = "+"
    zero_pad_width: int = 10

    def __post_init__(self) -> None:
        if not self.directory_delim:
            raise InvalidArgumentError("directory.delim must not be empty")
        if not self.file_delim or any(ch.isdigit() for ch in self.file_delim):
            raise InvalidArgumentError("file.delim must be non-empty and contain no digits")
        if self.zero_pad_width < 0:
            raise InvalidArgumentError("filename.offset.zero.pad.width must be >= 0")

    @property
    def prefix(self) -> str:
        """``topics.dir + directory.delim``, or ``""`` when topics.dir is blank."""
        return self.topics_dir + self.directory_delim if self.topics_dir.strip() else ""

    def offset_text(self, offset: int) -> str:
        """``String.format("%0{W}d", offset)`` (width 0 means no padding)."""
        if offset < 0:
            raise KeyNameError(f"negative offset {offset}")
        return f"{offset:0{self.zero_pad_width}d}" if self.zero_pad_width else str(offset)


@dataclass(frozen=True)
class KeyExtensions:
    """Extensions that identify the views of a file (``keys``/``headers``/``metadata`` None = not stored)."""

    value: str
    keys: str | None = None
    headers: str | None = None
    index: bool = False
    metadata: str | None = None


@dataclass(frozen=True)
class ParsedKey:
    topic: str
    partition: int
    start_offset: int
    encoded_partition: str
    view: View
    extension: str


def validate_topic(topic: str) -> str:
    """Kafka's legal topic names; anything else could not have come from Kafka."""
    if not isinstance(topic, str) or not _TOPIC_RE.match(topic) or topic in (".", ".."):
        raise KeyNameError(
            f"illegal topic name {topic!r}: Kafka topics are 1..249 chars of [a-zA-Z0-9._-], not '.' or '..'"
        )
    return topic


def encode_field_value(value: str, directory_delim: str = "/") -> str:
    """Percent-encode the characters of a field value that could split or escape a path."""
    if _SURROGATE_RE.search(value):
        raise KeyNameError(f"field value {value!r} holds a lone surrogate: it is not text an S3 key can hold")
    unsafe = set("%/\\") | set(directory_delim)
    if not _CONTROL_RE.search(value) and not any(ch in unsafe for ch in value):
        return value
    out = []
    for ch in value:
        if ch in unsafe or _CONTROL_RE.match(ch):
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8")))
        else:
            out.append(ch)
    return "".join(out)


def check_path_segments(path: str, directory_delim: str = "/", what: str = "path") -> str:
    """Reject a path part that is empty, has ``.``/``..``/empty segments, backslashes or controls."""
    if not path:
        raise KeyNameError(f"{what} is empty")
    if "\\" in path or _CONTROL_RE.search(path):
        raise KeyNameError(f"{what} {path!r} contains a backslash or control character")
    if _SURROGATE_RE.search(path):
        raise KeyNameError(f"{what} {path!r} contains a lone surrogate (not UTF-8)")
    if path.startswith("/") or path.startswith(directory_delim):
        raise KeyNameError(f"{what} {path!r} starts with a directory delimiter")
    delims = {"/", directory_delim}
    for d in delims:
        for seg in path.split(d):
            # split on the other delimiter too, so 'a/../b' is caught whatever directory.delim is
            for sub in (seg.split("/") if d != "/" else [seg]):
                if sub in ("", ".", ".."):
                    raise KeyNameError(f"{what} {path!r} has an empty, '.' or '..' segment")
    return path


def partitioned_path(naming: NamingSettings, topic: str, encoded_partition: str) -> str:
    """``generatePartitionedPath``: ``topic + directory.delim + encodedPartition``."""
    return validate_topic(topic) + naming.directory_delim + encoded_partition


def file_name(naming: NamingSettings, topic: str, partition: int, start_offset: int, extension: str) -> str:
    """``<topic>F<partition>F<offset>ext`` (partition unpadded)."""
    if partition < 0:
        raise KeyNameError(f"negative partition {partition}")
    f = naming.file_delim
    return f"{validate_topic(topic)}{f}{partition}{f}{naming.offset_text(start_offset)}{extension}"


def value_key(
    naming: NamingSettings,
    topic: str,
    partition: int,
    encoded_partition: str,
    start_offset: int,
    extension: str,
    *,
    prefix: str | None = None,
) -> str:
    """The value object's key. ``prefix`` overrides the partitioned path (custom partitioners)."""
    validate_topic(topic)
    d = naming.directory_delim
    check_path_segments(encoded_partition, d, "encoded partition")
    dir_part = prefix if prefix is not None else partitioned_path(naming, topic, encoded_partition)
    check_path_segments(dir_part, d, "partitioned path")
    if not dir_part.startswith(topic + d):
        raise KeyNameError(f"partitioned path {dir_part!r} is not under topic {topic!r}")
    if "/" in extension or "\\" in extension or d in extension:
        raise KeyNameError(f"extension {extension!r} contains a delimiter")
    return naming.prefix + dir_part + d + file_name(naming, topic, partition, start_offset, extension)


def _strip_ext(key: str, extension: str) -> str:
    if not key.endswith(extension):
        raise KeyNameError(f"key {key!r} does not end with extension {extension!r}")
    return key[: len(key) - len(extension)] if extension else key


def side_key(value_key_: str, value_extension: str, view: SideView, view_extension: str) -> str:
    """``<base>.keys<ext>`` / ``<base>.headers<ext>`` next to the value object (spec §5); lakesink's
    ``<base>.metadata.avro`` by the same rule."""
    if view not in ("keys", "headers", "metadata"):
        raise InvalidArgumentError(f"view must be 'keys', 'headers' or 'metadata', not {view!r}")
    return f"{_strip_ext(value_key_, value_extension)}.{view}{view_extension}"


def index_key(value_key_: str, value_extension: str) -> str:
    """Block-GZIP index: the value key with its extension replaced by ``.index.json``."""
    return _strip_ext(value_key_, value_extension) + INDEX_EXTENSION


def _views(exts: KeyExtensions) -> list[tuple[str, View]]:
    cands: list[tuple[str, View]] = []
    if exts.keys is not None:
        cands.append((".keys" + exts.keys, "keys"))
    if exts.headers is not None:
        cands.append((".headers" + exts.headers, "headers"))
    if exts.metadata is not None:
        cands.append((".metadata" + exts.metadata, "metadata"))
    if exts.index:
        cands.append((INDEX_EXTENSION, "index"))
    cands.append((exts.value, "value"))
    # longest suffix first: '.keys.avro' must win over '.avro'
    return sorted(cands, key=lambda c: -len(c[0]))


def parse_key(key: str, naming: NamingSettings, extensions: KeyExtensions | str) -> ParsedKey:
    """Parse a key built by :func:`value_key`/:func:`side_key`/:func:`index_key`.

    Raises :class:`KeyNameError` with the reason for any key lakesink would not have written:
    outside ``topics.dir``, unknown extension, topic in the file name ≠ topic directory,
    non-numeric or non-canonically padded partition/offset, unsafe segments.
    """
    exts = KeyExtensions(extensions) if isinstance(extensions, str) else extensions
    d, f = naming.directory_delim, naming.file_delim
    pre = naming.prefix
    if not key.startswith(pre):
        raise KeyNameError(f"key {key!r} is not under topics.dir prefix {pre!r}")
    rest = key[len(pre):]
    for suffix, view in _views(exts):
        if rest.endswith(suffix) and len(rest) > len(suffix):
            base = rest[: len(rest) - len(suffix)] if suffix else rest
            ext = exts.value if view == "value" else suffix
            break
    else:
        raise KeyNameError(f"key {key!r} has none of the expected extensions {[c for c, _ in _views(exts)]}")
    parts = base.rsplit(f, 2)
    if len(parts) != 3:
        raise KeyNameError(f"key {key!r}: file name lacks '<topic>{f}<partition>{f}<offset>'")
    head, p_txt, o_txt = parts
    if not p_txt.isdigit() or not p_txt.isascii() or (len(p_txt) > 1 and p_txt[0] == "0"):
        raise KeyNameError(f"key {key!r}: partition {p_txt!r} is not a canonical number")
    if not o_txt.isdigit() or not o_txt.isascii():
        raise KeyNameError(f"key {key!r}: offset {o_txt!r} is not numeric")
    offset = int(o_txt)
    if naming.offset_text(offset) != o_txt:
        raise KeyNameError(f"key {key!r}: offset {o_txt!r} is not padded to width {naming.zero_pad_width}")
    # head = <topic> D <encodedPartition> D <topic>; try each delimiter position from the right
    idx = len(head)
    while True:
        idx = head.rfind(d, 0, idx)
        if idx < 0:
            raise KeyNameError(f"key {key!r}: topic in file name does not match the topic directory")
        topic = head[idx + len(d):]
        if topic and head.startswith(topic + d) and len(head) > 2 * (len(topic) + len(d)):
            encoded = head[len(topic) + len(d): idx]
            break
    validate_topic(topic)
    check_path_segments(encoded, d, "encoded partition")
    return ParsedKey(topic, int(p_txt), offset, encoded, view, ext)
