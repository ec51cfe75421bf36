"""Schema Registry settings: the ``schema.registry.*`` keys, the subject name strategies and the forms Kafka
Connect users paste with a converter prefix, parsed once into a :class:`RegistryConfig`.

Keys (Confluent's names; ``schema.registry.url`` is in the key table, the rest arrive here with the
``schema.registry.`` prefix stripped):

========================================================= ================================================
``schema.registry.url``                                   one URL or a comma-separated list (http/https)
``schema.registry.basic.auth.user.info``                  ``user:password`` (a secret: always masked)
``schema.registry.basic.auth.credentials.source``         ``USER_INFO`` (the key above) or ``URL``
                                                          (``https://user:pw@host``); default USER_INFO when
                                                          user info is set, else URL. SASL_INHERIT: refused
``schema.registry.ssl.ca.location``                       PEM CA file/dir (confluent-kafka ``ssl.ca.location``)
``schema.registry.ssl.certificate.location``              PEM client certificate
``schema.registry.ssl.key.location``                      PEM client key (needs the certificate)
``schema.registry.ssl.key.password``                      its password (a secret)
``schema.registry.timeout`` / ``max.retries`` /           client request timeout (s, default 10) and bounded
``retries.wait.ms`` / ``retries.max.wait.ms``             retries (3, 500 ms jittered backoff, 5000 ms cap)
``schema.registry.proxy``, ``schema.registry.bearer.auth.*`` passed to the client as they are
``value.subject.name.strategy`` / ``key.subject.name.strategy`` ``TopicNameStrategy`` (default) |
                                                          ``RecordNameStrategy`` | ``TopicRecordNameStrategy``
                                                          (or Confluent's full class names, or topic /
                                                          record / topic_record)
========================================================= ================================================

Java key/trust stores (``schema.registry.ssl.truststore.*``, ``ssl.keystore.*``) cannot be read by the Python
client: they are refused with a hint to give PEM files. Connect forms are taken as the keys above:
``value.converter.schema.registry.url`` / ``key.converter.…``, ``value.converter.basic.auth.user.info``,
``value.converter.basic.auth.credentials.source``, ``value.converter.schema.registry.ssl.*``,
``value.converter.bearer.auth.*``, ``value.converter.value.subject.name.strategy`` (and the ``key.converter.``
forms); a value that differs from another form of the same key is a problem (one registry per job).
``value.converter`` / ``key.converter`` naming a converter lakesink has a decoder for (AvroConverter,
JsonSchemaConverter, ProtobufConverter, JsonConverter, StringConverter, ByteArrayConverter) set ``value.decoder`` /
``key.decoder`` when those are not given; other ``*.converter.*`` keys stay ignored.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from lakesink import plugins
from lakesink.config.keys import Secret, is_secret
from lakesink.schemas.registry import STRATEGIES, canonical_strategy

__all__ = ["RegistryConfig", "lift_converter_keys", "check_registry", "CLIENT_OPTIONS", "CONVERTER_PREFIXES"]

CONVERTER_PREFIXES = ("value.converter.", "key.converter.")
P = "schema.registry."

#: Pass-through client settings (prefix stripped) → parser; anything else under ``schema.registry.`` that
#: is not a typed key below is a problem (confluent-kafka's client refuses unknown settings).
CLIENT_OPTIONS: dict[str, Callable[[str], Any]] = {
    "timeout": float, "max.retries": int, "retries.wait.ms": int, "retries.max.wait.ms": int,
    "cache.capacity": int, "cache.latest.ttl.sec": int, "proxy": str,
}
_TYPED = ("basic.auth.user.info", "basic.auth.credentials.source", "ssl.ca.location", "ssl.certificate.location",
          "ssl.key.location", "ssl.key.password")
_JAVA_STORES = ("ssl.truststore.", "ssl.keystore.", "ssl.endpoint.identification.algorithm", "ssl.protocol",
                "ssl.enabled.protocols", "ssl.key.store", "ssl.trust.store")


@dataclass(frozen=True)
class RegistryConfig:
    """The parsed Schema Registry settings of a job (``SinkConfig.registry``); secrets are :class:`Secret`."""

    url: str | None = None
    user_info: Secret | None = None
    credentials_source: str = "URL"          # effective: USER_INFO | URL
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: Secret | None = None
    client_options: tuple[tuple[str, Any], ...] = ()   # typed pass-through; secret values wrapped in Secret
    value_subject_name_strategy: str = "topic"
    key_subject_name_strategy: str = "topic"


# ----------------------------------------------------------------------------- converter forms

def _lift_target(prefix: str, inner: str) -> str | None:
    """The canonical key a ``<prefix><inner>`` converter key stands for, None when it stays ignored."""
    if inner == "schema.registry.url" or inner.startswith("schema.registry."):
        return inner
    if inner in ("basic.auth.user.info", "basic.auth.credentials.source") or inner.startswith("bearer.auth."):
        return P + inner
    side = prefix.split(".", 1)[0]  # value | key
    if inner == f"{side}.subject.name.strategy":
        return inner
    return None


def _same(a: Any, b: Any) -> bool:
    return str(a).strip() == str(b).strip()


def lift_converter_keys(flat: Mapping[str, Any], problem: Any) -> dict[str, Any]:
    """``flat`` with the Connect converter forms of registry keys (and known converter classes) moved to the
    keys lakesink reads; a value that disagrees with another form of its key is a problem."""
    out = {str(k).strip(): v for k, v in flat.items()}
    given = dict(out)
    seen: dict[str, tuple[str, Any]] = {}
    for key, value in given.items():
        prefix = next((p for p in CONVERTER_PREFIXES if key.startswith(p)), None)
        target = _lift_target(prefix, key[len(prefix):]) if prefix else None
        if target is None or value is None:
            continue
        del out[key]
        if target in given and given[target] is not None and not _same(given[target], value):
            problem(key, value, f"differs from {target}; a job reads one Schema Registry setting")
        elif target in seen and not _same(seen[target][1], value):
            problem(key, value, f"differs from {seen[target][0]}; a job reads one Schema Registry setting")
        else:
            seen.setdefault(target, (key, value))
            out.setdefault(target, value)
    for conv, dec in (("value.converter", "value.decoder"), ("key.converter", "key.decoder")):
        cls = given.get(conv)
        if cls is None or given.get(dec) not in (None, ""):
            continue
        short = plugins.canonical("decoder", str(cls).strip())
        if short is not None:
            del out[conv]
            out[dec] = short
        else:
            problem.warn(f"{conv}={cls} has no lakesink decoder; set {dec} "
                         f"({', '.join(plugins.names('decoder'))})")
    return out


# ----------------------------------------------------------------------------- validation

def check_registry(url: str | None, options: Mapping[str, str], vals: Mapping[str, Any], value_decoder: str,
                   key_decoder: str, fmt: str, keys_fmt: str, problem: Any) -> RegistryConfig:
    """Validate the registry keys (``options``: ``schema.registry.*`` minus the url, prefix stripped) and the
    decoders' need for a registry; → the job's :class:`RegistryConfig`."""
    opts = dict(options)
    if url:
        for part in url.split(","):
            if not part.strip().startswith(("http://", "https://", "mock://")):
                problem("schema.registry.url", url, "must be http(s)://host:port (a comma-separated list for "
                        "several)")
                break
    user_info = opts.pop("basic.auth.user.info", None)
    if user_info is not None and ":" not in user_info:
        problem(P + "basic.auth.user.info", user_info, "must be user:password")
    source = opts.pop("basic.auth.credentials.source", None)
    url_has_user = bool(url) and "@" in url.split("://", 1)[-1].split("/", 1)[0]
    if source is None:
        source = "USER_INFO" if user_info is not None else "URL"
    else:
        source = source.strip().upper()
        if source == "SASL_INHERIT":
            problem(P + "basic.auth.credentials.source", source,
                    "SASL_INHERIT is not supported; set USER_INFO with schema.registry.basic.auth.user.info")
        elif source not in ("USER_INFO", "URL"):
            problem(P + "basic.auth.credentials.source", source, "must be USER_INFO or URL")
    if source == "USER_INFO":
        if user_info is None:
            problem(P + "basic.auth.credentials.source", source, "USER_INFO needs schema.registry.basic.auth.user.info")
        if url_has_user:
            problem("schema.registry.url", url, "carries user info while basic.auth.credentials.source=USER_INFO; "
                    "give the credentials in one place")
    elif source == "URL" and user_info is not None:
        problem.warn("schema.registry.basic.auth.user.info is ignored: basic.auth.credentials.source=URL takes the "
                     "credentials from schema.registry.url")
        user_info = None

    tls = {k: opts.pop(k, None) for k in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
                                          "ssl.key.password")}
    if (tls["ssl.key.location"] or tls["ssl.key.password"]) and not tls["ssl.certificate.location"]:
        problem(P + "ssl.key.location", tls["ssl.key.location"], "needs schema.registry.ssl.certificate.location")
    for k in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
        if tls[k] and not os.path.exists(tls[k]):
            problem.warn(f"{P}{k} {tls[k]!r} does not exist here (it is read when the job decodes)")

    client: list[tuple[str, Any]] = []
    for k, v in sorted(opts.items()):
        if k in CLIENT_OPTIONS:
            try:
                parsed = CLIENT_OPTIONS[k](v)
            except ValueError:
                problem(P + k, v, f"must be a {CLIENT_OPTIONS[k].__name__}")
                continue
            if isinstance(parsed, (int, float)) and not isinstance(parsed, bool) and parsed < 0:
                problem(P + k, v, "must be >= 0")
                continue
            client.append((k, parsed))
        elif k.startswith("bearer.auth."):
            client.append((k, Secret(v) if is_secret(k) else v))
        elif k.startswith(_JAVA_STORES):
            problem(P + k, v, "Java key/trust stores are not read by lakesink's registry client: give PEM files "
                    "with schema.registry.ssl.ca.location / ssl.certificate.location / ssl.key.location")
        else:
            problem(P + k, v, "is not a Schema Registry client setting lakesink knows (basic.auth.user.info, "
                    "basic.auth.credentials.source, ssl.ca.location, ssl.certificate.location, ssl.key.location, "
                    "ssl.key.password, " + ", ".join(CLIENT_OPTIONS) + ", bearer.auth.*)")

    strategies = {}
    for side in ("value", "key"):
        key = f"{side}.subject.name.strategy"
        raw = vals.get(f"{side}_subject_name_strategy") or "topic"
        short = canonical_strategy(raw)
        if short is None:
            problem(key, raw, "must be TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy "
                    f"(io.confluent.kafka.serializers.subject.<X>, or {', '.join(STRATEGIES)})")
            short = "topic"
        strategies[side] = short

    for side, dec, file_fmt in (("value", value_decoder, fmt), ("key", key_decoder, keys_fmt)):
        if dec == "protobuf":
            if not url:
                problem(f"{side}.decoder", dec, "needs schema.registry.url (Protobuf values name their schema by "
                        "registry id)")
            from lakesink.schemas.protobuf import INSTALL_HINT, available

            if not available():
                problem(f"{side}.decoder", dec, INSTALL_HINT)
        if dec == "json_schema":
            if not url:
                problem(f"{side}.decoder", dec, "needs schema.registry.url (JSON Schema values name their schema "
                        "by registry id)")
            stored = side == "value" or vals.get("store_kafka_keys")
            if stored and file_fmt != "json":
                fkey = "format.class" if side == "value" else "keys.format.class"
                problem(f"{side}.decoder", dec, f"JSON Schema {side}s are archived with {fkey}=json only "
                        f"(lakesink does not convert JSON Schema to {file_fmt})")

    return RegistryConfig(
        url=url or None, user_info=Secret(user_info) if user_info is not None else None,
        credentials_source=source if source in ("USER_INFO", "URL") else "URL",
        ssl_ca_location=tls["ssl.ca.location"], ssl_certificate_location=tls["ssl.certificate.location"],
        ssl_key_location=tls["ssl.key.location"],
        ssl_key_password=Secret(tls["ssl.key.password"]) if tls["ssl.key.password"] is not None else None,
        client_options=tuple(client), value_subject_name_strategy=strategies["value"],
        key_subject_name_strategy=strategies["key"],
    )
