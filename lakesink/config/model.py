"""The validated configuration value: :class:`SinkConfig` (frozen, picklable, secrets masked in ``repr``; its
:class:`Secret` values are defined in :mod:`lakesink.config.keys`) and :func:`load_config`. Validation is
:mod:`lakesink.config.validate` (which returns the fields; this module builds the value, so validate never imports
it back); turning a config into components is :mod:`lakesink.wiring`."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from lakesink.config.keys import KEYS, MASK, Secret, is_secret, redact_url, shown
from lakesink.config.parse import flatten, read_source, unwrap
from lakesink.config.providers import resolve
from lakesink.config.validate import build_values
from lakesink.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.config.schema_registry import RegistryConfig

__all__ = ["Secret", "SinkConfig", "FIELD_NAMES", "load_config", "build"]


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
    store_kafka_metadata: bool       # lakesink's record-metadata side file (offset, timestamp, type)
    keys_format_name: str
    headers_format_name: str
    behavior_on_null_values: str
    tombstone_encoded_partition: str
    schema_compatibility: str
    s3_part_size: int
    s3_part_retries: int
    s3_retry_backoff_ms: int
    s3_retry_deadline_ms: int        # lakesink: total time one S3 call may spend retrying
    s3_ssea_name: str
    s3_sse_kms_key_id: str | None
    s3_acl_canned: str | None
    aws_access_key_id: Secret | None
    aws_secret_access_key: Secret | None
    s3_schema_partition_affix_type: str
    manifest_location: str
    manifest_engine: str             # auto (delta-rs for path tables, Spark for catalog tables) | delta-rs | spark
    kafka_bootstrap_servers: str
    kafka_options: dict[str, str]    # kafka.* keys, prefix stripped (includes bootstrap.servers)
    kafka_starting_offsets: str
    kafka_reader: str                # direct (librdkafka in the executors) | spark (Spark's Kafka source)
    kafka_retry_deadline_ms: int     # lakesink: bound of Kafka retries (driver metadata) and of a stalled read
    value_decoder: str
    key_decoder: str
    schema_registry_url: str | None
    schema_registry_options: dict[str, str]  # schema.registry.* other than url, prefix stripped
    registry: "RegistryConfig"       # the schema.registry.* keys parsed (lakesink.config.schema_registry)
    value_schema: str | None
    blockgzip_block_size: int
    blockgzip_compression: str
    batch_max_records: int
    offsets_on_data_loss: str
    transforms_sql: str | None = None      # lakesink.transforms: a DuckDB query / filter over each record batch
    transforms_python: str | None = None   # lakesink.transforms: package.module:function of one record
    metrics_location: str | None = None    # lakesink.manifest.metrics: default <manifest.location>_metrics
    consumer_groups: tuple[str, ...] = ()  # lakesink.manifest.groups: groups whose offsets each batch records
    consumer_groups_regex: str | None = None  # ... and every group it matches (the union of both)
    archive_retention_ms: int = -1         # lakesink expire's default age limit (Kafka's retention.ms); -1: none
    errors_tolerance: str = "none"         # none: a record that does not decode fails the batch | all: dead letter
    dlq_topic: str | None = None           # errors.deadletterqueue.topic.name (required by errors.tolerance=all)
    dlq_context_headers: bool = True       # errors.deadletterqueue.context.headers.enable (__connect.errors.*)
    s3_credentials_source: str = "default"  # lakesink.credentials: default | static | session | uc-service-credential
    s3_credentials_uc_name: str | None = None  # the Unity Catalog service credential (uc-service-credential)
    aws_session_token: Secret | None = None
    ignored_keys: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    source: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    # keys whose value came from a config provider (${file:...}, ${env:...}: lakesink.config.providers): secrets
    provided_keys: frozenset[str] = frozenset()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str | None = None, name: str | None = None) -> "SinkConfig":
        """Validate a flat (or nested) mapping of Confluent/lakesink keys (config provider references resolved)."""
        return build(flatten(values), source, name)

    # ------------------------------------------------------------------ derived
    # (components — naming, partitioner, formats, decoders, store — are built by lakesink.wiring)

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
    def value_subject_name_strategy(self) -> str:
        """topic | record | topic_record (``value.subject.name.strategy``)."""
        return self.registry.value_subject_name_strategy

    @property
    def key_subject_name_strategy(self) -> str:
        """topic | record | topic_record (``key.subject.name.strategy``)."""
        return self.registry.key_subject_name_strategy

    @property
    def endpoint_url(self) -> str | None:
        """``store.url`` with ``https://`` prepended when it has no scheme (Confluent S3Storage)."""
        if not self.store_url:
            return None
        return self.store_url if "://" in self.store_url else "https://" + self.store_url

    # ------------------------------------------------------------------ display

    def as_dict(self, redact: bool = True) -> dict[str, Any]:
        """Confluent/lakesink key → effective value; secrets masked unless ``redact=False``."""
        out: dict[str, Any] = {}
        for k in KEYS:
            v = getattr(self, k.attr, None) if k.attr != "bytearray_separator_text" else None
            if k.attr == "bytearray_separator_text":
                v = self.bytearray_separator.decode("utf-8", "backslashreplace")
            if isinstance(v, tuple):
                v = list(v)
            if isinstance(v, Secret):
                v = MASK if redact else v.reveal()
            out[k.name] = v
        for k, v in self.kafka_options.items():
            out["kafka." + k] = MASK if (redact and is_secret(k)) else v
        for k, v in self.schema_registry_options.items():
            out["schema.registry." + k] = MASK if (redact and is_secret(k)) else v
        if redact and self.schema_registry_url:
            out["schema.registry.url"] = redact_url(self.schema_registry_url)
        if redact and self.store_url:
            out["store.url"] = redact_url(self.store_url)
        if redact:  # a value from a config provider is a secret, whatever its key
            for k in self.provided_keys & out.keys():
                if out[k] not in (None, "", [], ()):
                    out[k] = MASK
        return out

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.as_dict(redact=True).items() if v not in (None, "", [], {})}
        return f"SinkConfig({shown!r}, source={self.source!r})"

    __str__ = __repr__


# dataclass fields, for tests / tooling
FIELD_NAMES = tuple(f.name for f in fields(SinkConfig))


def load_config(source: str | os.PathLike | Mapping[str, Any]) -> SinkConfig:
    """Load and validate a config from a file path (.properties / .json / .yaml) or a mapping; config provider
    references (``${file:/path:key}``, ``${env:VAR}``, ``${directory:/dir:file}``) are resolved first."""
    if isinstance(source, Mapping):
        flat, name = unwrap(source, "<dict>")
        return build(flatten(flat), None, name)
    path = Path(source)
    if not path.is_file():
        raise ConfigError([ConfigProblem("<file>", str(path), "config file not found")], str(path))
    flat, name = read_source(path)
    return build(flatten(flat), str(path), name)


def build(flat: dict[str, Any], source: str | None, name: str | None) -> SinkConfig:
    """Resolve config provider references in ``flat`` (:mod:`lakesink.config.providers`), validate, build; a
    value that came from a provider is masked in every problem, warning and in ``raw``."""
    resolved = resolve(flat, source)
    try:
        values = build_values(resolved.config, source=source, job_name=name)
    except ConfigError as e:
        if not resolved.keys:
            raise
        # from None: the unmasked error must not ride along as the context (a --debug traceback shows it)
        raise ConfigError([resolved.problem(p) for p in e.problems], e.source) from None
    if resolved.keys:
        values["raw"] = {k: (shown(k, flat[k]) if k in resolved.keys and k in flat else resolved.masked(k, v))
                         for k, v in values["raw"].items()}  # a provided key shows its reference
        values["warnings"] = tuple(resolved.scrub(w) for w in values["warnings"])
        # a Connect JSON's top-level name is the job's name, whatever the config's "name" resolved to
        values["provided_keys"] = resolved.keys - {"name"} if name else resolved.keys
    return SinkConfig(**values)
