"""The config's ``kafka.*`` keys (prefix stripped) for librdkafka: the driver's admin client and the
executors' direct reader use librdkafka, Spark's Kafka source the Java client, so one config must
mean the same to both.

:func:`librdkafka_options` maps the names that differ (``sasl.jaas.config`` with a Plain/SCRAM login
module → ``sasl.username``/``sasl.password``, ``fetch.max.wait.ms`` → ``fetch.wait.max.ms``) and
reports every key librdkafka cannot take (JKS key/trust stores, Java-only settings, settings the
reader owns), naming the key and what librdkafka takes instead. :func:`check_kafka_options` also
asks librdkafka itself whether it accepts every remaining key, so a bad key fails at config load,
not in an executor. Messages never carry a secret's value.
"""
from __future__ import annotations

import re
from typing import Mapping

__all__ = ["DEFAULT_ISOLATION_LEVEL", "READER_OWNED", "CONSUMER_ONLY", "librdkafka_options", "check_kafka_options",
           "refusal"]

#: ``kafka.isolation.level`` when unset, for both readers and the admin client's offset snapshot
DEFAULT_ISOLATION_LEVEL = "read_committed"

#: consumer settings the direct reader sets itself (and Spark's source refuses too)
READER_OWNED = ("enable.auto.commit", "auto.offset.reset", "enable.partition.eof", "key.deserializer",
                "value.deserializer", "auto.commit.interval.ms", "enable.auto.offset.store")

#: librdkafka consumer properties the job's ``kafka.*`` keys may hold: a producer or an admin client would warn
#: about each (CONFWARN), so the clients that are not consumers drop them
CONSUMER_ONLY = ("isolation.level", "enable.partition.eof", "auto.offset.reset", "group.id", "group.instance.id",
                 "enable.auto.commit", "enable.auto.offset.store", "auto.commit.interval.ms", "session.timeout.ms",
                 "heartbeat.interval.ms", "max.poll.interval.ms", "partition.assignment.strategy", "check.crcs",
                 "queued.min.messages", "queued.max.messages.kbytes", "fetch.wait.max.ms", "fetch.min.bytes",
                 "fetch.max.bytes", "fetch.message.max.bytes", "fetch.error.backoff.ms", "max.partition.fetch.bytes")

_RENAMED = {"fetch.max.wait.ms": "fetch.wait.max.ms"}
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

_NOT_IN_LIBRDKAFKA = {
    "ssl.truststore.location": "librdkafka reads no Java trust store: convert it to PEM and set "
                               "kafka.ssl.ca.location (both readers then need that file)",
    "ssl.truststore.password": "librdkafka reads no Java trust store (set kafka.ssl.ca.location to a PEM file)",
    "ssl.truststore.type": "librdkafka reads no Java trust store (set kafka.ssl.ca.location to a PEM file)",
    "ssl.keystore.type": "librdkafka takes a PKCS#12 kafka.ssl.keystore.location (no type key), or PEM "
                         "kafka.ssl.certificate.location + kafka.ssl.key.location",
    "ssl.endpoint.identification.algorithm": None,  # same name in librdkafka (https|none)
    "max.poll.records": "a Java consumer setting; librdkafka has no equivalent (remove it)",
    "default.api.timeout.ms": "a Java client setting; librdkafka has no equivalent (remove it)",
    "request.timeout.ms": "a Java client setting; librdkafka uses socket.timeout.ms",
    "sasl.login.callback.handler.class": "a Java class; librdkafka takes sasl.oauthbearer.* keys",
    "sasl.client.callback.handler.class": "a Java class; librdkafka cannot load it",
}

_JAAS = re.compile(r"^\s*([\w.$]+)\s+(required|optional|requisite|sufficient)\s*(.*?);?\s*$", re.S)
_JAAS_OPT = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _jaas(value: str, mechanism: str | None) -> tuple[dict[str, str], str | None]:
    """``sasl.jaas.config`` → (librdkafka keys, problem). The value is a secret: never quoted back."""
    m = _JAAS.match(value)
    if not m:
        return {}, "is not a JAAS login module line (`<LoginModule class> required username=\"…\" password=\"…\";`)"
    module = m.group(1)
    opts = {o.group(1): o.group(2).replace('\\"', '"') if o.group(2) is not None else o.group(3)
            for o in _JAAS_OPT.finditer(m.group(3))}
    if module not in (_PLAIN, _SCRAM):
        return {}, (f"login module {module} has no librdkafka equivalent here: librdkafka takes only "
                    f"PlainLoginModule/ScramLoginModule credentials from it (use kafka.sasl.oauthbearer.* or "
                    f"kafka.sasl.kerberos.* keys for OAUTHBEARER or GSSAPI)")
    if "username" not in opts or "password" not in opts:
        return {}, "needs username=\"…\" and password=\"…\" options (librdkafka: sasl.username / sasl.password)"
    out = {"sasl.username": opts["username"], "sasl.password": opts["password"]}
    if module == _PLAIN:
        if mechanism not in (None, "PLAIN"):
            return {}, f"PlainLoginModule needs kafka.sasl.mechanism=PLAIN, not {mechanism}"
        out["sasl.mechanism"] = "PLAIN"
    elif mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return {}, "ScramLoginModule needs kafka.sasl.mechanism=SCRAM-SHA-256 or SCRAM-SHA-512"
    return out, None


def librdkafka_options(options: Mapping[str, str]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """(librdkafka config, problems as (``kafka.`` key, message)) from the ``kafka.*`` keys without the prefix.

    ``isolation.level`` defaults to :data:`DEFAULT_ISOLATION_LEVEL`."""
    out: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    mechanism = options.get("sasl.mechanism")
    for key, value in options.items():
        value = str(value)
        if key in READER_OWNED:
            problems.append((f"kafka.{key}", "is set by lakesink's readers (offsets come from the manifest, "
                                             "nothing is committed to Kafka): remove it"))
        elif key == "sasl.jaas.config":
            mapped, problem = _jaas(value, mechanism)
            if problem:
                problems.append((f"kafka.{key}", problem))
            out.update(mapped)
        elif key in _NOT_IN_LIBRDKAFKA and _NOT_IN_LIBRDKAFKA[key] is not None:
            problems.append((f"kafka.{key}", f"librdkafka cannot take it: {_NOT_IN_LIBRDKAFKA[key]}"))
        elif key in ("ssl.keystore.location",) and (value.lower().endswith(".jks")
                                                     or options.get("ssl.keystore.type", "").upper() == "JKS"):
            problems.append((f"kafka.{key}", "is a JKS key store, which librdkafka cannot read: use a PKCS#12 "
                                             "file here, or PEM kafka.ssl.certificate.location + "
                                             "kafka.ssl.key.location"))
        elif key == "security.protocol" and value.upper() not in _PROTOCOLS:
            # not asked of librdkafka (the probe leaves it out so nothing connects): checked here
            problems.append((f"kafka.{key}", "must be one of " + ", ".join(_PROTOCOLS)))
        elif key in ("isolation.level",) and value not in ("read_committed", "read_uncommitted"):
            problems.append((f"kafka.{key}", "must be read_committed or read_uncommitted"))
        else:
            out[_RENAMED.get(key, key)] = value
    out.setdefault("isolation.level", DEFAULT_ISOLATION_LEVEL)
    return out, problems


def _librdkafka_refuses(conf: Mapping[str, str]) -> str | None:
    """librdkafka's own complaint about ``conf`` (a consumer that never connects), or None."""
    from confluent_kafka import Consumer, KafkaException

    try:
        Consumer({**conf, "group.id": "lakesink-config-check"}).close()
    except KafkaException as e:
        err = e.args[0] if e.args else e
        return err.str() if hasattr(err, "str") else str(err)
    except (TypeError, ValueError) as e:
        return str(e)
    return None


def check_kafka_options(options: Mapping[str, str], secret=lambda key: False) -> tuple[dict[str, str],
                                                                                       list[tuple[str, str]]]:
    """:func:`librdkafka_options`, plus librdkafka's verdict on each remaining key (asked without
    ``bootstrap.servers``/``security.protocol``, so nothing connects and no key file is opened).
    ``secret(key)`` says whose values must not appear in a message."""
    conf, problems = librdkafka_options(options)
    probe = {k: v for k, v in conf.items() if k not in ("bootstrap.servers", "security.protocol")}
    if not probe or _librdkafka_refuses({**probe, "log_level": "0"}) is None:
        return conf, problems
    reverse = {v: k for k, v in _RENAMED.items()}
    for key, value in probe.items():
        msg = _librdkafka_refuses({key: value, "log_level": "0"})
        if msg is None:
            continue
        if secret(key) or secret(reverse.get(key, key)):
            msg = msg.replace(value, "******")
        name = "sasl.jaas.config" if key in ("sasl.username", "sasl.password") and "sasl.jaas.config" in options \
            else reverse.get(key, key)
        problems.append((f"kafka.{name}", f"librdkafka refuses it: {msg}"))
    return conf, problems


def refusal(key: str, value: str) -> str | None:
    """Why lakesink's Kafka clients cannot take ``kafka.<key>=<value>`` on its own (the message a ``kafka.*`` key
    would get), or None when they can. Nothing connects (see :func:`check_kafka_options`)."""
    conf, problems = librdkafka_options({key: str(value)})
    if problems:
        return problems[0][1]
    if key != "isolation.level":
        conf.pop("isolation.level", None)  # librdkafka_options' default, not the key asked about
    probe = {k: v for k, v in conf.items() if k not in ("bootstrap.servers", "security.protocol")}
    msg = _librdkafka_refuses({**probe, "log_level": "0"}) if probe else None
    return f"librdkafka refuses it: {msg}" if msg else None
