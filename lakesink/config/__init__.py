"""``SinkConfig``: one typed, validated, frozen sink configuration with Confluent's key names.

Load it with :func:`load_config` from a Java ``.properties`` file, a Kafka Connect JSON
(``{"name": ..., "config": {...}}`` — the name becomes the job name — or the bare config map), YAML
(flat dotted keys, nested maps flattened with dots, or the Connect ``name``/``config`` shape), or a
Python dict via :meth:`SinkConfig.from_dict`. Validation collects every problem and raises one
:class:`~lakesink.errors.ConfigError`.

Confluent S3 sink keys are accepted with Confluent's defaults (spec §1, §1.4, §6; see ``_KEYS``).
Differences, on purpose: an unknown ``schema.compatibility`` is an error (Confluent silently uses
NONE; the value is case-sensitive as in Confluent, so ``backward`` is rejected with a hint);
``s3.schema.partition.affix.type`` only supports ``NONE``; ``format.bytearray.separator`` escapes
(``\\n``, ``\\r\\n``, ``\\t``, ``\\uXXXX``) are interpreted.

lakesink's own keys:

============================== ============ ===========================================================
key                            default      meaning
============================== ============ ===========================================================
``name``                       (required)   job name; taken from a Connect JSON's top-level ``name``
``manifest.location``          (required)   Delta manifest: ``s3a://…`` / file path / ``db.table``
``kafka.bootstrap.servers``    (required)   Kafka brokers
``kafka.*``                                 passed through (prefix stripped) to Spark's Kafka source /
                                            confluent-kafka, e.g. ``kafka.security.protocol``
``kafka.starting.offsets``     earliest     where a partition with no manifest history starts
                                            (``earliest``/``latest``); not passed through
``schema.registry.url``                     Confluent Schema Registry for wire-format Avro
``schema.registry.*``                       passed through to the registry client (auth, TLS)
``value.decoder``              by format    ``avro``/``json``/``bytes``/``string``; default avro for
                                            avro/parquet, json for json, bytes for bytearray/blockgzip
``key.decoder``                bytes        same choices, for keys
``value.schema``                            inline Avro schema JSON, or a file path (raw Avro values)
``blockgzip.block.size``       67108864     Block-GZIP member size (uncompressed bytes)
``blockgzip.compression``      gzip         ``gzip``/``bzip2``
``batch.max.records``          -1           max records per Kafka partition per batch (-1 unlimited)
``offsets.on.data.loss``       fail         ``fail``/``skip`` when retention deleted unarchived offsets
============================== ============ ===========================================================

Kafka Connect framework keys (``connector.class``, ``tasks.max``, ``key.converter*``,
``value.converter*``, ``header.converter*``, ``errors.*``, ``transforms*``, ``predicates*``,
``consumer.override.*``, ``producer.override.*``, ``admin.override.*``) and Confluent S3 sink keys
lakesink does not implement are accepted and listed in :attr:`SinkConfig.ignored_keys` with a
reason. Secrets (``aws.*`` credentials, ``*password*``, ``*secret*``, ``*jaas*``, user info in
URLs…) never appear in ``repr``, errors or :meth:`SinkConfig.as_dict` (``redact=True``).
"""
from __future__ import annotations

import difflib
import json
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from lakesink.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.objects.naming import KeyExtensions, NamingSettings
    from lakesink.objects.partitioners import Partitioner
    from lakesink.objects.rotation import RotationPolicy

__all__ = ["Secret", "SinkConfig", "load_config", "parse_properties", "flatten"]

MASK = "******"

# ----------------------------------------------------------------------------- aliases

FORMAT_ALIASES = {
    "avro": "avro", "io.confluent.connect.s3.format.avro.AvroFormat": "avro",
    "json": "json", "io.confluent.connect.s3.format.json.JsonFormat": "json",
    "bytearray": "bytearray", "io.confluent.connect.s3.format.bytearray.ByteArrayFormat": "bytearray",
    "parquet": "parquet", "io.confluent.connect.s3.format.parquet.ParquetFormat": "parquet",
    "blockgzip": "blockgzip", "lakesink.formats.BlockGzipFormat": "blockgzip",
}
_SHORT_FORMAT = {"avroformat": "avro", "jsonformat": "json", "bytearrayformat": "bytearray",
                 "parquetformat": "parquet", "blockgzipformat": "blockgzip"}
_P = "io.confluent.connect.storage.partitioner."
PARTITIONER_ALIASES = {
    "default": "default", _P + "DefaultPartitioner": "default",
    "field": "field", _P + "FieldPartitioner": "field",
    "time": "time", _P + "TimeBasedPartitioner": "time",
    "daily": "daily", _P + "DailyPartitioner": "daily",
    "hourly": "hourly", _P + "HourlyPartitioner": "hourly",
}
_SHORT_PARTITIONER = {"defaultpartitioner": "default", "fieldpartitioner": "field", "timebased": "time",
                      "timebasedpartitioner": "time", "dailypartitioner": "daily", "hourlypartitioner": "hourly"}
EXTRACTORS = ("Wallclock", "Record", "RecordField")
AVRO_CODECS = ("null", "deflate", "snappy", "bzip2", "zstandard", "xz")
PARQUET_CODECS = ("none", "snappy", "gzip", "zstd", "lz4", "lz4_raw", "brotli")
SSE_ALGOS = ("", "AES256", "aws:kms", "aws:kms:dsse")
CANNED_ACLS = ("private", "public-read", "public-read-write", "authenticated-read", "aws-exec-read",
               "bucket-owner-read", "bucket-owner-full-control", "log-delivery-write")
DECODERS = ("avro", "json", "bytes", "string")
_DEFAULT_DECODER = {"avro": "avro", "parquet": "avro", "json": "json", "bytearray": "bytes", "blockgzip": "bytes"}

# Kafka Connect framework keys: accepted, ignored (prefix match when ending with '.' or '*').
_CONNECT_PREFIXES = (
    ("connector.class", "Kafka Connect framework key; lakesink is not a Connect plugin"),
    ("tasks.max", "Kafka Connect framework key; Spark parallelism is one task per Kafka partition"),
    ("key.converter", "Connect converter; lakesink decodes keys with key.decoder"),
    ("value.converter", "Connect converter; lakesink decodes values with value.decoder"),
    ("header.converter", "Connect converter; headers are kept as bytes"),
    ("errors.", "Connect error handling / DLQ is not supported; bad records fail the batch"),
    ("transforms", "Connect SMTs are not supported"),
    ("predicates", "Connect SMT predicates are not supported"),
    ("consumer.override.", "Connect client override; use kafka.* keys"),
    ("producer.override.", "Connect client override; use kafka.* keys"),
    ("admin.override.", "Connect client override; use kafka.* keys"),
    ("config.action.reload", "Kafka Connect framework key"),
)
# Confluent S3 sink keys lakesink does not implement (accepted so Connect configs load unchanged).
_UNIMPLEMENTED = (
    "storage.class", "schema.generator.class", "schema.cache.size", "schemas.cache.config",
    "enhanced.avro.schema.support", "connect.meta.data", "allow.optional.map.keys",
    "avro.use.logical.type.converters", "json.decimal.format", "s3.wan.mode", "s3.object.tagging",
    "s3.object.tagging.key.value.pairs", "s3.object.behavior.on.tagging.error", "s3.send.digest",
    "s3.elastic.buffer.enable", "s3.elastic.buffer.init.capacity", "s3.http.send.expect.continue",
    "s3.credentials.provider.class", "s3.sse.customer.key", "s3.proxy.url", "s3.proxy.user",
    "s3.proxy.password", "report.null.values.to.dlq", "retry.backoff.ms", "shutdown.timeout.ms",
    "partitioner.max.open.files", "enable.conditional.writes", "max.write.duration.ms",
    "timestamp.unit", "hive.integration", "hive.metastore.uris", "hive.conf.dir", "hive.home",
    "hive.database", "storage.common.config", "format.class.config", "s3.ssea.customer.key",
    "behavior.on.null.values.strict", "filename.offset.zero.pad.width.strict",
)

_SECRET_RE = re.compile(r"(password|secret|jaas|credential|token|user\.info|private\.key|sse\.customer\.key)", re.I)
_EXPLICIT_SECRETS = {"aws.access.key.id", "aws.secret.access.key"}


_SECRET_WORDS = ("password", "secret", "jaas", "credential", "credentials", "token", "passwd")


def _is_secret(key: str) -> bool:
    """A key whose value must never be shown: a secret key, or one a typo away from being one (its
    value is then most likely the secret itself)."""
    if key in _EXPLICIT_SECRETS or _SECRET_RE.search(key):
        return True
    if any(_edits(key, s) <= 2 for s in _EXPLICIT_SECRETS):
        return True
    return any(_edits(seg, w) <= 1 for seg in re.split(r"[._-]", key.lower()) if len(seg) >= 4
               for w in _SECRET_WORDS)


def _edits(a: str, b: str) -> int:
    """Optimal-string-alignment distance (insert, delete, substitute, swap adjacent), capped at 3."""
    if abs(len(a) - len(b)) > 2:
        return 3
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return min(prev[-1], 3)


def _redact_url(url: str) -> str:
    return re.sub(r"(?<=://)[^@\s]+@", MASK + "@", url)


class Secret:
    """A string that never shows itself in ``repr``/``str``; call :meth:`reveal` to use it."""

    __slots__ = ("_v",)

    def __init__(self, value: str):
        self._v = value

    def reveal(self) -> str:
        return self._v

    def __repr__(self) -> str:
        return f"Secret({MASK!r})"

    def __str__(self) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._v == self._v

    def __hash__(self) -> int:
        return hash(("Secret", self._v))

    def __reduce__(self):
        return (Secret, (self._v,))


# ----------------------------------------------------------------------------- parsing helpers

class _Bad(Exception):
    """A value that does not parse; message says what was expected."""


def _as_str(v: Any) -> str:
    if isinstance(v, str):
        return v.strip()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    raise _Bad(f"expected a string, got {type(v).__name__}")


def _as_raw_str(v: Any) -> str:
    if isinstance(v, str):
        return v
    return _as_str(v)


def _as_int(v: Any) -> int:
    if isinstance(v, bool):
        raise _Bad("expected an integer, got a boolean")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+\s*", v):
        n = int(v)
        if not -(2**63) <= n < 2**63:
            raise _Bad("integer out of the 64-bit range")
        return n
    raise _Bad("expected an integer")


def _as_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise _Bad("expected true or false")


def _as_list(v: Any) -> list[str]:
    if isinstance(v, (list, tuple)):
        out = [_as_str(x) for x in v]
    elif isinstance(v, str):
        out = [x.strip() for x in v.split(",")] if v.strip() else []
    else:
        raise _Bad("expected a comma-separated list")
    if any(not x for x in out):
        raise _Bad("list has an empty element")
    return out


def unescape_java(s: str) -> str:
    """Java string escapes: ``\\n \\r \\t \\f \\b \\0 \\\\ \\' \\" \\uXXXX``."""
    if "\\" not in s:
        return s
    out, i, n = [], 0, len(s)
    simple = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "b": "\b", "0": "\0", "\\": "\\", "'": "'", '"': '"'}
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n:
            d = s[i + 1]
            if d in simple:
                out.append(simple[d])
                i += 2
                continue
            if d == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2:i + 6] or ""):
                out.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load`` semantics: comments, continuations, separators, escapes."""
    # 1. logical lines
    logical: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        # an odd number of trailing backslashes continues the line
        m = re.search(r"(\\+)$", line)
        cont = bool(m) and len(m.group(1)) % 2 == 1
        body = line[:-1] if cont else line
        pending = body if pending is None else pending + body
        if not cont:
            logical.append(pending)
            pending = None
    if pending is not None:
        logical.append(pending)
    # 2. key / value split, escapes
    out: dict[str, str] = {}
    for line in logical:
        i, n = 0, len(line)
        key_chars: list[str] = []
        while i < n:
            c = line[i]
            if c == "\\" and i + 1 < n:
                key_chars.append(line[i:i + 2])
                i += 2
                continue
            if c in "=: \t\f":
                break
            key_chars.append(c)
            i += 1
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
            while i < n and line[i] in " \t\f":
                i += 1
        out[_prop_unescape("".join(key_chars))] = _prop_unescape(line[i:])
    return out


def _prop_unescape(s: str) -> str:
    if "\\" not in s:
        return s
    res, i, n = [], 0, len(s)
    table = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n:
            d = s[i + 1]
            if d == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2:i + 6]):
                res.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
            res.append(table.get(d, d))
            i += 2
            continue
        res.append(c)
        i += 1
    return "".join(res)


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested maps → dotted keys (``{"s3": {"bucket": {"name": "b"}}}`` → ``s3.bucket.name``)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


# ----------------------------------------------------------------------------- key table

@dataclass(frozen=True)
class _Key:
    name: str
    attr: str
    parse: Callable[[Any], Any]
    default: Any = None
    required: bool = False
    check: Callable[[Any], str | None] | None = None  # returns a problem message or None


def _range(lo: int | None = None, hi: int | None = None) -> Callable[[int], str | None]:
    def check(v: int) -> str | None:
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            if hi is None:
                return f"must be >= {lo}"
            return f"must be between {lo} and {hi}"
        return None
    return check


def _enum(*allowed: str, ci: bool = False) -> Callable[[Any], Any]:
    def parse(v: Any) -> str:
        s = _as_str(v)
        if s in allowed:
            return s
        if ci:
            for a in allowed:
                if a.lower() == s.lower():
                    return a
        hint = ""
        for a in allowed:
            if a.lower() == s.lower():
                hint = f" (values are case-sensitive: did you mean {a!r}?)"
        shown = ", ".join(repr(a) for a in allowed)
        raise _Bad(f"must be one of {shown}{hint}")
    return parse


def _ms_check(v: int) -> str | None:
    return None if v >= -1 else "must be -1 (disabled) or a positive number of milliseconds"


def _batch_check(v: int) -> str | None:
    return None if v == -1 or v >= 1 else "must be -1 (unlimited) or >= 1"


_KEYS: tuple[_Key, ...] = (
    _Key("name", "name", _as_str),
    _Key("topics", "topics", _as_list, ()),
    _Key("topics.regex", "topics_regex", _as_str, None),
    _Key("topics.dir", "topics_dir", _as_str, "topics"),
    _Key("flush.size", "flush_size", _as_int, None, True, _range(1)),
    _Key("rotate.interval.ms", "rotate_interval_ms", _as_int, -1, False, _ms_check),
    _Key("rotate.schedule.interval.ms", "rotate_schedule_interval_ms", _as_int, -1, False, _ms_check),
    _Key("rotate.file.on.partition.change", "rotate_file_on_partition_change", _as_bool, True),
    _Key("format.class", "format_name", _as_str, "avro"),
    _Key("partitioner.class", "partitioner_class", _as_str, "default"),
    _Key("partition.field.name", "partition_field_name", _as_list, ()),
    _Key("path.format", "path_format", _as_raw_str, ""),
    _Key("partition.duration.ms", "partition_duration_ms", _as_int, -1),
    _Key("locale", "locale", _as_str, ""),
    _Key("timezone", "timezone", _as_str, ""),
    _Key("timestamp.extractor", "timestamp_extractor", _as_str, "Wallclock"),
    _Key("timestamp.field", "timestamp_field", _as_str, "timestamp"),
    _Key("directory.delim", "directory_delim", _as_raw_str, "/"),
    _Key("file.delim", "file_delim", _as_raw_str, "+"),
    _Key("filename.offset.zero.pad.width", "zero_pad_width", _as_int, 10, False, _range(0)),
    _Key("s3.bucket.name", "s3_bucket_name", _as_str, None, True),
    _Key("s3.region", "s3_region", _as_str, "us-west-2"),
    _Key("store.url", "store_url", _as_str, None),
    _Key("s3.path.style.access.enabled", "s3_path_style_access", _as_bool, True),
    _Key("s3.compression.type", "s3_compression_type", _enum("none", "gzip"), "none"),
    _Key("s3.compression.level", "s3_compression_level", _as_int, -1, False, _range(-1, 9)),
    _Key("avro.codec", "avro_codec", _enum(*AVRO_CODECS), "null"),
    _Key("parquet.codec", "parquet_codec", _enum(*PARQUET_CODECS), "snappy"),
    _Key("format.bytearray.separator", "bytearray_separator_text", _as_raw_str, None),
    _Key("format.bytearray.extension", "bytearray_extension", _as_str, ".bin"),
    _Key("store.kafka.keys", "store_kafka_keys", _as_bool, False),
    _Key("store.kafka.headers", "store_kafka_headers", _as_bool, False),
    _Key("keys.format.class", "keys_format_name", _as_str, "avro"),
    _Key("headers.format.class", "headers_format_name", _as_str, "avro"),
    _Key("behavior.on.null.values", "behavior_on_null_values", _enum("fail", "ignore", "write", ci=True), "fail"),
    _Key("tombstone.encoded.partition", "tombstone_encoded_partition", _as_str, "tombstone"),
    _Key("schema.compatibility", "schema_compatibility", _enum("NONE", "BACKWARD", "FORWARD", "FULL"), "NONE"),
    _Key("s3.part.size", "s3_part_size", _as_int, 26214400, False, _range(5 * 1024 * 1024, 2**31 - 1)),
    _Key("s3.part.retries", "s3_part_retries", _as_int, 3, False, _range(0)),
    _Key("s3.retry.backoff.ms", "s3_retry_backoff_ms", _as_int, 200, False, _range(0)),
    _Key("s3.ssea.name", "s3_ssea_name", _enum(*SSE_ALGOS), ""),
    _Key("s3.sse.kms.key.id", "s3_sse_kms_key_id", _as_str, None),
    _Key("s3.acl.canned", "s3_acl_canned", _enum(*CANNED_ACLS), None),
    _Key("aws.access.key.id", "aws_access_key_id", lambda v: Secret(_as_str(v)), None),
    _Key("aws.secret.access.key", "aws_secret_access_key", lambda v: Secret(_as_str(v)), None),
    _Key("s3.schema.partition.affix.type", "s3_schema_partition_affix_type", _as_str, "NONE"),
    # lakesink's own
    _Key("manifest.location", "manifest_location", _as_str, None, True),
    _Key("kafka.starting.offsets", "kafka_starting_offsets", _enum("earliest", "latest", ci=True), "earliest"),
    _Key("value.decoder", "value_decoder", _enum(*DECODERS, ci=True), None),
    _Key("key.decoder", "key_decoder", _enum(*DECODERS, ci=True), "bytes"),
    _Key("schema.registry.url", "schema_registry_url", _as_str, None),
    _Key("value.schema", "value_schema", _as_str, None),
    _Key("blockgzip.block.size", "blockgzip_block_size", _as_int, 67108864, False, _range(1)),
    _Key("blockgzip.compression", "blockgzip_compression", _enum("gzip", "bzip2"), "gzip"),
    _Key("batch.max.records", "batch_max_records", _as_int, -1, False, _batch_check),
    _Key("offsets.on.data.loss", "offsets_on_data_loss", _enum("fail", "skip", ci=True), "fail"),
)
_BY_NAME = {k.name: k for k in _KEYS}
KNOWN_KEYS = frozenset(_BY_NAME) | {"kafka.bootstrap.servers"}


# ----------------------------------------------------------------------------- the config

@dataclass(frozen=True, eq=False)
class SinkConfig:
    """A validated sink configuration. Build with :func:`load_config` or :meth:`from_dict`."""

    name: str
    topics: tuple[str, ...]
    topics_regex: str | None
    topics_dir: str
    flush_size: int
    rotate_interval_ms: int
    rotate_schedule_interval_ms: int
    rotate_file_on_partition_change: bool
    format_name: str                 # avro | json | bytearray | parquet | blockgzip
    partitioner_class: str           # default | field | time | daily | hourly | pkg.mod.Class
    partition_field_name: tuple[str, ...]
    path_format: str                 # effective (Daily/Hourly forced; trailing delim stripped)
    partition_duration_ms: int       # effective
    locale: str
    timezone: str
    timestamp_extractor: str         # Wallclock | Record | RecordField
    timestamp_field: str
    directory_delim: str
    file_delim: str
    zero_pad_width: int
    s3_bucket_name: str
    s3_region: str
    store_url: str | None
    s3_path_style_access: bool
    s3_compression_type: str
    s3_compression_level: int
    avro_codec: str
    parquet_codec: str
    bytearray_separator: bytes
    bytearray_extension: str
    store_kafka_keys: bool
    store_kafka_headers: bool
    keys_format_name: str
    headers_format_name: str
    behavior_on_null_values: str
    tombstone_encoded_partition: str
    schema_compatibility: str
    s3_part_size: int
    s3_part_retries: int
    s3_retry_backoff_ms: int
    s3_ssea_name: str
    s3_sse_kms_key_id: str | None
    s3_acl_canned: str | None
    aws_access_key_id: Secret | None
    aws_secret_access_key: Secret | None
    s3_schema_partition_affix_type: str
    manifest_location: str
    kafka_bootstrap_servers: str
    kafka_options: dict[str, str]    # kafka.* keys, prefix stripped (includes bootstrap.servers)
    kafka_starting_offsets: str
    value_decoder: str
    key_decoder: str
    schema_registry_url: str | None
    schema_registry_options: dict[str, str]  # schema.registry.* other than url, prefix stripped
    value_schema: str | None
    blockgzip_block_size: int
    blockgzip_compression: str
    batch_max_records: int
    offsets_on_data_loss: str
    ignored_keys: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    source: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str | None = None, name: str | None = None) -> "SinkConfig":
        """Validate a flat (or nested) mapping of Confluent/lakesink keys."""
        return _build(flatten(values), source=source, job_name=name)

    # ------------------------------------------------------------------ derived

    @property
    def time_based(self) -> bool:
        return self.partitioner_class in ("time", "daily", "hourly")

    @property
    def deterministic(self) -> bool:
        """True when replays from a committed offset rebuild identical object keys (spec §3)."""
        if self.rotate_schedule_interval_ms > 0:
            return False
        return not (self.time_based and self.timestamp_extractor == "Wallclock")

    @property
    def endpoint_url(self) -> str | None:
        """``store.url`` with ``https://`` prepended when it has no scheme (Confluent S3Storage)."""
        if not self.store_url:
            return None
        return self.store_url if "://" in self.store_url else "https://" + self.store_url

    def load_value_schema(self) -> Any:
        """``value.schema`` parsed: inline JSON, or the JSON content of the file it names."""
        if not self.value_schema:
            return None
        text = self.value_schema
        if not text.lstrip().startswith(("{", "[", '"')):
            text = Path(text).read_text(encoding="utf-8")
        return json.loads(text)

    # ------------------------------------------------------------------ builders

    def naming(self) -> "NamingSettings":
        from lakesink.objects.naming import NamingSettings

        return NamingSettings(self.topics_dir, self.directory_delim, self.file_delim, self.zero_pad_width)

    def partitioner(self) -> "Partitioner":
        from lakesink.objects.partitioners import build_partitioner

        return build_partitioner(self)

    def rotation_policy(self) -> "RotationPolicy":
        from lakesink.objects.rotation import RotationPolicy

        return RotationPolicy(
            flush_size=self.flush_size,
            rotate_interval_ms=self.rotate_interval_ms,
            rotate_schedule_interval_ms=self.rotate_schedule_interval_ms,
            timezone=self.timezone or None,
            rotate_on_partition_change=self.rotate_file_on_partition_change,
            behavior_on_null_values=self.behavior_on_null_values,
            schema_compatibility=self.schema_compatibility,
        )

    def format_spec(self, name: str) -> tuple[str, dict[str, Any]]:
        """``(format name, options)`` for ``lakesink.objects.formats.create`` (value/keys/headers)."""
        comp = {"compression": self.s3_compression_type, "compression_level": self.s3_compression_level}
        if name == "avro":
            return "avro", {"codec": self.avro_codec}
        if name == "json":
            return "json", comp
        if name == "bytearray":
            return "bytearray", {"separator": self.bytearray_separator, "extension": self.bytearray_extension, **comp}
        if name == "parquet":
            return "parquet", {"codec": self.parquet_codec}
        if name == "blockgzip":
            return "blockgzip", {"block_size": self.blockgzip_block_size, "compression": self.blockgzip_compression}
        raise ValueError(f"unknown format {name!r}")

    def value_format(self) -> Any:
        from lakesink.objects import formats

        n, opts = self.format_spec(self.format_name)
        return formats.create(n, **opts)

    def keys_format(self) -> Any:
        from lakesink.objects import formats

        n, opts = self.format_spec(self.keys_format_name)
        return formats.create(n, **opts)

    def headers_format(self) -> Any:
        from lakesink.objects import formats

        n, opts = self.format_spec(self.headers_format_name)
        return formats.create(n, **opts)

    def key_extensions(self) -> "KeyExtensions":
        """Extensions of every view of a file (needs :mod:`lakesink.objects.formats`)."""
        from lakesink.objects.naming import KeyExtensions

        return KeyExtensions(
            value=self.value_format().extension,
            keys=self.keys_format().extension if self.store_kafka_keys else None,
            headers=self.headers_format().extension if self.store_kafka_headers else None,
            index=self.format_name == "blockgzip",
        )

    def decoder_spec(self, which: str = "value") -> tuple[str, dict[str, Any]]:
        """``(decoder name, options)`` for ``lakesink.decoders.create_decoder``.

        Avro: ``schema_registry_url`` + ``registry_config`` (the ``schema.registry.*`` keys, prefix
        kept off); for values, a ``value.schema`` becomes a fixed ``schema`` for bare Avro binary
        (``wire_format=False``) unless a registry is configured too.
        """
        name = self.value_decoder if which == "value" else self.key_decoder
        opts: dict[str, Any] = {}
        if name == "avro":
            if self.schema_registry_url:
                opts["schema_registry_url"] = self.schema_registry_url
                if self.schema_registry_options:
                    opts["registry_config"] = dict(self.schema_registry_options)
            if which == "value" and self.value_schema:
                opts["schema"] = self.load_value_schema()
                if not self.schema_registry_url:
                    opts["wire_format"] = False
            if which == "key":
                opts["is_key"] = True
        return name, opts

    def value_decoder_instance(self) -> Any:
        from lakesink.decoders import create_decoder

        n, opts = self.decoder_spec("value")
        return create_decoder(n, **opts)

    def key_decoder_instance(self) -> Any:
        from lakesink.decoders import create_decoder

        n, opts = self.decoder_spec("key")
        return create_decoder(n, **opts)

    # ------------------------------------------------------------------ display

    def as_dict(self, redact: bool = True) -> dict[str, Any]:
        """Confluent/lakesink key → effective value; secrets masked unless ``redact=False``."""
        out: dict[str, Any] = {}
        for k in _KEYS:
            v = getattr(self, k.attr, None) if k.attr != "bytearray_separator_text" else None
            if k.attr == "bytearray_separator_text":
                v = self.bytearray_separator.decode("utf-8", "backslashreplace")
            if isinstance(v, tuple):
                v = list(v)
            if isinstance(v, Secret):
                v = MASK if redact else v.reveal()
            out[k.name] = v
        for k, v in self.kafka_options.items():
            out["kafka." + k] = MASK if (redact and _is_secret(k)) else v
        for k, v in self.schema_registry_options.items():
            out["schema.registry." + k] = MASK if (redact and _is_secret(k)) else v
        if redact and self.schema_registry_url:
            out["schema.registry.url"] = _redact_url(self.schema_registry_url)
        if redact and self.store_url:
            out["store.url"] = _redact_url(self.store_url)
        return out

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.as_dict(redact=True).items() if v not in (None, "", [], {})}
        return f"SinkConfig({shown!r}, source={self.source!r})"

    __str__ = __repr__


# ----------------------------------------------------------------------------- validation

def _shown(key: str, value: Any) -> Any:
    if value is None:
        return None
    if _is_secret(key):
        return MASK
    if isinstance(value, str) and "://" in value:
        return _redact_url(value)
    return value


def _ignored_reason(key: str) -> str | None:
    for prefix, reason in _CONNECT_PREFIXES:
        if key == prefix or key.startswith(prefix):
            return reason
    if key in _UNIMPLEMENTED or key.startswith(("s3.proxy.", "hive.")):
        return "Confluent S3 sink key not implemented by lakesink"
    return None


def _canon_format(v: str) -> str | None:
    if v in FORMAT_ALIASES:
        return FORMAT_ALIASES[v]
    low = v.lower()
    return FORMAT_ALIASES.get(low) or _SHORT_FORMAT.get(low)


def _canon_partitioner(v: str) -> str | None:
    if v in PARTITIONER_ALIASES:
        return PARTITIONER_ALIASES[v]
    low = v.lower()
    return PARTITIONER_ALIASES.get(low) or _SHORT_PARTITIONER.get(low)


def _canon_extractor(v: str) -> str | None:
    base = v
    for pre in (_P + "TimeBasedPartitioner$", _P + "TimeBasedPartitioner."):
        if v.startswith(pre):
            base = v[len(pre):]
            break
    for e in EXTRACTORS:
        if base == e or base.lower() == e.lower() or base.lower() == e.lower() + "timestampextractor":
            return e
    return None


def _build(flat: dict[str, Any], source: str | None, job_name: str | None) -> SinkConfig:
    problems: list[ConfigProblem] = []
    warnings: list[str] = []
    ignored: list[tuple[str, str]] = []
    vals: dict[str, Any] = {}
    kafka: dict[str, str] = {}
    registry: dict[str, str] = {}

    bad_keys: set[str] = set()

    def problem(key: str, value: Any, msg: str) -> None:
        bad_keys.add(key)
        problems.append(ConfigProblem(key, _shown(key, value), msg))

    for key, value in flat.items():
        key = str(key).strip()
        if key in _BY_NAME:
            spec = _BY_NAME[key]
            if value is None:
                continue
            try:
                parsed = spec.parse(value)
            except _Bad as e:
                problem(key, value, str(e))
                continue
            if spec.check is not None:
                msg = spec.check(parsed)
                if msg:
                    problem(key, value, msg)
                    continue
            vals[spec.attr] = parsed
        elif key.startswith("kafka.") and len(key) > 6:
            try:
                kafka[key[6:]] = _as_str(value)
            except _Bad as e:
                problem(key, value, str(e))
        elif key.startswith("schema.registry.") and len(key) > 16:
            try:
                registry[key[16:]] = _as_str(value)
            except _Bad as e:
                problem(key, value, str(e))
        elif (reason := _ignored_reason(key)) is not None:
            ignored.append((key, reason))
            if reason.startswith("Confluent S3 sink key"):
                warnings.append(f"{key} is a Confluent S3 sink key lakesink does not implement; ignored")
        else:
            close = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problem(key, value, f"unknown key{hint}")

    for spec in _KEYS:
        if spec.attr not in vals:
            if spec.required and spec.name not in bad_keys:
                problem(spec.name, None, "is required")
            vals[spec.attr] = spec.default

    # ---- name
    name = job_name or vals.get("name")
    if job_name and vals.get("name") and vals["name"] != job_name:
        warnings.append(f"config 'name'={vals['name']!r} differs from the Connect name {job_name!r}; using the latter")
    if not name:
        problem("name", None, "is required (the job name)")
    elif not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", name):
        problem("name", name, "must be 1..200 characters of [A-Za-z0-9._-]")

    # ---- kafka
    bootstrap = kafka.get("bootstrap.servers", "")
    if not bootstrap:
        problem("kafka.bootstrap.servers", None, "is required (Kafka brokers, host:port[,host:port])")

    # ---- topics
    topics = tuple(vals["topics"])
    regex = vals["topics_regex"] or None
    if topics and regex:
        problem("topics", ",".join(topics), "set either 'topics' or 'topics.regex', not both")
    elif not topics and not regex:
        problem("topics", None, "one of 'topics' or 'topics.regex' is required")
    for t in topics:
        if not re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", t) or t in (".", ".."):
            problem("topics", t, "is not a legal Kafka topic name ([a-zA-Z0-9._-], 1..249 chars)")
    if regex:
        try:
            re.compile(regex)
        except re.error as e:
            problem("topics.regex", regex, f"invalid regular expression: {e}")

    # ---- naming
    ddelim, fdelim = vals["directory_delim"], vals["file_delim"]
    if not ddelim:
        problem("directory.delim", ddelim, "must not be empty")
    elif "\\" in ddelim or ddelim in (".", ".."):
        problem("directory.delim", ddelim, "must not contain a backslash or be '.'/'..'")
    if not fdelim or any(c.isdigit() for c in fdelim) or (ddelim and ddelim in fdelim):
        problem("file.delim", fdelim, "must be non-empty, contain no digits and not contain directory.delim")
    tdir = vals["topics_dir"]
    if tdir and ddelim:
        from lakesink.errors import KeyNameError
        from lakesink.objects.naming import check_path_segments

        try:
            check_path_segments(tdir, ddelim, "topics.dir")
        except KeyNameError as e:
            problem("topics.dir", tdir, str(e))
        if tdir.endswith(ddelim) or tdir.endswith("/"):
            problem("topics.dir", tdir, "must not end with the directory delimiter")

    # ---- formats
    fmt = _canon_format(vals["format_name"])
    if fmt is None:
        problem("format.class", vals["format_name"], "must be one of avro, json, bytearray, parquet, blockgzip "
                "(or io.confluent.connect.s3.format.<x>.<X>Format)")
        fmt = "avro"
    kfmt = _canon_format(vals["keys_format_name"])
    if kfmt is None or kfmt == "blockgzip":
        problem("keys.format.class", vals["keys_format_name"], "must be one of avro, json, bytearray, parquet")
        kfmt = "avro"
    hfmt = _canon_format(vals["headers_format_name"])
    if hfmt == "bytearray":
        problem("headers.format.class", vals["headers_format_name"],
                "ByteArrayFormat is not allowed for headers; use avro, json or parquet")
        hfmt = "avro"
    elif hfmt is None or hfmt == "blockgzip":
        problem("headers.format.class", vals["headers_format_name"], "must be one of avro, json, parquet")
        hfmt = "avro"
    if vals["s3_compression_type"] == "gzip":
        checks = [("format.class", fmt, vals["format_name"])]
        if vals["store_kafka_keys"]:
            checks.append(("keys.format.class", kfmt, vals["keys_format_name"]))
        if vals["store_kafka_headers"]:
            checks.append(("headers.format.class", hfmt, vals["headers_format_name"]))
        for key, canon, given in checks:
            if canon not in ("json", "bytearray"):
                problem("s3.compression.type", "gzip",
                        f"is only supported with JSON or ByteArray formats, but {key}={given}")
    sep_text = vals["bytearray_separator_text"]
    separator = (unescape_java(sep_text) if sep_text is not None else "\n").encode("utf-8")
    bext = vals["bytearray_extension"]
    if not bext.startswith(".") or "/" in bext or "\\" in bext:
        problem("format.bytearray.extension", bext, "must start with '.' and contain no '/' or '\\'")

    # ---- decoders
    value_decoder = (vals["value_decoder"] or _DEFAULT_DECODER[fmt]).lower()
    key_decoder = vals["key_decoder"].lower()
    if vals["value_schema"]:
        vs = vals["value_schema"]
        if vs.lstrip().startswith(("{", "[", '"')):
            try:
                json.loads(vs)
            except ValueError as e:
                problem("value.schema", vs[:80], f"is not valid JSON: {e}")
        elif not os.path.exists(vs):
            warnings.append(f"value.schema file {vs!r} does not exist here (it is read when the job starts)")

    # ---- null values
    bonv = vals["behavior_on_null_values"].lower()
    if bonv == "write" and not vals["store_kafka_keys"]:
        problem("behavior.on.null.values", "write", "requires store.kafka.keys=true (tombstones are archived as keys)")

    # ---- affix
    affix = vals["s3_schema_partition_affix_type"]
    if affix in ("PREFIX", "SUFFIX"):
        problem("s3.schema.partition.affix.type", affix, "is not supported by lakesink (only NONE)")
    elif affix != "NONE":
        problem("s3.schema.partition.affix.type", affix, "must be NONE (PREFIX/SUFFIX are not supported)")

    # ---- timezone / locale
    tz = vals["timezone"]
    if tz:
        from lakesink.objects.timeformat import zone
        from lakesink.errors import PatternError

        try:
            zone(tz)
        except PatternError as e:
            problem("timezone", tz, str(e))
            tz_ok = False
        else:
            tz_ok = True
    else:
        tz_ok = False
    if vals["rotate_schedule_interval_ms"] > 0 and not tz:
        problem("rotate.schedule.interval.ms", vals["rotate_schedule_interval_ms"],
                "requires 'timezone' (deadlines are aligned to the local day)")

    # ---- partitioner
    pclass = _canon_partitioner(vals["partitioner_class"])
    if pclass is None:
        raw_p = vals["partitioner_class"]
        if "." in raw_p and re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+", raw_p):
            from lakesink.objects.partitioners import load_partitioner_class

            try:
                load_partitioner_class(raw_p)
                pclass = raw_p
            except ValueError as e:
                problem("partitioner.class", raw_p, f"custom partitioner: {e}")
        else:
            problem("partitioner.class", raw_p, "must be one of default, field, time, daily, hourly, "
                    "io.confluent.connect.storage.partitioner.<X>Partitioner, or a Python 'pkg.mod.Class'")
        pclass = pclass or "default"
    time_based = pclass in ("time", "daily", "hourly")
    fields_ = tuple(vals["partition_field_name"])
    if pclass == "field":
        if not fields_:
            problem("partition.field.name", None, "is required for FieldPartitioner")
        for fname in fields_:
            if (ddelim and ddelim in fname) or "/" in fname or "\\" in fname or fname in (".", ".."):
                problem("partition.field.name", fname, "field names must not contain a directory delimiter")
    extractor = _canon_extractor(vals["timestamp_extractor"])
    if extractor is None:
        problem("timestamp.extractor", vals["timestamp_extractor"], "must be one of Wallclock, Record, RecordField")
        extractor = "Wallclock"
    path_format = vals["path_format"]
    duration = vals["partition_duration_ms"]
    if time_based:
        if pclass == "daily":
            from lakesink.objects.partitioners import DAILY_PATH_FORMAT

            path_format, duration = DAILY_PATH_FORMAT.replace("/", ddelim or "/"), 86_400_000
        elif pclass == "hourly":
            from lakesink.objects.partitioners import HOURLY_PATH_FORMAT

            path_format, duration = HOURLY_PATH_FORMAT.replace("/", ddelim or "/"), 3_600_000
        else:
            if not path_format.strip():
                problem("path.format", path_format or None, "is required for TimeBasedPartitioner "
                        "(Joda pattern, e.g. 'year'=YYYY/'month'=MM/'day'=dd)")
            if duration <= 0:
                problem("partition.duration.ms", duration, "must be > 0 for TimeBasedPartitioner")
        if ddelim and path_format.endswith(ddelim):
            path_format = path_format[: -len(ddelim)]
        if not vals["locale"]:
            problem("locale", None, "is required for time-based partitioners (e.g. en)")
        if not tz:
            problem("timezone", None, "is required for time-based partitioners (e.g. UTC, America/New_York)")
        if path_format.strip() and tz_ok and ddelim:
            _check_path_format(path_format, tz, vals["locale"] or "en", ddelim, problem)
        if extractor == "Wallclock" or vals["rotate_schedule_interval_ms"] > 0:
            warnings.append("timestamp.extractor=Wallclock / rotate.schedule.interval.ms are non-deterministic: "
                            "replays may produce different object keys (exactly-once needs Record or RecordField)")
    else:
        if vals["rotate_interval_ms"] > 0:
            warnings.append("rotate.interval.ms is ignored: it only applies to time-based partitioners")
        if vals["rotate_schedule_interval_ms"] > 0:
            warnings.append("rotate.schedule.interval.ms is non-deterministic: replays may produce different keys")
    tomb = vals["tombstone_encoded_partition"]
    if bonv == "write" and ddelim:
        from lakesink.errors import KeyNameError
        from lakesink.objects.naming import check_path_segments

        try:
            check_path_segments(tomb, ddelim, "tombstone.encoded.partition")
        except KeyNameError as e:
            problem("tombstone.encoded.partition", tomb, str(e))

    bucket = vals["s3_bucket_name"]
    if bucket and not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
        problem("s3.bucket.name", bucket, "is not a valid S3 bucket name (3-63 chars of a-z, 0-9, '.', '-')")
    if vals["s3_sse_kms_key_id"] and vals["s3_ssea_name"] not in ("aws:kms", "aws:kms:dsse"):
        problem("s3.sse.kms.key.id", vals["s3_sse_kms_key_id"], "requires s3.ssea.name=aws:kms or aws:kms:dsse")
    if (vals["aws_access_key_id"] is None) != (vals["aws_secret_access_key"] is None):
        problem("aws.secret.access.key" if vals["aws_secret_access_key"] is None else "aws.access.key.id", None,
                "aws.access.key.id and aws.secret.access.key must be set together")

    if problems:
        raise ConfigError(problems, source)

    return SinkConfig(
        name=name, topics=topics, topics_regex=regex, topics_dir=tdir,
        flush_size=vals["flush_size"], rotate_interval_ms=vals["rotate_interval_ms"],
        rotate_schedule_interval_ms=vals["rotate_schedule_interval_ms"],
        rotate_file_on_partition_change=vals["rotate_file_on_partition_change"],
        format_name=fmt, partitioner_class=pclass, partition_field_name=fields_,
        path_format=path_format, partition_duration_ms=duration, locale=vals["locale"], timezone=tz,
        timestamp_extractor=extractor, timestamp_field=vals["timestamp_field"],
        directory_delim=ddelim, file_delim=fdelim, zero_pad_width=vals["zero_pad_width"],
        s3_bucket_name=bucket, s3_region=vals["s3_region"], store_url=vals["store_url"] or None,
        s3_path_style_access=vals["s3_path_style_access"], s3_compression_type=vals["s3_compression_type"],
        s3_compression_level=vals["s3_compression_level"], avro_codec=vals["avro_codec"],
        parquet_codec=vals["parquet_codec"], bytearray_separator=separator, bytearray_extension=bext,
        store_kafka_keys=vals["store_kafka_keys"], store_kafka_headers=vals["store_kafka_headers"],
        keys_format_name=kfmt, headers_format_name=hfmt, behavior_on_null_values=bonv,
        tombstone_encoded_partition=tomb, schema_compatibility=vals["schema_compatibility"],
        s3_part_size=vals["s3_part_size"], s3_part_retries=vals["s3_part_retries"],
        s3_retry_backoff_ms=vals["s3_retry_backoff_ms"], s3_ssea_name=vals["s3_ssea_name"],
        s3_sse_kms_key_id=vals["s3_sse_kms_key_id"], s3_acl_canned=vals["s3_acl_canned"],
        aws_access_key_id=vals["aws_access_key_id"], aws_secret_access_key=vals["aws_secret_access_key"],
        s3_schema_partition_affix_type=affix, manifest_location=vals["manifest_location"],
        kafka_bootstrap_servers=bootstrap, kafka_options=kafka,
        kafka_starting_offsets=vals["kafka_starting_offsets"].lower(),
        value_decoder=value_decoder, key_decoder=key_decoder,
        schema_registry_url=vals["schema_registry_url"], schema_registry_options=registry,
        value_schema=vals["value_schema"], blockgzip_block_size=vals["blockgzip_block_size"],
        blockgzip_compression=vals["blockgzip_compression"], batch_max_records=vals["batch_max_records"],
        offsets_on_data_loss=vals["offsets_on_data_loss"].lower(),
        ignored_keys=tuple(ignored), warnings=tuple(warnings), source=source,
        raw={k: _shown(k, v) for k, v in flat.items()},
    )


def _check_path_format(pattern: str, tz: str, locale: str, ddelim: str,
                       problem: Callable[[str, Any, str], None]) -> None:
    """Compile the Joda pattern and vet a sample of its output for path safety."""
    from lakesink.errors import KeyNameError, PatternError
    from lakesink.objects.naming import check_path_segments
    from lakesink.objects.timeformat import JodaFormatter

    try:
        fmt = JodaFormatter(pattern, tz, locale)
    except PatternError as e:
        problem("path.format", pattern, str(e))
        return
    # Letters only print digits, names, offsets; unsafe output can only come from literals, so
    # formatting two far-apart instants is enough to catch '..', empty segments, backslashes.
    for sample in (0, 1_767_225_600_000 + 12 * 3_600_000):
        try:
            check_path_segments(fmt.format(sample), ddelim, "path.format output")
        except KeyNameError as e:
            problem("path.format", pattern, str(e))
            return


# ----------------------------------------------------------------------------- loading

def _read_source(path: Path) -> tuple[dict[str, Any], str | None]:
    text = path.read_text(encoding="utf-8")
    suffix = path.suffix.lower()
    if suffix == ".json" or (suffix not in (".yaml", ".yml", ".properties", ".conf") and text.lstrip().startswith("{")):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ConfigError([ConfigProblem("<file>", None, f"invalid JSON: {e}")], str(path)) from None
        return _unwrap(data, str(path))
    if suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ConfigError([ConfigProblem("<file>", None, f"invalid YAML: {e}")], str(path)) from None
        return _unwrap(data, str(path))
    return dict(parse_properties(text)), None


def _unwrap(data: Any, source: str) -> tuple[dict[str, Any], str | None]:
    """Connect shape ``{"name":..., "config":{...}}`` → (config, name); else (data, None)."""
    if not isinstance(data, Mapping):
        raise ConfigError([ConfigProblem("<file>", None, "top level must be a mapping")], source)
    if "config" in data and isinstance(data["config"], Mapping):
        extra = [k for k in data if k not in ("name", "config", "tasks", "type")]
        if extra:
            raise ConfigError([ConfigProblem(k, None, "unexpected top-level key next to 'config'") for k in extra],
                              source)
        name = data.get("name")
        return dict(data["config"]), (str(name) if name is not None else None)
    return dict(data), None


def load_config(source: str | os.PathLike | Mapping[str, Any]) -> SinkConfig:
    """Load and validate a config from a file path (.properties / .json / .yaml) or a mapping."""
    if isinstance(source, Mapping):
        flat, name = _unwrap(source, "<dict>")
        return _build(flatten(flat), source=None, job_name=name)
    path = Path(source)
    if not path.is_file():
        raise ConfigError([ConfigProblem("<file>", str(path), "config file not found")], str(path))
    flat, name = _read_source(path)
    return _build(flatten(flat), source=str(path), job_name=name)


# dataclass fields, for tests / tooling
FIELD_NAMES = tuple(f.name for f in fields(SinkConfig))
