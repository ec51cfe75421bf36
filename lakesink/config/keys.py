"""The key table: every Confluent / lakesink key with its parser, default and range check; the Kafka
Connect framework keys and unimplemented Confluent keys that are accepted and ignored; secret-key
detection and masking."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from lakesink import plugins
from lakesink.errors import BadValue
from lakesink.config.parse import as_bool, as_int, as_list, as_raw_str, as_str

__all__ = ["MASK", "Key", "KEYS", "BY_NAME", "KNOWN_KEYS", "CONNECT_PREFIXES", "UNIMPLEMENTED", "is_secret",
           "redact_url", "shown", "ignored_reason", "AVRO_CODECS", "PARQUET_CODECS", "SSE_ALGOS", "CANNED_ACLS",
           "DECODERS"]

MASK = "******"


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


AVRO_CODECS = ("null", "deflate", "snappy", "bzip2", "zstandard", "xz")
PARQUET_CODECS = ("none", "snappy", "gzip", "zstd", "lz4", "lz4_raw", "brotli")
SSE_ALGOS = ("", "AES256", "aws:kms", "aws:kms:dsse")
CANNED_ACLS = ("private", "public-read", "public-read-write", "authenticated-read", "aws-exec-read",
               "bucket-owner-read", "bucket-owner-full-control", "log-delivery-write")
DECODERS = plugins.names("decoder")  # avro, json, bytes, string


# Kafka Connect framework keys: accepted, ignored (prefix match when ending with '.' or '*').
CONNECT_PREFIXES = (
    ("connector.class", "Kafka Connect framework key; lakesink is not a Connect plugin"),
    ("tasks.max", "Kafka Connect framework key; Spark parallelism is one task per Kafka partition"),
    ("key.converter", "Connect converter; lakesink decodes keys with key.decoder"),
    ("value.converter", "Connect converter; lakesink decodes values with value.decoder"),
    ("header.converter", "Connect converter; headers are kept as bytes"),
    ("errors.deadletterqueue.topic.replication.factor", "lakesink does not create the dead-letter topic; it must "
                                                        "exist (preflight checks it)"),
    ("errors.", "Connect error-handling key lakesink does not use (it implements errors.tolerance, "
                "errors.deadletterqueue.topic.name and errors.deadletterqueue.context.headers.enable)"),
    ("transforms", "Connect SMTs are not applied; lakesink's transforms.sql (a DuckDB query or filter over "
                   "key, value, headers, timestamp) or transforms.python (a function of one record) do their work"),
    ("predicates", "Connect SMT predicates are not supported"),
    # consumer.override.* / producer.override.* / admin.override.* are not here: they are applied as kafka.* or
    # ignored one by one (a security setting never is): lakesink.config.overrides
    ("config.action.reload", "Kafka Connect framework key"),
)
# Confluent S3 sink keys lakesink does not implement (accepted so Connect configs load unchanged).
UNIMPLEMENTED = (
    "storage.class", "schema.generator.class", "schema.cache.size", "schemas.cache.config",
    "enhanced.avro.schema.support", "connect.meta.data", "allow.optional.map.keys",
    "avro.use.logical.type.converters", "json.decimal.format", "s3.wan.mode", "s3.object.tagging",
    "s3.object.tagging.key.value.pairs", "s3.object.behavior.on.tagging.error", "s3.send.digest",
    "s3.elastic.buffer.enable", "s3.elastic.buffer.init.capacity", "s3.http.send.expect.continue",
    "s3.sse.customer.key", "s3.proxy.url", "s3.proxy.user",
    "s3.proxy.password", "report.null.values.to.dlq", "retry.backoff.ms", "shutdown.timeout.ms",
    "partitioner.max.open.files", "enable.conditional.writes", "max.write.duration.ms",
    "timestamp.unit", "hive.integration", "hive.metastore.uris", "hive.conf.dir", "hive.home",
    "hive.database", "storage.common.config", "format.class.config", "s3.ssea.customer.key",
    "behavior.on.null.values.strict", "filename.offset.zero.pad.width.strict",
)

_SECRET_RE = re.compile(r"(password|secret|jaas|credential|token|user\.info|private\.key|sse\.customer\.key)", re.I)
_EXPLICIT_SECRETS = {"aws.access.key.id", "aws.secret.access.key", "aws_access_key_id", "aws_secret_access_key",
                     "S3_ACCESS_KEY", "S3_SECRET_KEY"}  # the last four: other connectors' spellings


_SECRET_WORDS = ("password", "secret", "jaas", "credential", "credentials", "token", "passwd")


def is_secret(key: str) -> bool:
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


def redact_url(url: str) -> str:
    return re.sub(r"(?<=://)[^@\s]+@", MASK + "@", url)


def shown(key: str, value: Any) -> Any:
    if value is None:
        return None
    if is_secret(key):
        return MASK
    if isinstance(value, str) and "://" in value:
        return redact_url(value)
    return value


def ignored_reason(key: str) -> str | None:
    for prefix, reason in CONNECT_PREFIXES:
        if key == prefix or key.startswith(prefix):
            return reason
    if key in UNIMPLEMENTED or key.startswith(("s3.proxy.", "hive.")):
        return "Confluent S3 sink key not implemented by lakesink"
    return None


# ----------------------------------------------------------------------------- key table

@dataclass(frozen=True)
class Key:
    name: str
    attr: str
    parse: Callable[[Any], Any]
    default: Any = None
    required: bool = False
    check: Callable[[Any], str | None] | None = None  # returns a problem message or None
    secret: bool = False  # the parsed value is wrapped in a Secret


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
        s = as_str(v)
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
        raise BadValue(f"must be one of {shown}{hint}")
    return parse


def _ms_check(v: int) -> str | None:
    return None if v >= -1 else "must be -1 (disabled) or a positive number of milliseconds"


def _batch_check(v: int) -> str | None:
    return None if v == -1 or v >= 1 else "must be -1 (unlimited) or >= 1"


KEYS: tuple[Key, ...] = (
    Key("name", "name", as_str),
    Key("topics", "topics", as_list, ()),
    Key("topics.regex", "topics_regex", as_str, None),
    Key("topics.dir", "topics_dir", as_str, "topics"),
    Key("flush.size", "flush_size", as_int, None, True, _range(1)),
    Key("rotate.interval.ms", "rotate_interval_ms", as_int, -1, False, _ms_check),
    Key("rotate.schedule.interval.ms", "rotate_schedule_interval_ms", as_int, -1, False, _ms_check),
    Key("rotate.file.on.partition.change", "rotate_file_on_partition_change", as_bool, True),
    # retention of the archive (lakesink expire): Kafka's retention.ms, applied to archived objects; -1 keeps them
    Key("archive.retention.ms", "archive_retention_ms", as_int, -1, False, _ms_check),
    Key("format.class", "format_name", as_str, "avro"),
    Key("partitioner.class", "partitioner_class", as_str, "default"),
    Key("partition.field.name", "partition_field_name", as_list, ()),
    Key("path.format", "path_format", as_raw_str, ""),
    Key("partition.duration.ms", "partition_duration_ms", as_int, -1),
    Key("locale", "locale", as_str, ""),
    Key("timezone", "timezone", as_str, ""),
    Key("timestamp.extractor", "timestamp_extractor", as_str, "Wallclock"),
    Key("timestamp.field", "timestamp_field", as_str, "timestamp"),
    Key("directory.delim", "directory_delim", as_raw_str, "/"),
    Key("file.delim", "file_delim", as_raw_str, "+"),
    Key("filename.offset.zero.pad.width", "zero_pad_width", as_int, 10, False, _range(0)),
    Key("s3.bucket.name", "s3_bucket_name", as_str, None, True),
    Key("s3.region", "s3_region", as_str, "us-west-2"),
    Key("store.url", "store_url", as_str, None),
    Key("s3.path.style.access.enabled", "s3_path_style_access", as_bool, True),
    Key("s3.compression.type", "s3_compression_type", _enum("none", "gzip"), "none"),
    Key("s3.compression.level", "s3_compression_level", as_int, -1, False, _range(-1, 9)),
    Key("avro.codec", "avro_codec", _enum(*AVRO_CODECS), "null"),
    Key("parquet.codec", "parquet_codec", _enum(*PARQUET_CODECS), "snappy"),
    Key("format.bytearray.separator", "bytearray_separator_text", as_raw_str, None),
    Key("format.bytearray.extension", "bytearray_extension", as_str, ".bin"),
    Key("store.kafka.keys", "store_kafka_keys", as_bool, False),
    Key("store.kafka.headers", "store_kafka_headers", as_bool, False),
    Key("store.kafka.metadata", "store_kafka_metadata", as_bool, True),  # lakesink's: <base>.metadata.avro
    Key("keys.format.class", "keys_format_name", as_str, "avro"),
    Key("headers.format.class", "headers_format_name", as_str, "avro"),
    Key("behavior.on.null.values", "behavior_on_null_values", _enum("fail", "ignore", "write", ci=True), "fail"),
    Key("tombstone.encoded.partition", "tombstone_encoded_partition", as_str, "tombstone"),
    Key("schema.compatibility", "schema_compatibility", _enum("NONE", "BACKWARD", "FORWARD", "FULL"), "NONE"),
    Key("s3.part.size", "s3_part_size", as_int, 26214400, False, _range(5 * 1024 * 1024, 2**31 - 1)),
    Key("s3.part.retries", "s3_part_retries", as_int, 3, False, _range(0)),
    Key("s3.retry.backoff.ms", "s3_retry_backoff_ms", as_int, 200, False, _range(0)),
    Key("s3.retry.deadline.ms", "s3_retry_deadline_ms", as_int, 120000, False, _range(0)),
    Key("s3.ssea.name", "s3_ssea_name", _enum(*SSE_ALGOS), ""),
    Key("s3.sse.kms.key.id", "s3_sse_kms_key_id", as_str, None),
    Key("s3.acl.canned", "s3_acl_canned", _enum(*CANNED_ACLS), None),
    Key("aws.access.key.id", "aws_access_key_id", as_str, None, secret=True),
    Key("aws.secret.access.key", "aws_secret_access_key", as_str, None, secret=True),
    # credentials (lakesink.credentials): Confluent's provider class mapped to a mode, or lakesink's own keys
    Key("s3.credentials.provider.class", "s3_credentials_provider_class", as_str, None),
    Key("s3.credentials.source", "s3_credentials_source", as_str, None),
    Key("s3.credentials.uc.name", "s3_credentials_uc_name", as_str, None),
    Key("aws.session.token", "aws_session_token", as_str, None, secret=True),
    Key("s3.schema.partition.affix.type", "s3_schema_partition_affix_type", as_str, "NONE"),
    # lakesink's own
    Key("manifest.location", "manifest_location", as_str, None, True),
    Key("manifest.engine", "manifest_engine", _enum("auto", "delta-rs", "spark", ci=True), "auto"),
    Key("kafka.starting.offsets", "kafka_starting_offsets", _enum("earliest", "latest", ci=True), "earliest"),
    Key("kafka.reader", "kafka_reader", _enum("direct", "spark", ci=True), "direct"),
    # the Kafka dependency's deadline: the driver's metadata calls retry within it; an executor's read that gets
    # nothing from the broker for this long fails its task (not a librdkafka property: never passed to a client)
    Key("kafka.retry.deadline.ms", "kafka_retry_deadline_ms", as_int, 60000, False, _range(1000, 3600000)),
    Key("value.decoder", "value_decoder", _enum(*DECODERS, ci=True), None),
    Key("key.decoder", "key_decoder", _enum(*DECODERS, ci=True), "bytes"),
    Key("schema.registry.url", "schema_registry_url", as_str, None),
    Key("value.subject.name.strategy", "value_subject_name_strategy", as_str, "topic"),  # see config.schema_registry
    Key("key.subject.name.strategy", "key_subject_name_strategy", as_str, "topic"),
    Key("value.schema", "value_schema", as_str, None),
    Key("blockgzip.block.size", "blockgzip_block_size", as_int, 67108864, False, _range(1)),
    Key("blockgzip.compression", "blockgzip_compression", _enum("gzip", "bzip2"), "gzip"),
    Key("batch.max.records", "batch_max_records", as_int, -1, False, _batch_check),
    Key("offsets.on.data.loss", "offsets_on_data_loss", _enum("fail", "skip", ci=True), "fail"),
    # record transforms (lakesink.transforms) and batch metrics (lakesink.manifest.metrics)
    Key("transforms.sql", "transforms_sql", as_str, None),
    Key("transforms.python", "transforms_python", as_str, None),
    Key("metrics.location", "metrics_location", as_str, None),
    # consumer groups whose committed offsets each batch records (lakesink.manifest.groups; restore --groups)
    Key("consumer.groups", "consumer_groups", as_list, ()),
    Key("consumer.groups.regex", "consumer_groups_regex", as_str, None),
    # dead letters (Connect's names; lakesink.executor.deadletter): records whose key or value cannot be decoded
    Key("errors.tolerance", "errors_tolerance", _enum("none", "all", ci=True), "none"),
    Key("errors.deadletterqueue.topic.name", "dlq_topic", as_str, None),
    # Connect's default is false; lakesink's is true: the dead letters carry topic/partition/offset/error
    Key("errors.deadletterqueue.context.headers.enable", "dlq_context_headers", as_bool, True),
)
BY_NAME = {k.name: k for k in KEYS}
KNOWN_KEYS = frozenset(BY_NAME) | {"kafka.bootstrap.servers"}
