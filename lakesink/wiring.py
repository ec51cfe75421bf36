"""The one place a :class:`~lakesink.config.SinkConfig` becomes components.

Everything under :mod:`lakesink.objects` takes explicit settings and never sees a config; the
executor, driver and tools call these functions instead (``wiring.naming(cfg)``,
``wiring.value_format(cfg)``, ``wiring.store_settings(cfg)`` …). Heavy modules (formats, decoders,
Spark settings) are imported on first use, so importing this module stays cheap.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from lakesink import plugins
from lakesink.errors import ConfigError, InvalidArgumentError, ManifestError

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.config import SinkConfig
    from lakesink.decoders import DecoderSpec
    from lakesink.objects.formats import FormatSpec
    from lakesink.transforms import TransformSpec
    from lakesink.objects.naming import KeyExtensions, NamingSettings
    from lakesink.objects.partitioners import Partitioner, PartitionerSettings
    from lakesink.objects.rotation import RotationPolicy
    from lakesink.schemas.registry import RegistrySettings
    from lakesink.store.settings import S3Settings
    from lakesink.store import StoreSettings

__all__ = ["TaskParts", "DeadLetterSettings", "task_parts", "transform_spec", "librdkafka_config", "naming",
           "partitioner_settings", "partitioner", "custom_partitioner", "rotation_policy", "format_spec",
           "value_compression", "value_format", "keys_format", "headers_format", "metadata_format", "key_extensions",
           "load_value_schema",
           "registry_settings", "decoder_spec", "value_decoder_instance", "key_decoder_instance", "store_settings",
           "s3_settings", "manifest", "spark_schedules_only", "why_spark_runs_tasks"]


# ----------------------------------------------------------------------------- kafka

def librdkafka_config(kafka_options: "Mapping[str, str]") -> dict[str, str]:
    """The config's ``kafka.*`` keys (prefix stripped) as librdkafka takes them (names mapped,
    ``isolation.level`` defaulted; see :mod:`lakesink.config.kafka`, which validation already ran)."""
    from lakesink.config.kafka import librdkafka_options

    return librdkafka_options(kafka_options)[0]


# ----------------------------------------------------------------------------- objects

def naming(cfg: "SinkConfig") -> "NamingSettings":
    from lakesink.objects.naming import NamingSettings

    return NamingSettings(cfg.topics_dir, cfg.directory_delim, cfg.file_delim, cfg.zero_pad_width)


def partitioner_settings(cfg: "SinkConfig") -> "PartitionerSettings":
    from lakesink.objects.partitioners import PartitionerSettings

    return PartitionerSettings(
        kind=cfg.partitioner_class, directory_delim=cfg.directory_delim, fields=cfg.partition_field_name,
        path_format=cfg.path_format, partition_duration_ms=cfg.partition_duration_ms, timezone=cfg.timezone,
        locale=cfg.locale, timestamp_extractor=cfg.timestamp_extractor, timestamp_field=cfg.timestamp_field,
        behavior_on_null_values=cfg.behavior_on_null_values,
        tombstone_encoded_partition=cfg.tombstone_encoded_partition,
    )


def partitioner(cfg: "SinkConfig") -> "Partitioner":
    """The configured partitioner (wrapped for tombstones when needed). A custom ``pkg.mod.Class``
    is loaded through :mod:`lakesink.plugins` and receives the whole config."""
    from lakesink.objects.partitioners import build_partitioner

    return build_partitioner(partitioner_settings(cfg), custom_partitioner(cfg))


def custom_partitioner(cfg: "SinkConfig") -> Any:
    """A custom ``partitioner.class`` (``pkg.mod.Class``, loaded through :mod:`lakesink.plugins`, given the whole
    config), or None for a built-in one."""
    from lakesink.objects.partitioners import BUILTIN_KINDS

    if cfg.partitioner_class in BUILTIN_KINDS:
        return None
    return plugins.load("partitioner", cfg.partitioner_class)(cfg)


def rotation_policy(cfg: "SinkConfig") -> "RotationPolicy":
    from lakesink.objects.rotation import RotationPolicy

    return RotationPolicy(
        flush_size=cfg.flush_size,
        rotate_interval_ms=cfg.rotate_interval_ms,
        rotate_schedule_interval_ms=cfg.rotate_schedule_interval_ms,
        timezone=cfg.timezone or None,
        rotate_on_partition_change=cfg.rotate_file_on_partition_change,
        behavior_on_null_values=cfg.behavior_on_null_values,
        schema_compatibility=cfg.schema_compatibility,
        rotate_on_key_schema=keys_have_schemas(cfg),
    )


def keys_have_schemas(cfg: "SinkConfig") -> bool:
    """Whether stored keys carry a schema (decoded from Confluent wire format, Avro or Protobuf) into a keys side
    file with one writer schema (Avro, Parquet): the records then hand their key schema to the keys writer and a
    new key schema starts new files."""
    key = plugins.canonical("format", cfg.keys_format_name)
    return bool(cfg.store_kafka_keys and cfg.key_decoder in ("avro", "protobuf") and key is not None
                and plugins.load("format", key).schema_per_file)


# ----------------------------------------------------------------------------- formats

def _format_class(name: str) -> Any:
    key = plugins.canonical("format", name)
    if key is None:
        raise InvalidArgumentError(f"unknown format {name!r}")
    return plugins.load("format", key)


def format_spec(cfg: "SinkConfig", name: str) -> "FormatSpec":
    """``(format name, options)`` (value/keys/headers) for :meth:`FormatSpec.build
    <lakesink.objects.formats.FormatSpec.build>`: the format class's own
    :meth:`~lakesink.objects.formats.base.Format.options_from`."""
    from lakesink.objects.formats import FormatSpec

    cls = _format_class(name)
    return FormatSpec(cls.name, cls.options_from(cfg))


def _import_format_spec(name: str) -> "FormatSpec":
    """A read-only format of objects another connector wrote (adopted by ``manifest import``): no config options;
    its compression is each object's manifest row's."""
    from lakesink.objects.formats import FormatSpec

    return FormatSpec(name, {})


def value_compression(cfg: "SinkConfig") -> str | None:
    """The compression the value objects are written with (the manifest's ``compression`` column)."""
    return _format_class(cfg.format_name).compression_from(cfg)


def _create_format(cfg: "SinkConfig", name: str) -> Any:
    return format_spec(cfg, name).build()


def value_format(cfg: "SinkConfig") -> Any:
    return _create_format(cfg, cfg.format_name)


def keys_format(cfg: "SinkConfig") -> Any:
    return _create_format(cfg, cfg.keys_format_name)


def headers_format(cfg: "SinkConfig") -> Any:
    return _create_format(cfg, cfg.headers_format_name)


def metadata_format(cfg: "SinkConfig") -> Any:
    """The record-metadata side file's format (``store.kafka.metadata``), or None when it is off."""
    from lakesink.objects.formats.metadata import MetadataFormat

    return MetadataFormat() if cfg.store_kafka_metadata else None


def key_extensions(cfg: "SinkConfig") -> "KeyExtensions":
    """Extensions of every view of a file (needs :mod:`lakesink.objects.formats`)."""
    from lakesink.objects.naming import KeyExtensions

    return KeyExtensions(
        value=value_format(cfg).extension,
        keys=keys_format(cfg).extension if cfg.store_kafka_keys else None,
        headers=headers_format(cfg).extension if cfg.store_kafka_headers else None,
        index=_format_class(cfg.format_name).has_index,
        metadata=metadata_format(cfg).extension if cfg.store_kafka_metadata else None,
    )


# ----------------------------------------------------------------------------- decoders

def load_value_schema(cfg: "SinkConfig") -> Any:
    """``value.schema`` parsed: inline JSON, or the JSON content of the file it names."""
    if not cfg.value_schema:
        return None
    text = cfg.value_schema
    if not text.lstrip().startswith(("{", "[", '"')):
        text = Path(text).read_text(encoding="utf-8")
    return json.loads(text)


def registry_settings(cfg: "SinkConfig") -> "RegistrySettings | None":
    """The Schema Registry client settings of the config (None without ``schema.registry.url``): the url
    (its user info only with ``basic.auth.credentials.source=URL``), ``basic.auth.user.info``, the PEM TLS
    files and the pass-through client options (timeout, retries, proxy, bearer.auth.*)."""
    from lakesink.schemas.registry import RegistrySettings

    reg = cfg.registry
    if not reg.url:
        return None
    opts = {k: (v.reveal() if hasattr(v, "reveal") else v) for k, v in reg.client_options}
    kwargs: dict[str, Any] = {}
    for key, attr in (("timeout", "timeout_s"), ("max.retries", "max_retries"), ("retries.wait.ms", "retries_wait_ms"),
                      ("retries.max.wait.ms", "retries_max_wait_ms")):
        if key in opts:
            kwargs[attr] = opts.pop(key)
    return RegistrySettings(
        url=reg.url, user_info=_reveal(reg.user_info) if reg.credentials_source == "USER_INFO" else None,
        ssl_ca_location=reg.ssl_ca_location, ssl_certificate_location=reg.ssl_certificate_location,
        ssl_key_location=reg.ssl_key_location, ssl_key_password=_reveal(reg.ssl_key_password),
        extra=tuple(sorted(opts.items())), **kwargs)


def decoder_spec(cfg: "SinkConfig", which: str = "value") -> "DecoderSpec":
    """``(decoder name, options)`` for :meth:`DecoderSpec.build <lakesink.decoders.DecoderSpec.build>`.

    Avro / JSON Schema: ``registry`` (:func:`registry_settings`) and the side's subject name strategy;
    for Avro values, a ``value.schema`` becomes a fixed ``schema`` for bare Avro binary
    (``wire_format=False``) unless a registry is configured too.
    """
    name = cfg.value_decoder if which == "value" else cfg.key_decoder
    opts: dict[str, Any] = {}
    if name in ("avro", "json_schema", "protobuf"):
        settings = registry_settings(cfg)
        if settings is not None:
            opts["registry"] = settings
        strategy = cfg.value_subject_name_strategy if which == "value" else cfg.key_subject_name_strategy
        if strategy != "topic":
            opts["subject_name_strategy"] = strategy
        if name == "avro" and which == "value" and cfg.value_schema:
            opts["schema"] = load_value_schema(cfg)
            if settings is None:
                opts["wire_format"] = False
        if which == "key":
            opts["is_key"] = True
    from lakesink.decoders import DecoderSpec

    return DecoderSpec(name, opts)


def value_decoder_instance(cfg: "SinkConfig") -> Any:
    return decoder_spec(cfg, "value").build()


def key_decoder_instance(cfg: "SinkConfig") -> Any:
    return decoder_spec(cfg, "key").build()


# ----------------------------------------------------------------------------- store / Spark

def _reveal(secret: Any) -> str | None:
    return secret.reveal() if secret is not None else None


def _s3(cfg: "SinkConfig") -> "S3Settings":
    """The one place the config's S3 location and keys become settings (store.url, s3.region,
    s3.path.style.access.enabled, aws.*): the store, S3A and delta-rs all render this value."""
    from lakesink.store.settings import S3Settings

    return S3Settings(endpoint_url=cfg.endpoint_url, access_key=_reveal(cfg.aws_access_key_id),
                      secret_key=_reveal(cfg.aws_secret_access_key), region=cfg.s3_region,
                      path_style=cfg.s3_path_style_access, session_token=_reveal(cfg.aws_session_token))


def store_settings(cfg: "SinkConfig") -> "StoreSettings":
    """Object-store settings (Confluent keys: s3.bucket.name, store.url, s3.region, ...): :func:`_s3`'s
    S3 settings plus the bucket, upload and retry keys."""
    from lakesink.store import StoreSettings

    return StoreSettings(
        bucket=cfg.s3_bucket_name,
        s3=_s3(cfg),
        part_size=cfg.s3_part_size,
        part_retries=cfg.s3_part_retries,
        retry_backoff_ms=cfg.s3_retry_backoff_ms,
        retry_deadline_ms=cfg.s3_retry_deadline_ms,
        sse=cfg.s3_ssea_name or "",
        kms_key_id=cfg.s3_sse_kms_key_id,
        acl=cfg.s3_acl_canned,
        credentials=store_credentials(cfg),
    )


def store_credentials(cfg: "SinkConfig") -> Any:
    """The credentials setting every boto3 session is built from (lakesink.credentials). Short-lived
    credentials (a UC service credential) are resolved here, on the driver, and travel with the settings
    to the executors, which re-resolve them when they near expiry."""
    from lakesink.credentials import CredentialSettings, ShippedCredentials

    # "default" is also what a config built in code without the key holds: infer the mode from the keys then
    source = None if cfg.s3_credentials_source == "default" else cfg.s3_credentials_source
    settings = CredentialSettings.from_keys(
        source, None, _reveal(cfg.aws_access_key_id), _reveal(cfg.aws_secret_access_key),
        _reveal(cfg.aws_session_token), cfg.s3_credentials_uc_name)
    if settings.source == "uc-service-credential":
        return ShippedCredentials.on_driver(settings)
    return settings


def s3_settings(cfg: "SinkConfig") -> "S3Settings | None":
    """The object store's S3 settings (:func:`store_settings`'s ``s3``, without resolving credentials), so an
    ``s3a://`` manifest beside the archive uses the same endpoint and credentials. None for a ``file://`` store."""
    url = cfg.endpoint_url
    if url and url.startswith("file:"):
        return None
    return _s3(cfg)


# ----------------------------------------------------------------------------- transforms

def transform_spec(cfg: "SinkConfig") -> "TransformSpec | None":
    """The config's record transforms as a value (``transforms.sql``, ``transforms.python``), or None without any."""
    if not (getattr(cfg, "transforms_sql", None) or getattr(cfg, "transforms_python", None)):
        return None
    from lakesink.transforms import TransformSpec

    return TransformSpec(cfg.transforms_sql or None, cfg.transforms_python or None)


def transforms(cfg: "SinkConfig") -> Any:
    """The config's record transforms (:class:`lakesink.transforms.Transforms`), or None without any."""
    spec = transform_spec(cfg)
    return None if spec is None else spec.build()


# ----------------------------------------------------------------------------- manifest

def manifest(cfg: "SinkConfig", spark: Any = None):
    """The job's manifest table on the configured engine: delta-rs for a path table (no Spark needed), the
    Spark engine for a catalog table or ``manifest.engine=spark`` (then ``spark``, a session or a zero-argument
    callable returning one, is required)."""
    if cfg.manifest_engine == "delta-rs":
        from lakesink.manifest.deltars import DeltaRsManifest

        return DeltaRsManifest(cfg.manifest_location, s3_settings(cfg))
    from lakesink.manifest.table import Manifest

    if spark is None:
        raise InvalidArgumentError(f"manifest {cfg.manifest_location!r} (engine spark) needs a Spark session")
    return Manifest(spark() if callable(spark) else spark, cfg.manifest_location)


def path_manifest(cfg: "SinkConfig", command: str):
    """The job's path manifest (delta-rs) for a driver ``command`` that rewrites it (``lakesink expire``,
    ``lakesink erase``): ConfigError for a catalog table or ``manifest.engine=spark``, ManifestError when the table
    does not exist yet."""
    if cfg.manifest_engine != "delta-rs":
        raise ConfigError(f"manifest {cfg.manifest_location!r}: lakesink {command} needs a path manifest (delta-rs "
                          f"engine); a catalog table or manifest.engine=spark is not supported yet")
    m = manifest(cfg)
    if not m.exists():
        raise ManifestError(f"no manifest table at {cfg.manifest_location}: job {cfg.name!r} has not committed "
                            f"anything yet")
    return m


def spark_schedules_only(cfg: "SinkConfig") -> bool:
    """Whether a sink run's Spark only schedules Python tasks: the direct reader reads Kafka in them, and
    delta-rs writes the manifest and the metrics table, so no record or table passes through the JVM
    (:func:`lakesink.runtime.spark.get_spark` then starts a local JVM built for a quick start, not for throughput)."""
    return why_spark_runs_tasks(cfg) is None


def catalog_table(cfg: "SinkConfig") -> str | None:
    """The first of the job's tables that only Spark can write or read -- the manifest when it is a catalog table
    (or ``manifest.engine=spark``), else the metrics table when it is a catalog table -- with why, or None when
    every table is a path table that delta-rs reads (what ``lakesink sql`` and the local runner both ask)."""
    from lakesink.manifest.metrics import metrics_location
    from lakesink.manifest.location import parse_location

    if cfg.manifest_engine != "delta-rs":
        return f"the manifest {cfg.manifest_location!r} is written by Spark (a catalog table or manifest.engine=spark)"
    metrics = metrics_location(cfg)
    if metrics is not None and not parse_location(metrics).is_path:
        return f"the metrics table {metrics!r} is a catalog table"
    return None


def why_spark_runs_tasks(cfg: "SinkConfig") -> str | None:
    """What in ``cfg`` needs Spark itself (the one wording of the engine choice and the local runner), or None
    when Spark would only schedule Python tasks (:func:`spark_schedules_only`)."""
    if cfg.kafka_reader != "direct":
        return "kafka.reader=spark reads Kafka with Spark's Kafka source"
    return catalog_table(cfg)


# ----------------------------------------------------------------------------- what a task receives

@dataclass(frozen=True)
class DeadLetterSettings:
    """``errors.tolerance=all``: where a sink task sends the records that do not decode."""

    topic: str
    context_headers: bool
    #: the librdkafka settings of the job's ``kafka.*`` keys (the executor adds the producer's own)
    kafka: dict[str, str]
    deadline_s: float


@dataclass(frozen=True)
class TaskParts:
    """Everything a task needs to write or read a job's objects, built once per run on the driver by
    :func:`task_parts` and shipped to every task in place of the config: plain, picklable settings and specs
    (a task builds its formats, decoders and transforms from them with ``build()``)."""

    naming: "NamingSettings"
    rotation: "RotationPolicy"
    partitioner_settings: "PartitionerSettings"
    #: a custom ``partitioner.class`` built on the driver (it receives the whole config), or None
    custom_partitioner: Any
    #: every registered format with this config's options: objects an earlier run wrote in another format are
    #: read with these (:meth:`format_spec`)
    format_specs: dict[str, "FormatSpec"]
    #: the value objects' format, and the formats side files have (and are read with, whether or not this run
    #: stores them): names of :attr:`format_specs`
    value_format_name: str
    keys_format_name: str
    headers_format_name: str
    store_keys: bool
    store_headers: bool
    store_metadata: bool
    #: the compression value objects are written with (the manifest's ``compression`` column)
    value_compression: str | None
    store: "StoreSettings"
    value_decoder: "DecoderSpec"
    key_decoder: "DecoderSpec"
    #: whether the keys side file is written with each key's schema (:func:`keys_have_schemas`)
    keys_have_schemas: bool
    transforms: "TransformSpec | None"
    dead_letters: DeadLetterSettings | None
    behavior_on_null_values: str

    @property
    def value_format(self) -> "FormatSpec":
        return self.format_specs[self.value_format_name]

    @property
    def keys_format(self) -> "FormatSpec":
        return self.format_specs[self.keys_format_name]

    @property
    def headers_format(self) -> "FormatSpec":
        return self.format_specs[self.headers_format_name]

    def format_spec(self, name: str) -> "FormatSpec":
        """The spec of format ``name`` (any spelling :mod:`lakesink.plugins` knows) with this run's options."""
        key = plugins.canonical("format", name) or plugins.canonical("import_format", name)
        if key is None or key not in self.format_specs:
            raise InvalidArgumentError(f"unknown format {name!r}")
        return self.format_specs[key]

    def partitioner(self) -> "Partitioner":
        """The configured partitioner (wrapped for tombstones when needed); each call gets its own copy of a
        custom one, as each task built its own from the config."""
        import copy

        from lakesink.objects.partitioners import build_partitioner

        return build_partitioner(self.partitioner_settings, copy.deepcopy(self.custom_partitioner))

    def metadata_format(self) -> Any:
        """The record-metadata side file's format, or None when ``store.kafka.metadata`` is off."""
        from lakesink.objects.formats.metadata import MetadataFormat

        return MetadataFormat() if self.store_metadata else None


def task_parts(cfg: "SinkConfig") -> TaskParts:
    """The run's :class:`TaskParts` (format and decoder options checked when a task builds them)."""
    letters = None
    if getattr(cfg, "errors_tolerance", "none") == "all":
        letters = DeadLetterSettings(cfg.dlq_topic, cfg.dlq_context_headers, librdkafka_config(cfg.kafka_options),
                                     cfg.kafka_retry_deadline_ms / 1000.0)
    return TaskParts(
        naming=naming(cfg), rotation=rotation_policy(cfg), partitioner_settings=partitioner_settings(cfg),
        custom_partitioner=custom_partitioner(cfg),
        format_specs={**{name: format_spec(cfg, name) for name in plugins.names("format")},
                      **{name: _import_format_spec(name) for name in plugins.names("import_format")}},
        value_format_name=plugins.canonical("format", cfg.format_name),
        keys_format_name=plugins.canonical("format", cfg.keys_format_name),
        headers_format_name=plugins.canonical("format", cfg.headers_format_name),
        store_keys=bool(cfg.store_kafka_keys), store_headers=bool(cfg.store_kafka_headers),
        store_metadata=bool(cfg.store_kafka_metadata), value_compression=value_compression(cfg),
        store=store_settings(cfg), value_decoder=decoder_spec(cfg, "value"), key_decoder=decoder_spec(cfg, "key"),
        keys_have_schemas=keys_have_schemas(cfg), transforms=transform_spec(cfg), dead_letters=letters,
        behavior_on_null_values=cfg.behavior_on_null_values)
