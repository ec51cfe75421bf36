"""Reachability checks before a sink run does anything (issue #14 item 1): the broker (a metadata call), the
data bucket (HeadBucket) and the manifest location (its bucket, or its local parent directory), each with a
short timeout, so a wrong address fails in seconds with exit code 5 naming the endpoint, instead of after
Spark's cold start and the full retry deadline.

Called by the sink CLI before the manifest table is created or a Spark session started, and by ``status`` and
``restore`` before they read the manifest (:func:`check_broker` names an authentication or TLS failure, a host that
does not resolve or refuses, at librdkafka's first definitive answer); the store half (:func:`check_stores`) also
by ``vacuum``. Missing S3 credentials are
said as such (:class:`~lakesink.errors.S3CredentialsError`, exit 3, where lakesink looked), not as an endpoint
that is not reachable.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from lakesink.errors import KafkaMetadataError, StoreError

if TYPE_CHECKING:
    from lakesink.config import SinkConfig

#: Timeout of each preflight call: long enough for a loaded broker, short next to the retry deadlines.
TIMEOUT_S = 10.0


def check_broker(cfg: "SinkConfig", timeout_s: float = TIMEOUT_S, poll_s: float = 0.05) -> None:
    """One cluster description from the configured brokers; :class:`KafkaMetadataError` naming the cause as soon as
    librdkafka's error callback gives a definitive one (:mod:`lakesink.config.kafka_errors`: authentication failed,
    certificate not trusted, host name does not resolve, connection refused by every bootstrap server), else after
    ``timeout_s``. librdkafka's own log lines go to the ``lakesink.librdkafka`` logger (``client_config``), not to
    the terminal. ``sink``, ``status`` and ``restore`` run it before they read anything."""
    import time

    from confluent_kafka.admin import AdminClient

    from lakesink.config.kafka_errors import ErrorWatch
    from lakesink.driver.kafka_admin import client_config

    conf = client_config(cfg.kafka_options)
    servers = conf.get("bootstrap.servers", "?")
    watch = ErrorWatch(conf)
    # the first attempt is not delayed by the backoff; a definitive failure is answered at the next poll, and the
    # backoff keeps librdkafka from retrying the handshake every ~50 ms while this process waits for a core
    admin = AdminClient({"reconnect.backoff.ms": 1000, "reconnect.backoff.max.ms": 10000, **conf,
                         "socket.timeout.ms": min(300000, int(timeout_s * 1000)), "error_cb": watch})
    deadline = time.monotonic() + timeout_s
    try:
        fut = admin.describe_cluster(request_timeout=timeout_s)
        while not fut.done():
            admin.poll(poll_s)  # serves the error callback (and the log lines)
            failure = watch.failure(connecting=True)
            if failure is not None:
                raise KafkaMetadataError(failure_line(servers, failure))
            if time.monotonic() > deadline:
                last = f": {watch.seen[-1].message}" if watch.seen else ""
                raise KafkaMetadataError(f"Kafka at {servers}: not reachable (preflight metadata request, no "
                                         f"answer in {timeout_s:g} s{last})")
        fut.result()
        dlq = cfg.dlq_topic if getattr(cfg, "errors_tolerance", "none") == "all" else None
        md = admin.list_topics(timeout=timeout_s) if dlq else None
    except KafkaMetadataError:
        raise
    except Exception as e:  # noqa: BLE001 - KafkaException(_TRANSPORT / _TIMED_OUT) and kin
        failure = watch.failure(connecting=True)
        if failure is not None:
            raise KafkaMetadataError(failure_line(servers, failure)) from None
        raise KafkaMetadataError(f"Kafka at {servers}: not reachable (preflight metadata request): "
                                 f"{classify_text(e, conf)}") from None
    finally:
        admin.poll(0)
    if dlq and (dlq not in md.topics or md.topics[dlq].error is not None):
        raise KafkaMetadataError(f"errors.deadletterqueue.topic.name={dlq!r}: no such topic on Kafka at {servers} "
                                 f"(lakesink does not create the dead-letter topic: create it first)")


def failure_line(servers: str, failure) -> str:
    """The error line of a definitive :class:`~lakesink.config.kafka_errors.KafkaFailure` at the preflight: a host
    that does not resolve or refuses is "not reachable", a broker that answered no is said as such."""
    if failure.kind in ("resolve", "refused"):
        return f"Kafka at {servers}: not reachable (preflight metadata request): {failure.message}"
    return f"Kafka at {servers}: {failure.message} (preflight)"


def classify_text(e: BaseException, conf) -> str:
    """A client exception in one line, without secrets."""
    from lakesink.config.kafka_errors import classify

    return classify(e, conf).message


def _s3_client(cfg: "SinkConfig", timeout_s: float):
    from botocore.config import Config

    from lakesink import wiring
    from lakesink.credentials import boto3_session, is_missing_credentials, missing_credentials, require_credentials

    s = wiring.store_settings(cfg)
    where = f"S3 endpoint {s.where} (bucket {s.bucket!r})"
    # the store's own credentials (static, session token, UC service credential): a preflight with other
    # credentials could pass where the run fails, or refuse a run that would work
    source = s.credential_source()
    try:
        session = boto3_session(source, s.s3.region)
    except Exception as e:  # noqa: BLE001 - AWS_PROFILE naming no profile fails here already
        if is_missing_credentials(e):
            raise missing_credentials(where, source, e) from None
        raise
    # asked before HeadBucket: botocore would say "Unable to locate credentials" as a failed request, which
    # read like an endpoint that is not reachable (issue #26 item 6)
    require_credentials(session, source, where)
    client = session.client(
        "s3", endpoint_url=s.s3.endpoint_url,
        config=Config(region_name=s.s3.region, s3={"addressing_style": "path" if s.s3.path_style else "auto"},
                      retries={"total_max_attempts": 1, "mode": "standard"},  # retried below, within the deadline
                      connect_timeout=timeout_s, read_timeout=timeout_s))
    return s.s3.endpoint_url, client, s.retry_backoff_ms, s.retry_deadline_ms


def _throttled(e: BaseException) -> bool:
    from botocore.exceptions import ClientError

    from lakesink.store import THROTTLE_CODES

    if not isinstance(e, ClientError):
        return False
    status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    # HeadBucket has no body: its error code is the HTTP status
    return status >= 500 or e.response.get("Error", {}).get("Code") in THROTTLE_CODES


def check_bucket(client, endpoint: str | None, bucket: str, what: str, backoff_ms: int = 200,
                 deadline_ms: int = 0) -> None:
    """HeadBucket; :class:`StoreError` naming the endpoint, the bucket and the cause. Throttling and 5xx are
    retried with backoff until ``deadline_ms`` (``s3.retry.deadline.ms``); a refused connection, 403 and 404
    fail at once."""
    from botocore.exceptions import BotoCoreError, ClientError

    from lakesink.credentials import is_missing_credentials, missing_credentials
    from lakesink.retry import retry_until

    where = endpoint or "AWS S3"
    try:
        retry_until(lambda: client.head_bucket(Bucket=bucket), deadline_ms / 1000.0, backoff_ms, _throttled)
    except ClientError as e:
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if status == 404:
            cause = "does not exist"
        elif status == 403:
            cause = "access denied (403): check the credentials and the bucket policy"
        elif _throttled(e):
            cause = (f"throttled or unavailable ({e.response.get('Error', {}).get('Code') or status}) until "
                     f"s3.retry.deadline.ms={deadline_ms}")
        else:
            err = e.response.get("Error", {})
            cause = f"{err.get('Code', status)}: {err.get('Message', '')}".rstrip(": ")
        raise StoreError(f"{what} bucket {bucket!r} at {where}: {cause} (preflight HeadBucket)") from None
    except BotoCoreError as e:  # connection refused, timeouts, DNS
        if is_missing_credentials(e):  # the default chain's credentials went away since they were found
            raise missing_credentials(f"{what} bucket {bucket!r} at {where}", None, e) from None
        raise StoreError(f"S3 endpoint {where} is not reachable (preflight HeadBucket of {what} bucket "
                         f"{bucket!r}): {e}") from None


def check_credentials(cfg: "SinkConfig") -> None:
    """Only the credentials half of :func:`check_stores`, with no request: :class:`S3CredentialsError` (exit 3)
    when an S3 store's credentials cannot be found, nothing for a local store. For commands that read the
    manifest (delta-rs, Spark) before their first boto3 call, whose own error would otherwise be the first."""
    from lakesink import wiring

    if not wiring.store_settings(cfg).is_local:
        _s3_client(cfg, TIMEOUT_S)


def check_local_dir(path: str, what: str) -> None:
    """A local store root or manifest path: it, or its nearest existing ancestor, must be a writable directory."""
    p = os.path.abspath(path)
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    if not os.path.isdir(p) or not os.access(p, os.W_OK | os.X_OK):
        raise StoreError(f"{what} {path!r}: {p!r} is not a writable directory (preflight)")


def check_stores(cfg: "SinkConfig", timeout_s: float | None = None, writes: bool = True) -> None:
    """The data bucket and the manifest location (a path table; a catalog table is checked by Spark), each call
    within ``timeout_s`` (default :data:`TIMEOUT_S`). Missing S3 credentials: :class:`S3CredentialsError` (exit 3)
    before any request; otherwise :class:`StoreError` (exit 5) naming the endpoint. ``lakesink sink`` runs it
    (with :func:`check_broker`), and so do ``vacuum`` and ``status`` before they read the manifest; ``writes=False``
    (``status`` only reads) leaves local directories unchecked."""
    from lakesink import wiring

    timeout_s = TIMEOUT_S if timeout_s is None else timeout_s  # read at call time: tests shorten it

    settings = wiring.store_settings(cfg)
    client = endpoint = None
    backoff_ms = deadline_ms = 0
    if settings.is_local:
        if writes:
            check_local_dir(urlparse(settings.s3.endpoint_url).path, "store.url")
    else:
        endpoint, client, backoff_ms, deadline_ms = _s3_client(cfg, timeout_s)
        check_bucket(client, endpoint, settings.bucket, "data (s3.bucket.name)", backoff_ms, deadline_ms)
    from lakesink.manifest.location import parse_location

    loc = parse_location(cfg.manifest_location or "")
    if loc.scheme == "s3":
        if client is None:
            raise StoreError(f"manifest.location {loc.text!r} is on S3 but the store is local (store.url)")
        if loc.bucket != settings.bucket:
            check_bucket(client, endpoint, loc.bucket, "manifest (manifest.location)", backoff_ms, deadline_ms)
    elif loc.scheme == "file" and writes:
        check_local_dir(loc.path, "manifest.location")


def preflight(cfg: "SinkConfig", timeout_s: float = TIMEOUT_S) -> None:
    """Every reachability check, store first (no broker wait when the bucket is wrong); raises the first
    failure (exit code 5)."""
    check_stores(cfg, timeout_s)
    check_broker(cfg, timeout_s)


__all__ = ["preflight", "check_broker", "classify_text", "failure_line", "check_stores", "check_bucket",
           "check_local_dir", "check_credentials",
           "TIMEOUT_S"]
