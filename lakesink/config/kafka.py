"""The config's ``kafka.*`` keys (prefix stripped) for librdkafka: the driver's admin client and the
executors' direct reader use librdkafka, Spark's Kafka source the Java client, so one config must
mean the same to both.

:func:`librdkafka_options` maps the names that differ (``sasl.jaas.config`` with a Plain/SCRAM login
module → ``sasl.username``/``sasl.password``, ``fetch.max.wait.ms`` → ``fetch.wait.max.ms``) and
reports every key librdkafka cannot take (JKS key stores, Java-only settings, settings the
reader owns), naming the key and what librdkafka takes instead. :func:`check_kafka_options` also
asks librdkafka itself whether it accepts every remaining key, so a bad key fails at config load,
not in an executor. Messages never carry a secret's value.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from typing import Any, Mapping

__all__ = ["DEFAULT_ISOLATION_LEVEL", "READER_OWNED", "CONSUMER_ONLY", "librdkafka_options", "check_kafka_options",
           "refusal", "java_options", "store_type"]

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


_TRUSTSTORE = ("ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type")
_STORE_TYPES = ("JKS", "PKCS12", "PEM")
_JKS_MAGIC = b"\xfe\xed\xfe\xed"


def store_type(location: str, declared: str | None) -> str:
    """A Java key/trust store's type: the declared ``ssl.*store.type``, else what the file holds (PEM text, JKS
    magic, else PKCS#12), else what its name says (``.jks``: JKS, ``.pem``/``.crt``: PEM, otherwise PKCS12)."""
    if declared:
        return declared.upper()
    try:
        with open(location, "rb") as f:
            head = f.read(4)
    except OSError:
        head = b""
    if head.startswith(b"----") or location.lower().endswith((".pem", ".crt")):
        return "PEM"
    if head == _JKS_MAGIC or location.lower().endswith(".jks"):
        return "JKS"
    return "PKCS12"


def _truststore(options: Mapping[str, str]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Connect's ``ssl.truststore.*`` keys as librdkafka takes a CA: a PEM file is ``ssl.ca.location``; a PKCS#12
    trust store is read (with ``cryptography``) into ``ssl.ca.pem``; so is a JKS one, through the JDK's ``keytool``
    (:func:`jks_certificates`)."""
    location = options.get("ssl.truststore.location")
    declared = options.get("ssl.truststore.type")
    if declared is not None and str(declared).upper() not in _STORE_TYPES:
        return {}, [("kafka.ssl.truststore.type", "must be JKS, PKCS12 or PEM")]
    if not location:
        return {}, [(f"kafka.{k}", "is set without kafka.ssl.truststore.location (a PEM CA file: "
                                   "kafka.ssl.ca.location)") for k in _TRUSTSTORE if k in options]
    key = "kafka.ssl.truststore.location"
    if options.get("ssl.ca.location") or options.get("ssl.ca.pem"):
        return {}, [(key, "and kafka.ssl.ca.location both name the CA: set one")]
    kind = store_type(str(location), declared)
    if kind == "PEM":
        return {"ssl.ca.location": str(location)}, []
    if kind == "JKS":
        try:
            return {"ssl.ca.pem": jks_certificates(str(location), options.get("ssl.truststore.password"))}, []
        except ValueError as e:
            return {}, [(key, str(e))]
    try:
        from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

        with open(location, "rb") as f:
            data = f.read()
        password = options.get("ssl.truststore.password")
        store = pkcs12.load_pkcs12(data, str(password).encode() if password else None)
    except ImportError:
        return {}, [(key, "is a PKCS12 trust store: reading it for librdkafka needs the cryptography package "
                          "(pip install cryptography), or set a PEM kafka.ssl.ca.location")]
    except OSError as e:
        return {}, [(key, f"cannot be read: {e.strerror or e} (a trust store file on the driver and every "
                          f"executor; or a PEM kafka.ssl.ca.location)")]
    except ValueError:
        return {}, [(key, "is not a PKCS12 trust store that kafka.ssl.truststore.password opens (wrong password, "
                          "or set kafka.ssl.truststore.type)")]
    certs = [c.certificate for c in store.additional_certs] + ([store.cert.certificate] if store.cert else [])
    if not certs:
        return {}, [(key, "holds no certificate")]
    return {"ssl.ca.pem": "".join(c.public_bytes(Encoding.PEM).decode("ascii") for c in certs)}, []


def jks_certificates(location: str, password: Any = None) -> str:
    """The trusted certificates of a JKS trust store as PEM text, for librdkafka (which reads no JKS): listed by the
    JDK's ``keytool -list -rfc`` (the password, if any, through the environment, never the command line; it verifies
    the store's integrity). Cached per file state. Raises ValueError with the line to show."""
    try:
        st = os.stat(location)
    except OSError as e:
        raise ValueError(f"cannot be read: {e.strerror or e} (a trust store file on the driver and every "
                         f"executor; or a PEM kafka.ssl.ca.location)") from None
    secret = password.reveal() if hasattr(password, "reveal") else password
    return _jks_pem(location, st.st_mtime_ns, st.st_size, None if secret is None else str(secret))


@functools.lru_cache(maxsize=16)
def _jks_pem(location: str, _mtime: int, _size: int, password: str | None) -> str:
    java_home = os.environ.get("JAVA_HOME")
    keytool = (os.path.join(java_home, "bin", "keytool") if java_home and os.path.exists(
        os.path.join(java_home, "bin", "keytool")) else shutil.which("keytool"))
    if keytool is None:
        raise ValueError("is a JKS trust store: librdkafka reads it through the JDK's keytool, which is not here "
                         "(no JAVA_HOME, no keytool on PATH): install a JDK, or convert it to PKCS12 (keytool "
                         "-importkeystore -deststoretype PKCS12) or a PEM kafka.ssl.ca.location")
    cmd = [keytool, "-list", "-rfc", "-keystore", location, "-storetype", "JKS"]
    env = dict(os.environ)
    if password is not None:
        env["LAKESINK_TRUSTSTORE_PASSWORD"] = password
        cmd += ["-storepass:env", "LAKESINK_TRUSTSTORE_PASSWORD"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ValueError(f"is a JKS trust store that keytool could not list: {e}") from None
    pems = re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", res.stdout, re.S)
    if res.returncode != 0:
        why = next((ln for ln in (res.stdout + res.stderr).splitlines() if "keytool error" in ln), "").strip()
        why = why.removeprefix("keytool error: ").removeprefix("java.io.IOException: ")
        raise ValueError(f"is a JKS trust store keytool cannot open: {why or 'keytool failed'} (wrong "
                         f"kafka.ssl.truststore.password, or not a JKS file)")
    if not pems:
        raise ValueError("is a JKS trust store that holds no certificate")
    return "\n".join(pems) + "\n"


def librdkafka_options(options: Mapping[str, str]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """(librdkafka config, problems as (``kafka.`` key, message)) from the ``kafka.*`` keys without the prefix.

    ``isolation.level`` defaults to :data:`DEFAULT_ISOLATION_LEVEL`. Connect's ``ssl.truststore.*`` keys become
    librdkafka's CA (:func:`store_type`: PEM, PKCS12; JKS is refused); ``ssl.keystore.type`` PKCS12 is librdkafka's
    own ``ssl.keystore.location``, PEM its ``ssl.certificate.location`` + ``ssl.key.location`` (one file)."""
    out: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    mechanism = options.get("sasl.mechanism")
    if any(k in options for k in _TRUSTSTORE):
        ca, trouble = _truststore(options)
        out.update(ca)
        problems += trouble
    keystore_type = store_type(str(options["ssl.keystore.location"]), options.get("ssl.keystore.type")) \
        if options.get("ssl.keystore.location") else str(options.get("ssl.keystore.type") or "").upper()
    for key, value in options.items():
        value = str(value)
        if key in _TRUSTSTORE:
            continue
        if key == "ssl.keystore.type":
            if value.upper() not in _STORE_TYPES:
                problems.append((f"kafka.{key}", "must be JKS, PKCS12 or PEM"))
            elif value.upper() == "JKS":
                problems.append((f"kafka.{key}", "JKS: librdkafka cannot read a JKS key store: use PKCS12 here, or "
                                                 "PEM kafka.ssl.certificate.location + kafka.ssl.key.location"))
            continue  # librdkafka has no type key: PKCS12 is its ssl.keystore.location, PEM is mapped below
        if key == "ssl.keystore.location" and keystore_type == "PEM":
            out.setdefault("ssl.certificate.location", value)
            out.setdefault("ssl.key.location", value)
            continue
        if key == "ssl.keystore.password" and keystore_type == "PEM":
            continue  # a Java PEM key store's password protects nothing librdkafka reads (ssl.key.password does)
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
        elif key in ("ssl.keystore.location",) and keystore_type == "JKS":
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


#: librdkafka names of settings Java spells otherwise (:func:`java_options` maps them), or has no use for
_LIBRDKAFKA_ONLY = ("ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location", "ssl.key.location", "log_level",
                    "fetch.wait.max.ms")


def java_options(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` keys (without the prefix) as Spark's Java Kafka source takes them: Connect's own names pass
    through (``sasl.jaas.config``, ``ssl.truststore.*``, ``ssl.keystore.*``, JKS/PKCS12/PEM), librdkafka's are
    mapped: a PEM ``ssl.ca.location`` file is the trust store (``ssl.truststore.type=PEM``), a PEM client
    certificate and key in one file the key store (``ssl.keystore.type=PEM``); other librdkafka-only keys are left
    out (the Java client would ignore them with a warning)."""
    out = {k: str(v) for k, v in options.items() if k not in _LIBRDKAFKA_ONLY}
    if "fetch.wait.max.ms" in options:
        out.setdefault("fetch.max.wait.ms", str(options["fetch.wait.max.ms"]))
    ca = options.get("ssl.ca.location")
    if ca and "ssl.truststore.location" not in options:
        out.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca)})
    cert, key = options.get("ssl.certificate.location"), options.get("ssl.key.location")
    if (cert or key) and "ssl.keystore.location" not in options:
        if cert and key and key != cert:
            from lakesink.errors import ConfigError, ConfigProblem

            raise ConfigError([ConfigProblem("kafka.ssl.certificate.location", cert, "Spark's Java Kafka client "
                                             "(kafka.reader=spark) takes a PEM client certificate with its key in "
                                             "one file: name that file in kafka.ssl.keystore.location with "
                                             "kafka.ssl.keystore.type=PEM (librdkafka reads it too), or use a "
                                             "PKCS12 kafka.ssl.keystore.location")])
        out.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(cert or key)})
    return out
