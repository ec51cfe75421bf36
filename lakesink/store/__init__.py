"""Object stores: S3 (boto3) and a local directory (``file://``), with conditional creates.

Every write is a *create*: an object that already exists is never replaced silently.
``ObjectWriter.commit()`` returns either a ``WrittenObject`` (created) or a ``PendingWrite``
(the key already holds an object). A pending write keeps our bytes staged (an open S3 multipart
upload, or a temp file) so the *driver*, which can consult the manifest, decides: if the existing
object is committed, another writer is ahead and the batch aborts (``abort_pending``); if it is an
orphan of a failed run, ``finish_pending`` replaces exactly that version (``If-Match`` its ETag).

S3 writes stream: bytes are buffered up to ``part_size`` and sent as multipart parts, so an object
of any size needs one part buffer of memory. An object smaller than one part is a single PUT.

Local (``file://``) stores are for development and for shared file systems mounted at the same
path on every node (NFS, DBFS FUSE); on a multi-node cluster with node-local disks use S3.
"""
from __future__ import annotations

import hashlib
import io
import os
import stat
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, TypeVar
from urllib.parse import urlparse


from lakesink.errors import StoreError, ObjectChangedError, PreconditionFailed

T = TypeVar("T")

MIN_PART_SIZE = 5 * 1024 * 1024
TEMP_MARKER = ".lakesink-tmp-"
# User metadata every lakesink upload carries (S3 ``x-amz-meta-*``; local files: ``user.*`` xattrs).
# It is how vacuum and conflict resolution tell this job's orphans from anyone else's objects.
OWNER_KEY = "lakesink-job"
RUN_KEY = "lakesink-run-id"
BATCH_KEY = "lakesink-batch-id"
_XATTR_PREFIX = "user."


def upload_metadata(job: str, run_id: str, batch_id: int) -> dict[str, str]:
    """The metadata of one upload of ``job``'s run ``run_id``, batch ``batch_id``."""
    return {OWNER_KEY: job, RUN_KEY: run_id, BATCH_KEY: str(batch_id)}


@dataclass(frozen=True)
class StoreSettings:
    """Where and how objects are written. Picklable: it travels to the executors."""

    bucket: str
    endpoint_url: str | None = None  # None = AWS; "file:///dir" = local directory store
    region: str = "us-west-2"
    path_style: bool = True
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    part_size: int = 26214400
    part_retries: int = 3
    retry_backoff_ms: int = 200
    retry_deadline_ms: int = 120_000
    sse: str = ""
    kms_key_id: str | None = field(default=None, repr=False)
    acl: str | None = None
    #: Where credentials come from (lakesink.credentials); None = the static keys above or the default chain.
    credentials: Any = field(default=None, repr=False, compare=False, hash=False)

    def credential_source(self) -> Any:
        """The :class:`~lakesink.credentials.ShippedCredentials` (or settings) every boto3 session is built from."""
        from lakesink.credentials import CredentialSettings

        if self.credentials is not None:
            return self.credentials
        return CredentialSettings.from_keys(None, None, self.access_key, self.secret_key)

    @property
    def is_local(self) -> bool:
        return bool(self.endpoint_url) and self.endpoint_url.startswith("file:")



@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str
    last_modified: float  # epoch seconds
    version_id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)  # user metadata; ``head()`` only, not ``list()``

    @property
    def owner(self) -> str | None:
        """The lakesink job that uploaded this object (its ``lakesink-job`` metadata), if any."""
        return self.metadata.get(OWNER_KEY)


@dataclass(frozen=True)
class WrittenObject:
    key: str
    uri: str
    etag: str
    size: int
    version_id: str | None = None


@dataclass(frozen=True)
class PendingWrite:
    """Our bytes, staged but not visible, because ``key`` already holds ``existing_etag``."""

    key: str
    existing_etag: str
    size: int
    token: str  # S3: multipart upload id; file: temp path
    parts: tuple[tuple[int, str], ...] = ()  # S3: (part number, part ETag)
    etag: str | None = None  # file store: md5 of the staged bytes
    content_etags: tuple[str, ...] = ()  # ETags an object holding exactly our bytes would have

    @property
    def same_content(self) -> bool:
        """The existing object already holds exactly our bytes (a replay of a deterministic config)."""
        return self.existing_etag in self.content_etags


def _strip(etag: str | None) -> str:
    return (etag or "").strip('"')


class ObjectWriter(io.RawIOBase):
    """A write-only stream for one object; ``commit()`` makes it visible iff the key is free."""

    def writable(self) -> bool:
        return True

    @abstractmethod
    def commit(self) -> WrittenObject | PendingWrite: ...

    @abstractmethod
    def abort(self) -> None: ...


class ObjectStore(ABC):
    settings: StoreSettings

    @abstractmethod
    def uri(self, key: str) -> str: ...

    @abstractmethod
    def open_writer(self, key: str, metadata: dict[str, str] | None = None) -> ObjectWriter: ...

    @abstractmethod
    def finish_pending(self, pending: PendingWrite) -> WrittenObject:
        """Replace the orphan at ``pending.key`` (only if it still has ``existing_etag``)."""

    @abstractmethod
    def abort_pending(self, pending: PendingWrite) -> None: ...

    def adopt_pending(self, pending: PendingWrite) -> WrittenObject:
        """Keep the existing object (it holds our bytes) and drop our staged copy: nothing is replaced."""
        info = self.head(pending.key)
        self.abort_pending(pending)
        if info is None or info.etag not in pending.content_etags:
            raise ObjectChangedError(
                f"{self.uri(pending.key)}: changed while pending (expected etag {pending.existing_etag})")
        return WrittenObject(pending.key, self.uri(pending.key), info.etag, info.size, info.version_id)

    @abstractmethod
    def head(self, key: str) -> ObjectInfo | None: ...

    @abstractmethod
    def read(self, key: str, etag: str | None = None, version_id: str | None = None,
             byte_range: tuple[int, int] | None = None) -> bytes:
        """Read an object (or the inclusive byte range); with ``etag`` raise ObjectChangedError on mismatch."""

    @abstractmethod
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]: ...

    @abstractmethod
    def delete(self, key: str) -> None: ...

    def list_uploads(self, prefix: str = "") -> Iterator[tuple[str, str, float]]:
        """Open multipart uploads under ``prefix``: (key, upload id, initiated epoch seconds)."""
        return iter(())

    def abort_upload(self, key: str, upload_id: str) -> None:
        """Abort one open multipart upload (never touches a stored object)."""

    def put_bytes(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> WrittenObject | PendingWrite:
        w = self.open_writer(key, metadata)
        try:
            w.write(data)
            return w.commit()
        except BaseException:
            w.abort()
            raise


def open_store(settings: StoreSettings) -> ObjectStore:
    """The store for ``settings``: a local directory for ``file://`` endpoints, else S3."""
    if settings.is_local:
        return LocalStore(settings)
    return S3Store(settings)


# ---------------------------------------------------------------- local directory


class LocalStore(ObjectStore):
    """Objects are files at ``<root>/<bucket>/<key>``; ETag = MD5 hex of the content (as S3 PUT)."""

    def __init__(self, settings: StoreSettings):
        self.settings = settings
        path = urlparse(settings.endpoint_url).path
        self.root = os.path.join(path, settings.bucket)

    def _path(self, key: str) -> str:
        p = os.path.normpath(os.path.join(self.root, key))
        if not p.startswith(os.path.normpath(self.root) + os.sep):
            raise StoreError(f"key {key!r} escapes the store root {self.root}")
        return p

    def uri(self, key: str) -> str:
        return "file://" + self._path(key)

    def open_writer(self, key: str, metadata: dict[str, str] | None = None) -> ObjectWriter:
        return _LocalWriter(self, key, metadata or {})

    def finish_pending(self, pending: PendingWrite) -> WrittenObject:
        path = self._path(pending.key)
        current = self.head(pending.key)
        if current is None or current.etag != pending.existing_etag:
            self.abort_pending(pending)
            raise ObjectChangedError(
                f"{self.uri(pending.key)}: changed while pending (expected etag {pending.existing_etag})")
        os.replace(pending.token, path)
        return WrittenObject(pending.key, self.uri(pending.key), pending.etag or "", pending.size)

    def abort_pending(self, pending: PendingWrite) -> None:
        try:
            os.unlink(pending.token)
        except FileNotFoundError:
            pass

    def head(self, key: str) -> ObjectInfo | None:
        path = self._path(key)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):  # a key "under" an object's key: no such object
            return None
        if not stat.S_ISREG(st.st_mode):  # a key that only prefixes other keys is a directory, not an object
            return None
        return ObjectInfo(key, st.st_size, _md5_file(path), st.st_mtime, metadata=_read_xattrs(path))

    def read(self, key, etag=None, version_id=None, byte_range=None) -> bytes:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise StoreError(f"{self.uri(key)}: no such object") from None
        if etag is not None and hashlib.md5(data).hexdigest() != _strip(etag):
            raise ObjectChangedError(f"{self.uri(key)}: content does not match the recorded etag {etag}")
        if byte_range:
            return data[byte_range[0]: byte_range[1] + 1]
        return data

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        if not os.path.isdir(self.root):
            return
        for dirpath, _dirs, files in os.walk(self.root):
            for name in sorted(files):
                full = os.path.join(dirpath, name)
                key = os.path.relpath(full, self.root).replace(os.sep, "/")
                if key.startswith(prefix):
                    st = os.stat(full)
                    yield ObjectInfo(key, st.st_size, "", st.st_mtime)  # etag: head() (reads the file)

    def delete(self, key: str) -> None:
        try:
            os.unlink(self._path(key))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            pass


def _write_xattrs(path: str, metadata: dict[str, str]) -> None:
    """Store user metadata as ``user.*`` extended attributes (skipped where the file system has none:
    such objects are then not recognisably lakesink's, and vacuum reports them as unknown)."""
    for k, v in metadata.items():
        try:
            os.setxattr(path, _XATTR_PREFIX + k, v.encode("utf-8"))
        except (OSError, AttributeError):
            return


def _read_xattrs(path: str) -> dict[str, str]:
    try:
        names = os.listxattr(path)
        return {n[len(_XATTR_PREFIX):]: os.getxattr(path, n).decode("utf-8", "replace")
                for n in names if n.startswith(_XATTR_PREFIX)}
    except (OSError, AttributeError):
        return {}


def _md5_file(path: str) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _LocalWriter(ObjectWriter):
    def __init__(self, store: LocalStore, key: str, metadata: dict[str, str]):
        super().__init__()
        self.store, self.key = store, key
        self.path = store._path(key)
        d = os.path.dirname(self.path)
        os.makedirs(d, exist_ok=True)
        self.tmp = os.path.join(d, f".{os.path.basename(self.path)}{TEMP_MARKER}{uuid.uuid4().hex}")
        self.f = open(self.tmp, "wb")
        _write_xattrs(self.tmp, metadata)  # travels with the inode through link/replace
        self.md5 = hashlib.md5()
        self.size = 0

    def write(self, b) -> int:
        n = self.f.write(b)
        self.md5.update(b)
        self.size += n
        return n

    def commit(self) -> WrittenObject | PendingWrite:
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        etag = self.md5.hexdigest()
        try:
            os.link(self.tmp, self.path)  # atomic create-if-absent
        except FileExistsError:
            existing = _md5_file(self.path)
            return PendingWrite(self.key, existing, self.size, self.tmp, etag=etag, content_etags=(etag,))
        os.unlink(self.tmp)
        return WrittenObject(self.key, self.store.uri(self.key), etag, self.size)

    def abort(self) -> None:
        if not self.f.closed:
            self.f.close()
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass


# ---------------------------------------------------------------- S3


_RETRYABLE_CODES = {"RequestTimeout", "SlowDown", "InternalError", "ServiceUnavailable", "Throttling",
                    "ThrottlingException", "RequestTimeTooSkewed", "503", "500"}
#: Error codes S3 asks to be retried with backoff for as long as it takes (they count against the deadline only).
THROTTLE_CODES = {"SlowDown", "ServiceUnavailable", "Throttling", "ThrottlingException", "503"}
from lakesink.retry import MAX_BACKOFF_S, backoff_s  # noqa: E402 - shared with the Kafka clients; kept importable here


class S3Store(ObjectStore):
    """S3 through boto3. Retries: ``s3.part.retries`` attempts with full-jitter exponential
    backoff from ``s3.retry.backoff.ms`` (Confluent's mapping of the same keys)."""

    def __init__(self, settings: StoreSettings):
        from botocore.config import Config

        self.settings = settings
        cfg = Config(
            region_name=settings.region,
            s3={"addressing_style": "path" if settings.path_style else "auto"},
            retries={"total_max_attempts": 1, "mode": "standard"},  # one try per call: we retry, counted
            connect_timeout=10,
            read_timeout=60,
        )
        from lakesink.credentials import boto3_session, is_missing_credentials, missing_credentials

        try:
            self.client = boto3_session(settings.credential_source(), settings.region).client(
                "s3", endpoint_url=settings.endpoint_url, config=cfg)
        except Exception as e:  # noqa: BLE001 - AWS_PROFILE naming no profile fails here already
            if is_missing_credentials(e):
                raise missing_credentials(f"S3 endpoint {settings.endpoint_url or 'AWS S3'} (bucket "
                                          f"{settings.bucket!r})", settings.credential_source(), e) from None
            raise

    #: Retries this store made (all calls, since it was opened): reported in the batch summary.
    retries = 0

    def uri(self, key: str) -> str:
        return f"s3://{self.settings.bucket}/{key}"

    # -- retries
    def call(self, what: str, key: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` with retries; raise StoreError naming the operation, bucket/key and cause.

        Throttling (503 SlowDown and kin) is retried with backoff until ``retry_deadline_ms``; other transient
        failures (500, timeouts, dropped connections) at most ``s3.part.retries`` times within the deadline.
        Anything else (403, 404, ...) fails at once; 412 is :class:`PreconditionFailed` for the create protocol."""
        from botocore.exceptions import BotoCoreError, ClientError

        s = self.settings
        deadline = time.monotonic() + s.retry_deadline_ms / 1000.0
        attempt, transient = 0, 0
        while True:
            try:
                return fn()
            except ClientError as e:
                code = str(e.response.get("Error", {}).get("Code", ""))
                status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
                if _is_precondition(e):
                    raise PreconditionFailed(f"{what} {self.uri(key)}: precondition failed (412)") from None
                throttled = code in THROTTLE_CODES or status == 503
                if not (throttled or code in _RETRYABLE_CODES or status >= 500):
                    raise _client_error(what, self.uri(key), e) from None
                transient += 0 if throttled else 1
                failure = _client_error(what, self.uri(key), e)
            except BotoCoreError as e:  # connection refused or reset, timeouts, DNS
                from lakesink.credentials import is_missing_credentials, missing_credentials

                if is_missing_credentials(e):  # not transient, and not an endpoint that does not answer: exit 3
                    raise missing_credentials(f"{what} {self.uri(key)} at {s.endpoint_url or 'AWS S3'}",
                                              s.credential_source(), e) from None
                transient += 1
                failure = StoreError(f"{what} {self.uri(key)} failed: {e}")
            attempt += 1
            pause = backoff_s(attempt, s.retry_backoff_ms)
            if transient > s.part_retries or time.monotonic() + pause > deadline:
                raise StoreError(f"{failure} (gave up after {attempt} attempt(s); endpoint "
                                 f"{s.endpoint_url or 'AWS S3'}, s3.part.retries={s.part_retries}, "
                                 f"s3.retry.deadline.ms={s.retry_deadline_ms})") from None
            self.retries += 1
            time.sleep(pause)

    def _extra(self) -> dict:
        extra: dict = {}
        if self.settings.sse:
            extra["ServerSideEncryption"] = self.settings.sse
            if self.settings.kms_key_id and self.settings.sse.startswith("aws:kms"):
                extra["SSEKMSKeyId"] = self.settings.kms_key_id
        if self.settings.acl:
            extra["ACL"] = self.settings.acl
        return extra

    def open_writer(self, key: str, metadata: dict[str, str] | None = None) -> ObjectWriter:
        return _S3Writer(self, key, metadata or {})

    def finish_pending(self, pending: PendingWrite) -> WrittenObject:
        b = self.settings.bucket
        # S3 checks If-Match atomically on CompleteMultipartUpload; some S3-compatible stores (moto)
        # ignore it there, so compare the ETag first as well.
        current = self.head(pending.key)
        if current is None or current.etag != pending.existing_etag:
            self.abort_pending(pending)
            raise ObjectChangedError(
                f"{self.uri(pending.key)}: changed while pending (expected etag {pending.existing_etag})")
        parts = [{"PartNumber": n, "ETag": e} for n, e in pending.parts]
        try:
            r = self.call("CompleteMultipartUpload(If-Match)", pending.key, lambda: self.client.complete_multipart_upload(
                Bucket=b, Key=pending.key, UploadId=pending.token, MultipartUpload={"Parts": parts},
                IfMatch=f'"{pending.existing_etag}"'))
        except PreconditionFailed:
            self.abort_pending(pending)
            raise ObjectChangedError(
                f"{self.uri(pending.key)}: changed while pending (expected etag {pending.existing_etag})") from None
        return WrittenObject(pending.key, self.uri(pending.key), _strip(r.get("ETag")), pending.size, r.get("VersionId"))

    def abort_pending(self, pending: PendingWrite) -> None:
        b = self.settings.bucket
        self.call("AbortMultipartUpload", pending.key, lambda: self.client.abort_multipart_upload(
            Bucket=b, Key=pending.key, UploadId=pending.token))

    def head(self, key: str) -> ObjectInfo | None:
        from botocore.exceptions import ClientError

        def once():
            try:
                return self.client.head_object(Bucket=self.settings.bucket, Key=key)
            except ClientError as e:
                if e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                    return None
                raise

        r = self.call("HeadObject", key, once)
        if r is None:
            return None
        return ObjectInfo(key, r["ContentLength"], _strip(r["ETag"]), r["LastModified"].timestamp(),
                          r.get("VersionId"), dict(r.get("Metadata") or {}))

    def read(self, key, etag=None, version_id=None, byte_range=None) -> bytes:
        kw: dict = {"Bucket": self.settings.bucket, "Key": key}
        if etag:
            kw["IfMatch"] = f'"{_strip(etag)}"'
        if version_id:
            kw["VersionId"] = version_id
        if byte_range:
            kw["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
        try:
            return self.call("GetObject", key, lambda: self.client.get_object(**kw)["Body"].read())
        except PreconditionFailed:
            raise ObjectChangedError(f"{self.uri(key)}: object no longer has the recorded etag {etag}") from None

    def _pages(self, op: str, what: str, prefix: str, token_in: str, token_out: str) -> Iterator[dict]:
        """Every page of a listing, each page fetched through :meth:`call` (so retried like any request)."""
        fn = getattr(self.client, op)
        kw: dict = {"Bucket": self.settings.bucket, "Prefix": prefix}
        while True:
            page = self.call(what, prefix, lambda: fn(**kw))
            yield page
            if not page.get("IsTruncated"):
                return
            kw = {**kw, **{k: page[v] for k, v in zip(token_in.split(","), token_out.split(",")) if page.get(v)}}

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        for page in self._pages("list_objects_v2", "ListObjectsV2", prefix, "ContinuationToken",
                                "NextContinuationToken"):
            for o in page.get("Contents", []):
                yield ObjectInfo(o["Key"], o["Size"], _strip(o["ETag"]), o["LastModified"].timestamp())

    def list_uploads(self, prefix: str = "") -> Iterator[tuple[str, str, float]]:
        """Open multipart uploads: (key, upload id, initiated epoch seconds)."""
        for page in self._pages("list_multipart_uploads", "ListMultipartUploads", prefix,
                                "KeyMarker,UploadIdMarker", "NextKeyMarker,NextUploadIdMarker"):
            for u in page.get("Uploads", []):
                yield u["Key"], u["UploadId"], u["Initiated"].timestamp()

    def delete(self, key: str) -> None:
        self.call("DeleteObject", key, lambda: self.client.delete_object(Bucket=self.settings.bucket, Key=key))

    def abort_upload(self, key: str, upload_id: str) -> None:
        self.abort_pending(PendingWrite(key, "", 0, upload_id))


def _client_error(what: str, uri: str, e) -> StoreError:
    err = e.response.get("Error", {})
    status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    code = err.get("Code", "?")
    hint = {
        "NoSuchBucket": " (the bucket does not exist: check s3.bucket.name)",
        "AccessDenied": " (permission denied: check the credentials and the bucket policy)",
        "InvalidAccessKeyId": " (unknown access key: check aws.access.key.id / the credential chain)",
        "SignatureDoesNotMatch": " (bad secret key: check aws.secret.access.key / the credential chain)",
    }.get(code, "")
    return StoreError(f"{what} {uri} failed: {code} ({status}): {err.get('Message', '')}{hint}")


class _S3Writer(ObjectWriter):
    def __init__(self, store: S3Store, key: str, metadata: dict[str, str]):
        super().__init__()
        self.store, self.key, self.metadata = store, key, metadata
        self.part_size = max(MIN_PART_SIZE, store.settings.part_size)
        self.buf = bytearray()
        self.upload_id: str | None = None
        self.parts: list[tuple[int, str]] = []
        self.size = 0

    def write(self, b) -> int:
        self.buf += b
        self.size += len(b)
        while len(self.buf) >= self.part_size:
            self._send_part(bytes(self.buf[: self.part_size]))
            del self.buf[: self.part_size]
        return len(b)

    def _create(self) -> None:
        s = self.store
        r = s.call("CreateMultipartUpload", self.key, lambda: s.client.create_multipart_upload(
            Bucket=s.settings.bucket, Key=self.key, Metadata=self.metadata, **s._extra()))
        self.upload_id = r["UploadId"]

    def _send_part(self, data: bytes) -> None:
        s = self.store
        if self.upload_id is None:
            self._create()
        n = len(self.parts) + 1
        r = s.call(f"UploadPart #{n}", self.key, lambda: s.client.upload_part(
            Bucket=s.settings.bucket, Key=self.key, UploadId=self.upload_id, PartNumber=n, Body=data))
        self.parts.append((n, r["ETag"]))

    def commit(self) -> WrittenObject | PendingWrite:
        s, b = self.store, self.store.settings.bucket
        if self.upload_id is None:
            data = bytes(self.buf)
            try:
                r = s.call("PutObject(If-None-Match)", self.key, lambda: s.client.put_object(
                    Bucket=b, Key=self.key, Body=data, IfNoneMatch="*", Metadata=self.metadata, **s._extra()))
            except PreconditionFailed:
                # stage our bytes as a one-part multipart upload the driver may complete
                self._send_part(data)
                self.buf.clear()
                return self._pending(single_put_etag=hashlib.md5(data).hexdigest())
            self.buf.clear()
            return WrittenObject(self.key, s.uri(self.key), _strip(r.get("ETag")), self.size, r.get("VersionId"))
        if self.buf:
            self._send_part(bytes(self.buf))
            self.buf.clear()
        parts = [{"PartNumber": n, "ETag": e} for n, e in self.parts]
        try:
            r = s.call("CompleteMultipartUpload(If-None-Match)", self.key, lambda: s.client.complete_multipart_upload(
                Bucket=b, Key=self.key, UploadId=self.upload_id, MultipartUpload={"Parts": parts}, IfNoneMatch="*"))
        except PreconditionFailed:
            return self._pending()
        return WrittenObject(self.key, s.uri(self.key), _strip(r.get("ETag")), self.size, r.get("VersionId"))

    def _pending(self, single_put_etag: str | None = None) -> PendingWrite:
        info = self.store.head(self.key)
        # S3's multipart ETag is md5(concatenated part md5s)-N, and a part's ETag is its md5
        # (not under SSE-KMS: then nothing matches and the object is replaced, never adopted).
        try:
            digests = b"".join(bytes.fromhex(_strip(e)) for _n, e in self.parts)
            etags = [f"{hashlib.md5(digests).hexdigest()}-{len(self.parts)}"]
        except ValueError:
            etags = []
        if single_put_etag:
            etags.append(single_put_etag)
        return PendingWrite(self.key, info.etag if info else "", self.size, self.upload_id or "", tuple(self.parts),
                            content_etags=tuple(etags))

    def abort(self) -> None:
        if self.upload_id:
            try:
                self.store.abort_pending(PendingWrite(self.key, "", self.size, self.upload_id))
            except StoreError:
                pass  # an open upload is reclaimed by vacuum / bucket lifecycle
        self.buf.clear()


def _is_precondition(e) -> bool:
    err = e.response.get("Error", {})
    return err.get("Code") in ("PreconditionFailed", "ConditionalRequestConflict") or \
        e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 412

