"""The one place a :class:`~lakesink.config.SinkConfig` becomes components.

Everything under :mod:`lakesink.objects` takes explicit settings and never sees a config; the
executor, driver and tools call these functions instead (``wiring.naming(cfg)``,
``wiring.value_format(cfg)``, ``wiring.store_settings(cfg)`` …). Heavy modules (formats, decoders,
Spark settings) are imported on first use, so importing this module stays cheap.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from lakesink import registry
from lakesink.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.config import SinkConfig
    from lakesink.objects.naming import KeyExtensions, NamingSettings
    from lakesink.objects.partitioners import Partitioner, PartitionerSettings
    from lakesink.objects.rotation import RotationPolicy
    from lakesink.spark import S3Settings
    from lakesink.store import StoreSettings

__all__ = ["librdkafka_config", "naming", "partitioner_settings", "partitioner", "rotation_policy", "format_spec", "value_format",
           "keys_format", "headers_format", "metadata_format", "key_extensions", "load_value_schema", "decoder_spec",
           "value_decoder_instance", "key_decoder_instance", "store_settings", "s3_settings"]


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
    is loaded through :mod:`lakesink.registry` and receives the whole config."""
    from lakesink.objects.partitioners import BUILTIN_KINDS, build_partitioner

    custom = None
    if cfg.partitioner_class not in BUILTIN_KINDS:
        custom = registry.load("partitioner", cfg.partitioner_class)(cfg)
    return build_partitioner(partitioner_settings(cfg), custom)


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
    )


# ----------------------------------------------------------------------------- formats

def format_spec(cfg: "SinkConfig", name: str) -> tuple[str, dict[str, Any]]:
    """``(format name, options)`` for ``lakesink.objects.formats.create`` (value/keys/headers)."""
    comp = {"compression": cfg.s3_compression_type, "compression_level": cfg.s3_compression_level}
    if name == "avro":
        return "avro", {"codec": cfg.avro_codec}
    if name == "json":
        return "json", comp
    if name == "bytearray":
        return "bytearray", {"separator": cfg.bytearray_separator, "extension": cfg.bytearray_extension, **comp}
    if name == "parquet":
        return "parquet", {"codec": cfg.parquet_codec}
    if name == "blockgzip":
        return "blockgzip", {"block_size": cfg.blockgzip_block_size, "compression": cfg.blockgzip_compression}
    raise InvalidArgumentError(f"unknown format {name!r}")


def _create_format(cfg: "SinkConfig", name: str) -> Any:
    from lakesink.objects import formats

    n, opts = format_spec(cfg, name)
    return formats.create(n, **opts)


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
        index=cfg.format_name == "blockgzip",
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


def decoder_spec(cfg: "SinkConfig", which: str = "value") -> tuple[str, dict[str, Any]]:
    """``(decoder name, options)`` for ``lakesink.decoders.create_decoder``.

    Avro: ``schema_registry_url`` + ``registry_config`` (the ``schema.registry.*`` keys, prefix
    kept off); for values, a ``value.schema`` becomes a fixed ``schema`` for bare Avro binary
    (``wire_format=False``) unless a registry is configured too.
    """
    name = cfg.value_decoder if which == "value" else cfg.key_decoder
    opts: dict[str, Any] = {}
    if name == "avro":
        if cfg.schema_registry_url:
            opts["schema_registry_url"] = cfg.schema_registry_url
            if cfg.schema_registry_options:
                opts["registry_config"] = dict(cfg.schema_registry_options)
        if which == "value" and cfg.value_schema:
            opts["schema"] = load_value_schema(cfg)
            if not cfg.schema_registry_url:
                opts["wire_format"] = False
        if which == "key":
            opts["is_key"] = True
    return name, opts


def value_decoder_instance(cfg: "SinkConfig") -> Any:
    from lakesink.decoders import create_decoder

    n, opts = decoder_spec(cfg, "value")
    return create_decoder(n, **opts)


def key_decoder_instance(cfg: "SinkConfig") -> Any:
    from lakesink.decoders import create_decoder

    n, opts = decoder_spec(cfg, "key")
    return create_decoder(n, **opts)


# ----------------------------------------------------------------------------- store / Spark

def _reveal(secret: Any) -> str | None:
    return secret.reveal() if secret is not None else None


def store_settings(cfg: "SinkConfig") -> "StoreSettings":
    """Object-store settings (Confluent keys: s3.bucket.name, store.url, s3.region, ...)."""
    from lakesink.store import StoreSettings

    return StoreSettings(
        bucket=cfg.s3_bucket_name,
        endpoint_url=cfg.endpoint_url,
        region=cfg.s3_region,
        path_style=cfg.s3_path_style_access,
        access_key=_reveal(cfg.aws_access_key_id),
        secret_key=_reveal(cfg.aws_secret_access_key),
        part_size=cfg.s3_part_size,
        part_retries=cfg.s3_part_retries,
        retry_backoff_ms=cfg.s3_retry_backoff_ms,
        sse=cfg.s3_ssea_name or "",
        kms_key_id=cfg.s3_sse_kms_key_id,
        acl=cfg.s3_acl_canned,
    )


def s3_settings(cfg: "SinkConfig") -> "S3Settings | None":
    """S3A settings matching the config's object store, so an ``s3a://`` manifest beside the
    archive uses the same endpoint and credentials. None for a ``file://`` store."""
    from lakesink.spark import S3Settings

    url = cfg.endpoint_url
    if url and url.startswith("file:"):
        return None
    return S3Settings(endpoint_url=url, access_key=_reveal(cfg.aws_access_key_id),
                      secret_key=_reveal(cfg.aws_secret_access_key), region=cfg.s3_region,
                      path_style=cfg.s3_path_style_access)
