"""Where S3 is and how to sign requests: one settings value (:class:`S3Settings`), rendered for boto3, S3A (Hadoop)
and delta-rs, and the object store's settings that hold it (:class:`StoreSettings`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

S3A_FS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
SIMPLE_CREDENTIALS = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
TEMPORARY_CREDENTIALS = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"  # keys + session token

#: Bounded S3A retries for a Spark-engine manifest: S3A's defaults retry a dead endpoint for many minutes (a
#: scheduler sees a hung job); these give up within about two minutes, throttling included. In cluster mode they
#: apply only where the cluster has not set them.
S3A_RETRY_CONF = {
    "fs.s3a.attempts.maximum": "3",                     # SDK-level attempts per request
    "fs.s3a.retry.limit": "4",                          # S3A-level retries of other failures
    "fs.s3a.retry.interval": "500ms",
    "fs.s3a.retry.throttle.limit": "20",                # 503 SlowDown: more patience, still bounded
    "fs.s3a.retry.throttle.interval": "1000ms",
    "fs.s3a.connection.establish.timeout": "5s",
    "fs.s3a.connection.timeout": "60s",
    "fs.s3a.connection.request.timeout": "120s",
}


@dataclass(frozen=True)
class S3Settings:
    """Where S3 is and how to sign requests. ``repr``/``str`` never show the keys.

    ``endpoint_url=None`` means AWS itself (region endpoint); ``access_key=None`` means "use the default
    credential chain" (instance profile, env vars, ...). ``path_style`` is needed by most S3 emulators.
    """

    endpoint_url: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    region: str = "us-east-1"
    path_style: bool = True
    session_token: str | None = field(default=None, repr=False)  # s3.credentials.source=session

    def __repr__(self) -> str:
        hide = lambda v: None if v is None else "***"  # noqa: E731
        return (
            f"S3Settings(endpoint_url={self.endpoint_url!r}, access_key={hide(self.access_key)!r}, "
            f"secret_key={hide(self.secret_key)!r}, region={self.region!r}, path_style={self.path_style!r})"
        )

    __str__ = __repr__

    def hadoop_conf(self) -> dict[str, str]:
        """The Hadoop (S3A) keys, without the ``spark.hadoop.`` prefix and without the keys themselves
        (:meth:`credential_conf`): these may go on a command line, credentials never do."""
        c: dict[str, str] = {
            "fs.s3.impl": S3A_FS,
            "fs.s3a.impl": S3A_FS,
            "fs.s3a.path.style.access": "true" if self.path_style else "false",
            "fs.s3a.endpoint.region": self.region,
            **S3A_RETRY_CONF,
        }
        if self.endpoint_url:
            c["fs.s3a.endpoint"] = self.endpoint_url
            scheme = urlparse(self.endpoint_url).scheme
            c["fs.s3a.connection.ssl.enabled"] = "false" if scheme == "http" else "true"
        if self.access_key is not None and self.secret_key is not None:
            c["fs.s3a.aws.credentials.provider"] = TEMPORARY_CREDENTIALS if self.session_token else SIMPLE_CREDENTIALS
        return c

    def credential_conf(self) -> dict[str, str]:
        """Static keys for S3A's SimpleAWSCredentialsProvider; empty = the default credential chain.

        They are set on the running JVM's Hadoop configuration (:func:`set_credentials`), never passed as
        ``spark.hadoop.*`` builder settings: PySpark launches the JVM with every builder setting as a
        ``--conf`` argument, readable by any local user through ``ps`` for the life of the run."""
        if self.access_key is None or self.secret_key is None:
            return {}
        keys = {"fs.s3a.access.key": self.access_key, "fs.s3a.secret.key": self.secret_key}
        if self.session_token:
            keys["fs.s3a.session.token"] = self.session_token
        return keys

    def object_store_options(self) -> dict[str, str]:
        """delta-rs (object_store) storage options for the same endpoint, region and keys. They hold the keys:
        passed in-process only, never logged (the manifest's ``repr`` hides them)."""
        opts = {"AWS_REGION": self.region,
                "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false" if self.path_style else "true"}
        if self.endpoint_url:
            opts["AWS_ENDPOINT_URL"] = self.endpoint_url
            if urlparse(self.endpoint_url).scheme == "http":
                opts["AWS_ALLOW_HTTP"] = "true"
        if self.access_key is not None and self.secret_key is not None:
            opts["AWS_ACCESS_KEY_ID"] = self.access_key
            opts["AWS_SECRET_ACCESS_KEY"] = self.secret_key
            if self.session_token:
                opts["AWS_SESSION_TOKEN"] = self.session_token
        return opts

    def boto3_kwargs(self) -> dict:
        """Keyword arguments for ``boto3.client("s3", **kw)`` (path-style addressing when asked)."""
        from botocore.config import Config

        kw: dict = {
            "region_name": self.region,
            "config": Config(s3={"addressing_style": "path" if self.path_style else "auto"}),
        }
        if self.endpoint_url:
            kw["endpoint_url"] = self.endpoint_url
        if self.access_key is not None:
            kw["aws_access_key_id"] = self.access_key
            kw["aws_secret_access_key"] = self.secret_key
            kw["aws_session_token"] = self.session_token
        return kw




@dataclass(frozen=True)
class StoreSettings:
    """Where and how objects are written. Picklable: it travels to the executors.

    ``s3``: where the store is and how to sign (endpoint, region, path style, keys): the same value the
    manifest's S3A / delta-rs settings render, so there is one default region (:class:`S3Settings`'s). An
    ``s3.endpoint_url`` of ``file:///dir`` is a local directory store."""

    bucket: str
    s3: S3Settings = field(default_factory=S3Settings)
    part_size: int = 26214400
    part_retries: int = 3
    retry_backoff_ms: int = 200
    retry_deadline_ms: int = 120_000
    sse: str = ""
    kms_key_id: str | None = field(default=None, repr=False)
    acl: str | None = None
    #: Where credentials come from (lakesink.credentials); None = the static keys of ``s3`` or the default chain.
    credentials: Any = field(default=None, repr=False, compare=False, hash=False)

    def credential_source(self) -> Any:
        """The :class:`~lakesink.credentials.ShippedCredentials` (or settings) every boto3 session is built from."""
        from lakesink.credentials import CredentialSettings

        if self.credentials is not None:
            return self.credentials
        return CredentialSettings.from_keys(None, None, self.s3.access_key, self.s3.secret_key, self.s3.session_token)

    @property
    def is_local(self) -> bool:
        """Whether the store is a local directory (``file://`` endpoint)."""
        return bool(self.s3.endpoint_url) and self.s3.endpoint_url.startswith("file:")

    @property
    def where(self) -> str:
        """The endpoint, for messages (``AWS S3`` without one)."""
        return self.s3.endpoint_url or "AWS S3"
