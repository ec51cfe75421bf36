"""``SinkConfig``: one typed, validated, frozen sink configuration with Confluent's key names.

Load it with :func:`load_config` from a Java ``.properties`` file, a Kafka Connect JSON
(``{"name": ..., "config": {...}}`` — the name becomes the job name — or the bare config map), YAML
(flat dotted keys, nested maps flattened with dots, or the Connect ``name``/``config`` shape), or a
Python dict via :meth:`SinkConfig.from_dict`. Validation collects every problem and raises one
:class:`~lakesink.errors.ConfigError`.

Confluent S3 sink keys are accepted with Confluent's defaults (spec §1, §1.4, §6; see :data:`lakesink.config.keys.KEYS`).
Differences, on purpose: an unknown ``schema.compatibility`` is an error (Confluent silently uses
NONE; the value is case-sensitive as in Confluent, so ``backward`` is rejected with a hint);
``s3.schema.partition.affix.type`` only supports ``NONE``; ``format.bytearray.separator`` escapes
(``\\n``, ``\\r\\n``, ``\\t``, ``\\uXXXX``) are interpreted.

lakesink's own keys:

============================== ============ ===========================================================
key                            default      meaning
============================== ============ ===========================================================
``name``                       (required)   job name; taken from a Connect JSON's top-level ``name``
``manifest.location``          (required)   Delta manifest: ``s3a://…`` / file path / ``db.table`` (one rule,
                                            :mod:`lakesink.manifest.location`; a relative path is made
                                            absolute against the current directory at load)
``kafka.bootstrap.servers``    (required)   Kafka brokers
``kafka.*``                                 passed through (prefix stripped) to Spark's Kafka source /
                                            confluent-kafka, e.g. ``kafka.security.protocol``; names that
                                            differ are mapped for librdkafka, keys it cannot take are
                                            errors (:mod:`lakesink.config.kafka`)
``kafka.isolation.level``      (see right)  default ``read_committed``, for both readers and the offset
                                            snapshot (``read_uncommitted`` also archives aborted records)
``kafka.reader``               direct       ``direct``: executors read with librdkafka; ``spark``: Spark's
                                            Kafka source; not passed through
``kafka.starting.offsets``     earliest     where a partition with no manifest history starts
                                            (``earliest``/``latest``); not passed through
``schema.registry.url``                     Schema Registry (Confluent API) for wire-format Avro / JSON
                                            Schema
``schema.registry.*``                       basic auth (``basic.auth.user.info``, a secret;
                                            ``basic.auth.credentials.source``), PEM TLS files, client
                                            timeout/retries: :mod:`lakesink.config.schema_registry`, which also
                                            reads the Connect forms (``value.converter.schema.registry.url`` …)
``value.subject.name.strategy`` TopicName…  ``key.subject.name.strategy`` too: Topic/Record/TopicRecordNameStrategy
``value.decoder``              by format    ``avro``/``json``/``bytes``/``string``/``json_schema``/``protobuf``; default avro
                                            for avro/parquet, json for json, bytes for bytearray/blockgzip (a
                                            known ``value.converter`` class sets it when unset)
``key.decoder``                bytes        same choices, for keys
``value.schema``                            inline Avro schema JSON, or a file path (raw Avro values)
``blockgzip.block.size``       67108864     Block-GZIP member size (uncompressed bytes)
``blockgzip.compression``      gzip         ``gzip``/``bzip2``
``batch.max.records``          -1           max records per Kafka partition per batch (-1 unlimited)
``offsets.on.data.loss``       fail         ``fail``/``skip`` when retention deleted unarchived offsets
``transforms.sql``                          a DuckDB query or filter over each record batch (lakesink.transforms)
``transforms.python``                       ``package.module:function`` of one record (lakesink.transforms)
``metrics.location``           by manifest  the per-batch metrics table; ``<manifest.location>_metrics``, ``none``
============================== ============ ===========================================================

Kafka Connect framework keys (``connector.class``, ``tasks.max``, ``key.converter*``,
``value.converter*``, ``header.converter*``, ``errors.*``, ``transforms*``, ``predicates*``) and Confluent S3
sink keys lakesink does not implement are accepted and listed in :attr:`SinkConfig.ignored_keys` with a
reason. Connect client overrides (``consumer.override.*``, ``producer.override.*``, ``admin.override.*``) are
applied as ``kafka.*`` or listed as ignored one by one; a security setting (``security.protocol``, ``sasl.*``,
``ssl.*``) is always applied or refused, never ignored (:mod:`lakesink.config.overrides`). A layout that puts
archive objects inside the manifest or metrics table's directory is refused (:mod:`lakesink.config.layout`).
Secrets (``aws.*`` credentials, ``*password*``, ``*secret*``, ``*jaas*``, user info in
URLs…) never appear in ``repr``, errors or :meth:`SinkConfig.as_dict` (``redact=True``).
Config provider references in values (``${file:/path:key}``, ``${directory:/dir:file}``, ``${env:VAR}``, as in
Kafka Connect) are resolved at load (:mod:`~lakesink.config.providers`); what they resolve to is a secret too.

Modules: :mod:`~lakesink.config.parse` (reading sources), :mod:`~lakesink.config.keys` (the key table,
ignored keys, secrets), :mod:`~lakesink.config.model` (:class:`SinkConfig`, :class:`Secret`),
:mod:`~lakesink.config.validate` (one validator per section), :mod:`~lakesink.config.overrides` (Connect client
overrides), :mod:`~lakesink.config.layout` (table locations, objects outside the tables),
:mod:`~lakesink.config.schema_registry`
(the registry keys, :class:`~lakesink.config.schema_registry.RegistryConfig`). Components are built from a config by
:mod:`lakesink.wiring` only.
"""
from __future__ import annotations

from lakesink.config.model import Secret, SinkConfig, load_config
from lakesink.config.parse import flatten, parse_properties

__all__ = ["Secret", "SinkConfig", "load_config", "parse_properties", "flatten"]
