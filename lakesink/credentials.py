"""Where S3 credentials come from, and the one place boto3 sessions are built from them.

Modes (``s3.credentials.source``): ``default`` (boto3's chain: env, profile, instance profile / EMR role),
``static`` (``aws.access.key.id`` + ``aws.secret.access.key``), ``session`` (static keys plus
``aws.session.token``), ``uc-service-credential`` (a Databricks Unity Catalog service credential named by
``s3.credentials.uc.name``, resolved with ``databricks.service_credentials.getServiceCredentialsProvider``,
DBR 16.2+). Confluent's ``s3.credentials.provider.class`` is accepted for the common AWS SDK classes and mapped
onto these modes.

Short-lived credentials resolved on the driver are shipped to executors in the task closure
(:class:`ShippedCredentials`, with their expiry); an executor uses them while fresh and re-resolves from the
same source when they are about to expire. Secrets are held in fields with ``repr=False`` and never formatted
into messages.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from lakesink.errors import ConfigError, ConfigProblem, S3CredentialsError

__all__ = ["SOURCES", "PROVIDER_CLASSES", "CredentialSettings", "Credentials", "ShippedCredentials", "boto3_client",
           "source_for_provider_class", "resolve", "boto3_session", "REFRESH_MARGIN_S", "where_looked",
           "missing_credentials", "is_missing_credentials", "require_credentials"]

SOURCES = ("default", "static", "session", "uc-service-credential")

#: AWS SDK (v1 and v2) provider classes users paste from Confluent configs, and the lakesink mode each means.
PROVIDER_CLASSES = {
    "com.amazonaws.auth.DefaultAWSCredentialsProviderChain": "default",
    "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider": "default",
    "com.amazonaws.auth.InstanceProfileCredentialsProvider": "default",
    "software.amazon.awssdk.auth.credentials.InstanceProfileCredentialsProvider": "default",
    "com.amazonaws.auth.EnvironmentVariableCredentialsProvider": "default",
    "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider": "default",
    "com.amazonaws.auth.profile.ProfileCredentialsProvider": "default",
    "software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider": "default",
    "com.amazonaws.auth.ContainerCredentialsProvider": "default",
    "com.amazonaws.auth.AWSStaticCredentialsProvider": "static",
    "software.amazon.awssdk.auth.credentials.StaticCredentialsProvider": "static",
    "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider": "static",
    "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider": "session",
}

def _error(key: str, msg: str, value: str | None = None) -> ConfigError:
    return ConfigError([ConfigProblem(key, value, msg)])


#: Executors re-resolve shipped credentials this long before they expire.
REFRESH_MARGIN_S = 300.0


def source_for_provider_class(name: str) -> str:
    """The lakesink mode for a Confluent ``s3.credentials.provider.class``; ConfigError naming the key otherwise."""
    try:
        return PROVIDER_CLASSES[name.strip()]
    except KeyError:
        raise _error("s3.credentials.provider.class",
                     "is not supported (a Java class cannot run in lakesink); use one of the AWS SDK "
                     f"default/static classes or s3.credentials.source={'|'.join(SOURCES)}", name) from None


@dataclass(frozen=True)
class CredentialSettings:
    """The validated credentials setting. Secrets are hidden from ``repr``."""
    source: str = "default"
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    uc_name: str | None = None
    profile: str | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise _error("s3.credentials.source", f"is not one of {', '.join(SOURCES)}", self.source)
        keys = self.access_key is not None, self.secret_key is not None
        if self.source in ("static", "session") and not all(keys):
            raise _error("aws.access.key.id", f"s3.credentials.source={self.source} needs "
                         "aws.access.key.id and aws.secret.access.key")
        if self.source == "session" and not self.session_token:
            raise _error("aws.session.token", "s3.credentials.source=session needs aws.session.token")
        if self.source == "static" and self.session_token:
            raise _error("aws.session.token", "set s3.credentials.source=session to use a session token")
        if self.source == "uc-service-credential" and not self.uc_name:
            raise _error("s3.credentials.uc.name", "s3.credentials.source=uc-service-credential needs "
                         "the Unity Catalog service credential's name")
        if self.source in ("default", "uc-service-credential") and any(keys):
            raise _error("aws.access.key.id", f"keys are set but s3.credentials.source={self.source}")

    @classmethod
    def from_keys(cls, source: str | None, provider_class: str | None, access_key: str | None,
                  secret_key: str | None, session_token: str | None = None,
                  uc_name: str | None = None) -> "CredentialSettings":
        """Mode from ``s3.credentials.source``, else ``s3.credentials.provider.class``, else inferred from
        which keys are set (keys + token → session, keys → static, nothing → default)."""
        if source is None and provider_class:
            source = source_for_provider_class(provider_class)
        if source is None:
            source = ("uc-service-credential" if uc_name else "session" if session_token
                      else "static" if access_key or secret_key else "default")
        return cls(source, access_key, secret_key, session_token, uc_name)


@dataclass(frozen=True)
class Credentials:
    """Resolved keys; ``expiry`` in epoch seconds (None = long-lived)."""
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    token: str | None = field(default=None, repr=False)
    expiry: float | None = None

    def fresh(self, now: float, margin: float = REFRESH_MARGIN_S) -> bool:
        return self.expiry is None or now < self.expiry - margin


def _uc_provider(name: str) -> Any:
    """Databricks' botocore credential provider for a UC service credential (DBR 16.2+, executor code)."""
    try:
        from databricks import service_credentials  # type: ignore[import-not-found]
    except ImportError:
        raise _error("s3.credentials.source", "uc-service-credential needs Databricks Runtime 16.2+ "
                     "(databricks.service_credentials is not importable here)", "uc-service-credential") from None
    return service_credentials.getServiceCredentialsProvider(name)


def resolve(settings: CredentialSettings, uc_provider: Callable[[str], Any] = _uc_provider) -> Credentials | None:
    """The credentials to use now; None = let boto3's default chain find them where it runs."""
    if settings.source in ("static", "session"):
        return Credentials(settings.access_key or "", settings.secret_key or "", settings.session_token)
    if settings.source == "default":
        return None
    # Databricks returns a botocore session (its documented use is boto3.Session(botocore_session=...));
    # its credentials are refreshable, their frozen view is the current key set.
    session = uc_provider(settings.uc_name or "")
    creds = session.get_credentials() if hasattr(session, "get_credentials") else session
    frozen = creds.get_frozen_credentials() if hasattr(creds, "get_frozen_credentials") else creds
    expiry = getattr(creds, "_expiry_time", None)
    return Credentials(frozen.access_key, frozen.secret_key, frozen.token,
                       expiry.timestamp() if expiry is not None else time.time() + 900)


@dataclass
class ShippedCredentials:
    """Credentials resolved on the driver and pickled into the task closure with their expiry.

    :meth:`current` returns them while fresh and re-resolves from ``settings`` (on the executor) once they are
    within :data:`REFRESH_MARGIN_S` of expiring."""
    settings: CredentialSettings
    creds: Credentials | None = field(default=None, repr=False)
    clock: Callable[[], float] = time.time
    resolver: Callable[[CredentialSettings], Credentials | None] = resolve

    @classmethod
    def on_driver(cls, settings: CredentialSettings, **kw: Any) -> "ShippedCredentials":
        shipped = cls(settings, **kw)
        shipped.creds = shipped.resolver(settings)
        return shipped

    def current(self) -> Credentials | None:
        if self.creds is None and self.settings.source == "default":
            return None
        if self.creds is None or not self.creds.fresh(self.clock()):
            self.creds = self.resolver(self.settings)
        return self.creds

    def __getstate__(self) -> dict:
        # The clock/resolver defaults are module functions (picklable); keep the state as-is.
        return dict(self.__dict__)


def boto3_session(settings: CredentialSettings | ShippedCredentials | None, region: str | None = None) -> Any:
    """The boto3 Session every lakesink S3 client is built from.

    One per thread, region and credentials, kept while they stay the same: a new Session loads botocore's
    service models again (0.12-0.25 s of CPU for an S3 client, measured here), against ~0.01 s for another
    client of a kept one -- every task of a batch opens its store, so a worker process pays it once, not once per
    Kafka range. Per thread because a Session is not safe to build clients from in several threads at once. The
    default chain's Session is kept while the process's ``AWS_*`` environment is unchanged (it resolves and
    refreshes its credentials itself)."""
    import boto3

    shipped = settings if isinstance(settings, ShippedCredentials) else (
        ShippedCredentials(settings) if settings is not None else None)
    creds = shipped.current() if shipped is not None else None
    who = ((creds.access_key, creds.secret_key, creds.token) if creds is not None
           else tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_"))))
    slot = (threading.get_ident(), region, creds is None)
    kept = _SESSIONS.get(slot)
    if kept is not None and kept[0] == who:
        return kept[1]
    if creds is None:
        session = boto3.session.Session(region_name=region, botocore_session=_botocore_session())
    else:
        session = boto3.session.Session(aws_access_key_id=creds.access_key, aws_secret_access_key=creds.secret_key,
                                        aws_session_token=creds.token, region_name=region,
                                        botocore_session=_botocore_session())
    _SESSIONS[slot] = (who, session)
    return session


#: (thread, region, default chain?) -> (the credentials or AWS_* environment it was built for, the Session)
_SESSIONS: dict[tuple, tuple[tuple, Any]] = {}


def _botocore_session() -> Any:
    """A new botocore Session that reads botocore's data (service models, endpoints) through this process's one
    loader: parsed once per process, not once per Session (what most of a new Session's first client costs), and
    by a forked worker never, when its parent warmed it (:func:`warm_s3_models`). The loader's data is what every
    client of one Session shares already; only the Session itself stays per thread."""
    import botocore.session
    from botocore.loaders import create_loader

    session = botocore.session.get_session()
    path = session.get_config_variable("data_path")
    with _LOADER_LOCK:
        kept = _LOADERS.get(path)
        if kept is None:
            kept = _LOADERS[path] = create_loader(path)
    session.register_component("data_loader", kept)
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=parse_timestamp)
    return session


def parse_timestamp(value: Any) -> Any:
    """botocore's timestamp parser for the clients of :func:`_botocore_session`: the two forms S3 answers in,
    ISO 8601 in listings (``2026-11-28T03:12:46.000Z``) and HTTP dates in headers (``Last-Modified``), parsed by
    the standard library; anything else by botocore's own. Same instant, timezone-aware; botocore's goes through
    ``dateutil``, which cost a listing more CPU for its dates than for the rest of its parsing
    (``bench/results/requests.md``)."""
    if isinstance(value, str):
        try:
            if value.endswith("Z") and value[10:11] == "T":
                from datetime import datetime

                return datetime.fromisoformat(value[:-1] + "+00:00")
            if value.endswith(" GMT"):
                from email.utils import parsedate_to_datetime

                return parsedate_to_datetime(value)
        except (TypeError, ValueError):
            pass  # not quite either form: botocore's parser decides
    from botocore.utils import parse_timestamp as botocore_parse

    return botocore_parse(value)


#: botocore's data path ($AWS_DATA_PATH) -> the loader every Session of this process reads it with
_LOADERS: dict[Any, Any] = {}
_LOADER_LOCK = threading.Lock()


def warm_s3_models() -> None:
    """Parse what an S3 client needs (its service model, endpoints, rules) into this process's loader, with a
    client that never sends a request: for a process about to fork workers that each open a store
    (:func:`lakesink.executor.pydaemon.preload`)."""
    import boto3

    boto3.session.Session(aws_access_key_id="warm-up", aws_secret_access_key="warm-up", region_name="us-east-1",
                          botocore_session=_botocore_session()).client("s3")


def boto3_client(settings: CredentialSettings | ShippedCredentials | None, region: str | None, service: str,
                 endpoint_url: str | None, config: Any, variant: Any = None) -> Any:
    """A ``service`` client of :func:`boto3_session`'s Session for ``settings`` and ``region``, kept with it: a
    worker opens its store once per Kafka range, and a new client of even a kept Session costs botocore's endpoint
    and signer set-up again. One client per thread, region, service, endpoint and ``variant`` (what else ``config``
    depends on, hashable); replaced, not added to, when the Session is (new credentials), so rotations do not
    accumulate clients. A client is safe to use from several threads."""
    session = boto3_session(settings, region)
    slot = (threading.get_ident(), region, service, endpoint_url, variant)
    kept = _CLIENTS.get(slot)
    if kept is not None and kept[0] is session:
        return kept[1]
    client = session.client(service, endpoint_url=endpoint_url, config=config)
    _CLIENTS[slot] = (session, client)
    return client


#: (thread, region, service, endpoint, variant) -> (the Session it was built from, the client)
_CLIENTS: dict[tuple, tuple[Any, Any]] = {}


def _forget_clients() -> None:
    # in a forked child: a kept client's pooled connections are its parent's sockets (a forked worker group closes
    # them), and its main thread has the forking thread's id. The loaders are data only: kept (warm_s3_models)
    _SESSIONS.clear()
    _CLIENTS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_clients)


# ---------------------------------------------------------------- credentials that are not there


def where_looked(settings: "CredentialSettings | ShippedCredentials | None",
                 env: "dict[str, str] | None" = None) -> str:
    """Where lakesink (and boto3's default chain) looked for S3 credentials, as one clause for an error line:
    the config keys, then each link of the chain with the environment variable or file it reads and whether
    that is set. Names and paths only, never a value of a secret."""
    env = dict(os.environ if env is None else env)
    if isinstance(settings, ShippedCredentials):
        settings = settings.settings
    source = settings.source if settings is not None else "default"
    if source in ("static", "session"):  # the keys are in the config; nothing else is consulted
        return f"s3.credentials.source={source} takes aws.access.key.id/aws.secret.access.key from the config"
    if source == "uc-service-credential":
        return (f"s3.credentials.source=uc-service-credential: the Unity Catalog service credential "
                f"{settings.uc_name!r} returned none")

    def state(name: str) -> str:
        return f"{name} {'set' if env.get(name) else 'unset'}"

    creds_file = os.path.expanduser(env.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials")
    config_file = os.path.expanduser(env.get("AWS_CONFIG_FILE") or "~/.aws/config")
    profile = env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"
    files = " and ".join(f"{f} ({'exists' if os.path.isfile(f) else 'missing'})" for f in (creds_file, config_file))
    container = ("set" if env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
                 or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") else "unset")
    imds = ("disabled by AWS_EC2_METADATA_DISABLED" if env.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true"
            else "no answer")
    return ("aws.access.key.id/aws.secret.access.key are not in the config (s3.credentials.source=default), and "
            "the AWS default chain found none: environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
            f"{'set' if env.get('AWS_ACCESS_KEY_ID') else 'unset'}), profile {profile!r} (AWS_PROFILE) in {files}, "
            f"web identity ({state('AWS_WEB_IDENTITY_TOKEN_FILE')}), container credentials "
            f"(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI/FULL_URI {container}), EC2 instance metadata ({imds})")


def is_missing_credentials(e: BaseException) -> bool:
    """Whether ``e`` is botocore saying it found no (or only partial) credentials, or no such profile (as
    opposed to an endpoint that does not answer)."""
    from botocore.exceptions import NoCredentialsError, PartialCredentialsError, ProfileNotFound

    return isinstance(e, (NoCredentialsError, PartialCredentialsError, ProfileNotFound))


def missing_credentials(where: str, settings: "CredentialSettings | ShippedCredentials | None",
                        cause: BaseException | None = None) -> S3CredentialsError:
    """The one error line for missing S3 credentials: ``where`` (the endpoint and bucket) and
    :func:`where_looked`; botocore's own words only when they add something (a partial pair, a missing profile)."""
    extra = "" if cause is None or type(cause).__name__ == "NoCredentialsError" else f" ({cause})"
    return S3CredentialsError(f"no S3 credentials found for {where}{extra}: {where_looked(settings)}; set them "
                              f"in the config (aws.access.key.id, aws.secret.access.key) or in one of those places")


def require_credentials(session: Any, settings: "CredentialSettings | ShippedCredentials | None",
                        where: str) -> None:
    """:class:`S3CredentialsError` (exit 3) unless ``session`` (from :func:`boto3_session`) can sign requests:
    asked before the first request, so a missing key is said as such, not as an endpoint that is not reachable."""
    try:
        found = session.get_credentials()
    except Exception as e:  # noqa: BLE001 - only botocore's missing-credential errors are ours to word
        if is_missing_credentials(e):
            raise missing_credentials(where, settings, e) from None
        raise
    if found is None:
        raise missing_credentials(where, settings)
