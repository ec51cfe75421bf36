"""The Schema Registry client: schemas by id and their subject/version, cached once per process.

The one place lakesink talks to a Schema Registry (Confluent's, or a compatible one such as Apicurio's
``/apis/ccompat/v7``), through confluent-kafka's ``SchemaRegistryClient``. Decoders
(:mod:`lakesink.decoders`) ask :func:`shared_client` for the :class:`RegistryClient` of their
:class:`RegistrySettings` (built from a config by :func:`lakesink.wiring.registry_settings`) and call:

* :meth:`RegistryClient.schema` — ``GET /schemas/ids/{id}``: the schema text and type;
* :meth:`RegistryClient.subject_version` — ``GET /schemas/ids/{id}/versions``: the version of the id under
  a subject (the manifest's ``schema_subject``/``schema_version``); registries without that endpoint, and
  confluent-kafka's ``mock://`` client, are asked ``POST /subjects/{subject}`` (lookup) instead.

Each answer is cached per schema id (per id and subject for a lookup) for the life of the process, so an
executor's Python worker asks at most once per id however many tasks and decoders it runs (the versions of an
id are asked once more for a subject they do not list yet, then that answer is kept too). Failures:
an unknown id (error 40403) is :class:`~lakesink.errors.SchemaNotFoundError` (decoders turn it into a
DecodeError naming the record); 401/403 is :class:`~lakesink.errors.RegistryAuthError` (one line, never the
secret); a registry that stays unreachable or answers 408/429/5xx after the client's bounded retries
(``max_retries`` with jittered exponential backoff, ``timeout_s`` per request) is
:class:`~lakesink.errors.RegistryError` naming the id and the URL (credentials removed).
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from lakesink.errors import RegistryAuthError, RegistryError, SchemaNotFoundError

__all__ = ["STRATEGIES", "STRATEGY_ALIASES", "canonical_strategy", "subject_name", "RegistrySettings",
           "RegisteredSchema", "RegistryClient", "shared_client", "shared_registry_client", "redact_url"]

#: Subject name strategies, short names (Confluent's class names in :data:`STRATEGY_ALIASES`).
STRATEGIES: tuple[str, ...] = ("topic", "record", "topic_record")
_SUBJECT = "io.confluent.kafka.serializers.subject."
#: Spelling → short name; matched exactly, then lower-cased.
STRATEGY_ALIASES: dict[str, str] = {
    _SUBJECT + "TopicNameStrategy": "topic",
    _SUBJECT + "RecordNameStrategy": "record",
    _SUBJECT + "TopicRecordNameStrategy": "topic_record",
    "topicnamestrategy": "topic",
    "recordnamestrategy": "record",
    "topicrecordnamestrategy": "topic_record",
    "topic_name": "topic",
    "record_name": "record",
    "topic_record_name": "topic_record",
}


def canonical_strategy(name: Any) -> str | None:
    """``topic``/``record``/``topic_record`` for a short name or a Confluent class name, else None."""
    if not isinstance(name, str):
        return None
    for candidate in (name.strip(), name.strip().lower()):
        if candidate in STRATEGIES:
            return candidate
        if candidate in STRATEGY_ALIASES:
            return STRATEGY_ALIASES[candidate]
    return None


def subject_name(strategy: str, topic: str, record_name: str | None, is_key: bool = False) -> str:
    """The subject a Confluent serializer registers under: ``<topic>-value`` (TopicNameStrategy),
    ``<record name>`` (RecordNameStrategy), ``<topic>-<record name>`` (TopicRecordNameStrategy). Without a
    record name (a primitive schema) the record strategies fall back to the topic's subject."""
    if strategy == "record" and record_name:
        return record_name
    if strategy == "topic_record" and record_name:
        return f"{topic}-{record_name}"
    return f"{topic}-{'key' if is_key else 'value'}"


def redact_url(url: str) -> str:
    """``url`` without user info (``https://user:pw@host`` → ``https://******@host``)."""
    return re.sub(r"(?<=://)[^@/\s]+@", "******@", url)


# ---------------------------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class RegistrySettings:
    """How to reach one Schema Registry (what confluent-kafka's ``SchemaRegistryClient`` is given).

    ``user_info`` (``user:password``), ``ssl_key_password`` and ``extra`` (other client settings such as
    ``bearer.auth.*``) may hold secrets: they are left out of ``repr`` and every message."""

    url: str
    user_info: str | None = field(default=None, repr=False)
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    timeout_s: float = 10.0
    max_retries: int = 3
    retries_wait_ms: int = 500
    retries_max_wait_ms: int = 5000
    extra: tuple[tuple[str, Any], ...] = field(default=(), repr=False)

    @property
    def shown_url(self) -> str:
        """The URL as messages show it (user info masked)."""
        return redact_url(self.url)

    def __repr__(self) -> str:
        auth = ", user_info=******" if self.user_info is not None else ""
        tls = "".join(f", {k}={v!r}" for k, v in (("ssl_ca_location", self.ssl_ca_location),
                                                  ("ssl_certificate_location", self.ssl_certificate_location),
                                                  ("ssl_key_location", self.ssl_key_location)) if v)
        return f"RegistrySettings({self.shown_url!r}{auth}{tls}, timeout_s={self.timeout_s}, " \
               f"max_retries={self.max_retries})"

    def client_config(self) -> dict[str, Any]:
        """The ``SchemaRegistryClient`` configuration (secrets revealed: hand it to the client only)."""
        conf: dict[str, Any] = {"url": self.url, "timeout": self.timeout_s, "max.retries": self.max_retries,
                                "retries.wait.ms": self.retries_wait_ms,
                                "retries.max.wait.ms": self.retries_max_wait_ms}
        if self.user_info is not None:
            conf["basic.auth.user.info"] = self.user_info
        for key, value in (("ssl.ca.location", self.ssl_ca_location),
                           ("ssl.certificate.location", self.ssl_certificate_location),
                           ("ssl.key.location", self.ssl_key_location),
                           ("ssl.key.password", self.ssl_key_password)):
            if value is not None:
                conf[key] = value
        conf.update(dict(self.extra))
        return conf


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it under one id."""

    id: int
    schema_type: str                 # AVRO | JSON | PROTOBUF
    text: str
    references: tuple[tuple[str, str, int], ...] = ()  # (name, subject, version)


# ---------------------------------------------------------------------------------------------- client

_CLIENTS: dict[Any, Any] = {}
_SHARED: dict[RegistrySettings, "RegistryClient"] = {}
_LOCK = threading.Lock()


def shared_registry_client(url: str, config: dict | None = None) -> Any:
    """confluent-kafka's ``SchemaRegistryClient`` for ``url``, one per (url, config) per process. A
    ``mock://`` URL gives its in-memory mock, one per URL whatever the config, so a test that registers
    schemas in ``shared_registry_client(url)`` is seen by every decoder of that URL."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    mock = url.startswith("mock://")
    key = url if mock else (url, tuple(sorted((config or {}).items())))
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            conf = {"url": url} if mock else {"url": url, **(config or {})}
            try:
                client = _CLIENTS[key] = SchemaRegistryClient.new_client(conf)
            except (ValueError, TypeError) as e:
                raise RegistryError(f"Schema Registry client for {redact_url(url)}: {e}") from None
        return client


def shared_client(settings: RegistrySettings) -> "RegistryClient":
    """The process-wide :class:`RegistryClient` of ``settings`` (its caches are shared by every decoder)."""
    with _LOCK:
        hit = _SHARED.get(settings)
    if hit is not None:
        return hit
    conf = settings.client_config()
    conf.pop("url")
    client = RegistryClient(shared_registry_client(settings.url, conf), settings.shown_url)
    with _LOCK:
        return _SHARED.setdefault(settings, client)


class RegistryClient:
    """Schemas by id and subject/version by id, each asked once and cached (thread-safe).

    ``client`` is a confluent-kafka ``SchemaRegistryClient`` (or its mock); ``shown_url`` is the
    credential-free URL messages name."""

    def __init__(self, client: Any, shown_url: str = "the Schema Registry"):
        self.client = client
        self.shown_url = shown_url
        self._schemas: dict[int, RegisteredSchema] = {}
        self._versions: dict[int, tuple[tuple[str, int], ...] | None] = {}
        self._lookups: dict[tuple[int, str], int | None] = {}
        self._lock = threading.Lock()
        self._mock = type(client).__name__ == "MockSchemaRegistryClient"

    # -- schemas

    def schema(self, schema_id: int) -> RegisteredSchema:
        """The schema registered under ``schema_id`` (one ``GET /schemas/ids/{id}`` per id per process).
        Raises SchemaNotFoundError (unknown id), RegistryAuthError, RegistryError."""
        hit = self._schemas.get(schema_id)
        if hit is not None:
            return hit
        with self._lock:
            hit = self._schemas.get(schema_id)
            if hit is None:
                s = self._call(lambda: self.client.get_schema(schema_id), f"fetching schema id {schema_id}",
                               schema_id, by_id=True)
                refs = tuple((r.name, r.subject, r.version) for r in (s.references or ()))
                hit = self._schemas[schema_id] = RegisteredSchema(
                    schema_id, (s.schema_type or "AVRO").upper(), s.schema_str, refs)
        return hit

    def versions(self, schema_id: int) -> tuple[tuple[str, int], ...] | None:
        """Every (subject, version) ``schema_id`` is registered under (one ``GET /schemas/ids/{id}/versions``
        per id per process); None when the registry does not offer that endpoint."""
        if schema_id in self._versions:
            return self._versions[schema_id]
        with self._lock:
            if schema_id not in self._versions:
                self._versions[schema_id] = None if self._mock else self._fetch_versions(schema_id)
            return self._versions[schema_id]

    def _fetch_versions(self, schema_id: int) -> tuple[tuple[str, int], ...] | None:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        what = f"fetching the subjects/versions of schema id {schema_id}"
        try:
            pairs = self._call(lambda: self.client.get_schema_versions(schema_id), what, schema_id,
                               passthrough=SchemaRegistryError)
        except SchemaRegistryError as e:
            if e.http_status_code == 404 and e.error_code != 40403:  # no such endpoint (older registries)
                return None
            raise self._translate(e, what, schema_id) from None
        return tuple((p.subject, int(p.version)) for p in pairs if p.subject and p.version is not None)

    def subject_version(self, schema_id: int, subject: str) -> int | None:
        """The version of ``schema_id`` under ``subject``, None when it is not registered there.

        A subject missing from the cached versions of the id is asked once more (the same schema may have
        been registered under it since: registries give equal schemas one id across subjects); the answer
        for that (id, subject) is then kept."""
        key = (schema_id, subject)
        if key in self._lookups:
            return self._lookups[key]
        pairs = self.versions(schema_id)
        if pairs is not None:
            found = next((v for s, v in pairs if s == subject), None)
            if found is None:
                with self._lock:
                    pairs = self._versions[schema_id] = self._fetch_versions(schema_id) or pairs
                    found = self._lookups[key] = next((v for s, v in pairs if s == subject), None)
            return found
        from confluent_kafka.schema_registry import Schema
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        reg = self.schema(schema_id)
        schema = Schema(reg.text, reg.schema_type)
        what = f"looking up schema id {schema_id} under subject {subject!r}"
        try:
            found = self._call(lambda: self.client.lookup_schema(subject, schema), what, schema_id,
                               passthrough=SchemaRegistryError)
            version = int(found.version) if found.version is not None else None
        except SchemaRegistryError as e:
            if e.http_status_code != 404:
                raise self._translate(e, what, schema_id) from None
            version = None  # subject unknown (40401) or schema not under it (40403)
        with self._lock:
            self._lookups[key] = version
        return version

    def subject_schemas(self, subject: str) -> list[tuple[int, RegisteredSchema]]:
        """Every (version, schema) registered under ``subject``, oldest first; empty when the subject is unknown
        (error 40401). Not cached: a schema check wants the registry's current answer. Raises RegistryAuthError,
        RegistryError."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        what = f"listing the versions of subject {subject!r}"
        try:
            versions = self._call(lambda: self.client.get_versions(subject), what, -1, passthrough=SchemaRegistryError)
        except SchemaRegistryError as e:
            if e.http_status_code == 404:
                return []
            raise self._translate(e, what, -1) from None
        out = []
        for v in sorted(int(x) for x in versions):
            r = self._call(lambda v=v: self.client.get_version(subject, v), f"fetching version {v} of {subject!r}", -1)
            refs = tuple((x.name, x.subject, x.version) for x in (r.schema.references or ()))
            out.append((v, RegisteredSchema(int(r.schema_id), (r.schema.schema_type or "AVRO").upper(),
                                            r.schema.schema_str, refs)))
        return out

    # -- errors

    def _call(self, fn, what: str, schema_id: int, passthrough: type | tuple = (), by_id: bool = False):
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return fn()
        except passthrough:
            raise
        except SchemaRegistryError as e:
            raise self._translate(e, what, schema_id, by_id) from None
        except Exception as e:  # connection refused, DNS, timeouts, TLS: after the client's retries
            raise RegistryError(f"Schema Registry at {self.shown_url} unreachable {what}: "
                                f"{type(e).__name__}: {_scrub(str(e))}") from None

    def _translate(self, e: Any, what: str, schema_id: int, by_id: bool = False) -> RegistryError:
        """RegistryAuthError for 401/403; SchemaNotFoundError for a 404 of ``GET /schemas/ids/{id}``
        (``by_id``); else RegistryError with the status, the registry's error code and message."""
        status, code = e.http_status_code, e.error_code
        if status in (401, 403):
            return RegistryAuthError(f"Schema Registry at {self.shown_url} refused the credentials (HTTP {status}) "
                                     f"{what}: check schema.registry.basic.auth.user.info / "
                                     f"basic.auth.credentials.source")
        if status == 404 and by_id:
            return SchemaNotFoundError(schema_id, f"schema id {schema_id} not found in the Schema Registry at "
                                                  f"{self.shown_url}")
        msg = _scrub(str(getattr(e, "error_message", "") or e))
        return RegistryError(f"Schema Registry at {self.shown_url} answered HTTP {status} (error {code}) "
                             f"{what}: {msg}")


def _scrub(text: str) -> str:
    """One line, no user info in any URL it mentions."""
    return redact_url(" ".join(str(text).split()))[:300]

