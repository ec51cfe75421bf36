"""S3 as an object store, through boto3: streamed multipart uploads, conditional creates (``If-None-Match``),
replacing exactly one orphan version (``If-Match``), bounded retries with full-jitter backoff."""
from __future__ import annotations

import hashlib
import time
from typing import Callable, Iterable, Iterator, TypeVar

from lakesink.errors import ObjectChangedError, PreconditionFailed, StoreError
from lakesink.retry import backoff_s
from lakesink.store.base import (MIN_PART_SIZE, ObjectInfo, ObjectStore, ObjectWriter, PendingWrite, WrittenObject,
                                 strip_etag)
from lakesink.store.settings import StoreSettings

T = TypeVar("T")

#: keys a ListObjectsV2 page returns in :meth:`S3Store.head_many` (S3's maximum)
LIST_PAGE = 1000
#: threads of :meth:`S3Store.head_many`: botocore's default connection pool
POOL_THREADS = 10
#: directories under one parent that :meth:`S3Store.head_many` lists as one (below it: a listing each)
PARENT_DIRS = 8


_RETRYABLE_CODES = {"RequestTimeout", "SlowDown", "InternalError", "ServiceUnavailable", "Throttling",
                    "ThrottlingException", "RequestTimeTooSkewed", "503", "500"}
#: Error codes S3 asks to be retried with backoff for as long as it takes (they count against the deadline only).
THROTTLE_CODES = {"SlowDown", "ServiceUnavailable", "Throttling", "ThrottlingException", "503"}


class S3Store(ObjectStore):
    """S3 through boto3. Retries: ``s3.part.retries`` attempts with full-jitter exponential
    backoff from ``s3.retry.backoff.ms`` (Confluent's mapping of the same keys)."""

    def __init__(self, settings: StoreSettings):
        from botocore.config import Config

        self.settings = settings
        cfg = Config(
            region_name=settings.s3.region,
            s3={"addressing_style": "path" if settings.s3.path_style else "auto"},
            retries={"total_max_attempts": 1, "mode": "standard"},  # one try per call: we retry, counted
            connect_timeout=10,
            read_timeout=60,
        )
        from lakesink.credentials import boto3_client, is_missing_credentials, missing_credentials

        try:
            self.client = boto3_client(settings.credential_source(), settings.s3.region, "s3", settings.s3.endpoint_url,
                                       cfg, variant=settings.s3.path_style)
        except Exception as e:  # noqa: BLE001 - AWS_PROFILE naming no profile fails here already
            if is_missing_credentials(e):
                raise missing_credentials(f"S3 endpoint {settings.where} (bucket "
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
                    raise missing_credentials(f"{what} {self.uri(key)} at {s.where}",
                                              s.credential_source(), e) from None
                transient += 1
                failure = StoreError(f"{what} {self.uri(key)} failed: {e}")
            attempt += 1
            pause = backoff_s(attempt, s.retry_backoff_ms)
            if transient > s.part_retries or time.monotonic() + pause > deadline:
                raise StoreError(f"{failure} (gave up after {attempt} attempt(s); endpoint "
                                 f"{s.where}, s3.part.retries={s.part_retries}, "
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
        return WrittenObject(pending.key, self.uri(pending.key), strip_etag(r.get("ETag")), pending.size, r.get("VersionId"))

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
        return ObjectInfo(key, r["ContentLength"], strip_etag(r["ETag"]), r["LastModified"].timestamp(),
                          r.get("VersionId"), dict(r.get("Metadata") or {}))

    def read(self, key, etag=None, version_id=None, byte_range=None) -> bytes:
        kw: dict = {"Bucket": self.settings.bucket, "Key": key}
        if etag:
            kw["IfMatch"] = f'"{strip_etag(etag)}"'
        if version_id:
            kw["VersionId"] = version_id
        if byte_range:
            kw["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
        try:
            return self.call("GetObject", key, lambda: self.client.get_object(**kw)["Body"].read())
        except PreconditionFailed:
            raise ObjectChangedError(f"{self.uri(key)}: object no longer has the recorded etag {etag}") from None

    def _pages(self, op: str, what: str, prefix: str, token_in: str, token_out: str, **extra) -> Iterator[dict]:
        """Every page of a listing (``extra``: more request parameters), each page fetched through :meth:`call` (so
        retried like any request)."""
        fn = getattr(self.client, op)
        kw: dict = {"Bucket": self.settings.bucket, "Prefix": prefix, **extra}
        while True:
            page = self.call(what, prefix, lambda: fn(**kw))
            yield page
            if not page.get("IsTruncated"):
                return
            kw = {**kw, **{k: page[v] for k, v in zip(token_in.split(","), token_out.split(",")) if page.get(v)}}

    def _object_pages(self, prefix: str, **extra) -> Iterator[tuple[list[ObjectInfo], bool]]:
        """Per ListObjectsV2 page under ``prefix`` (``extra``: StartAfter, MaxKeys): its objects, and whether more
        pages follow."""
        for page in self._pages("list_objects_v2", "ListObjectsV2", prefix, "ContinuationToken",
                                "NextContinuationToken", **extra):
            yield ([ObjectInfo(o["Key"], o["Size"], strip_etag(o["ETag"]), o["LastModified"].timestamp())
                    for o in page.get("Contents", [])], bool(page.get("IsTruncated")))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        for infos, _more in self._object_pages(prefix):
            yield from infos

    def head_many(self, keys: Iterable[str]) -> dict[str, ObjectInfo | None]:
        """:meth:`ObjectStore.head_many` from bounded listings instead of a HEAD per key. Where
        :data:`PARENT_DIRS` or more directories under one parent hold keys asked for (a restore's or a sink batch's
        partition directories), first one listing of the parent from just before its first key; then one listing
        per directory holding several of the keys that listing did not reach, from just before its first key
        until past its last; and a HEAD each for a key alone in its directory, where listing fails (no
        ``s3:ListBucket``), and for the keys a bounded listing does not reach. Pages hold four entries per key
        asked for (100 to :data:`LIST_PAGE`), at most ``2 + keys // page`` of them for a directory and
        ``1 + keys // page`` for a parent, so a directory crowded between the keys is not listed to its end. A sink
        batch of 64 partitions HEADed 256 files before its commit; it lists 64 directories instead, and a
        restore of a 64-partition archive one parent."""
        from collections import defaultdict
        from concurrent.futures import ThreadPoolExecutor

        by_dir: dict[str, list[str]] = defaultdict(list)
        for key in dict.fromkeys(keys):
            by_dir[key.rpartition("/")[0]].append(key)
        out: dict[str, ObjectInfo | None] = {}
        by_parent: dict[str, list[str]] = defaultdict(list)
        for d in by_dir:
            by_parent[d.rpartition("/")[0]].append(d)
        for parent, dirs in by_parent.items():
            if len(dirs) < PARENT_DIRS:
                continue
            found, unreached = self._listed(sorted(k for d in dirs for k in by_dir.pop(d)),
                                            f"{parent}/" if parent else "", slack=1)
            out.update(found)
            for key in unreached:
                by_dir[key.rpartition("/")[0]].append(key)
        heads = [ks[0] for ks in by_dir.values() if len(ks) == 1]
        # no more threads than the client's connection pool (botocore's default 10): a thread past it opens a
        # connection of its own and drops it after the call
        with ThreadPoolExecutor(max_workers=POOL_THREADS) as pool:
            for found, unreached in pool.map(self._listed, [sorted(ks) for ks in by_dir.values() if len(ks) > 1]):
                out.update(found)
                heads += unreached
            out.update(zip(heads, pool.map(self.head, heads)))
        return out

    def _listed(self, keys: list[str], prefix: str | None = None,
                slack: int = 2) -> tuple[dict[str, ObjectInfo | None], list[str]]:
        """(what one bounded listing of ``prefix`` (default: the sorted ``keys``' directory) says of them, the keys
        it did not reach); at most ``slack + keys // page`` pages."""
        if prefix is None:
            directory = keys[0].rpartition("/")[0]
            prefix = f"{directory}/" if directory else ""
        # pages sized to the keys asked for: a few keys among many others cost a short page, not 1000 parsed keys
        page_size = min(LIST_PAGE, max(100, 4 * len(keys)))
        wanted, found, last = set(keys), {}, ""
        try:
            pages = self._object_pages(prefix, StartAfter=keys[0][:-1], MaxKeys=page_size)
            for n, (infos, more) in enumerate(pages, 1):
                found.update((i.key, i) for i in infos if i.key in wanted)
                last = max([last, *(i.key for i in infos)])
                if not more or last >= keys[-1]:  # listed past every key asked for: absent means absent
                    break
                if n == slack + len(keys) // page_size:  # crowded between the keys: the rest another way
                    return {k: found.get(k) for k in keys if k <= last}, [k for k in keys if k > last]
        except StoreError:  # e.g. no s3:ListBucket on this prefix: HEADs need only s3:GetObject
            return {}, keys
        return {k: found.get(k) for k in keys}, []

    def list_uploads(self, prefix: str = "") -> Iterator[tuple[str, str, float]]:
        """Open multipart uploads: (key, upload id, initiated epoch seconds)."""
        for page in self._pages("list_multipart_uploads", "ListMultipartUploads", prefix,
                                "KeyMarker,UploadIdMarker", "NextKeyMarker,NextUploadIdMarker"):
            for u in page.get("Uploads", []):
                yield u["Key"], u["UploadId"], u["Initiated"].timestamp()

    def delete(self, key: str) -> None:
        self.call("DeleteObject", key, lambda: self.client.delete_object(Bucket=self.settings.bucket, Key=key))

    def delete_version(self, key: str, version_id: str) -> None:
        self.call("DeleteObject", key, lambda: self.client.delete_object(Bucket=self.settings.bucket, Key=key,
                                                                          VersionId=version_id))

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
            data = self.buf  # as it is: botocore sends (and hashes) a bytearray body without a copy
            try:
                r = s.call("PutObject(If-None-Match)", self.key, lambda: s.client.put_object(
                    Bucket=b, Key=self.key, Body=data, IfNoneMatch="*", Metadata=self.metadata, **s._extra()))
            except PreconditionFailed:
                # stage our bytes as a one-part multipart upload the driver may complete
                etag = hashlib.md5(data).hexdigest()
                self._send_part(bytes(data))
                self.buf.clear()
                return self._pending(single_put_etag=etag)
            self.buf.clear()
            return WrittenObject(self.key, s.uri(self.key), strip_etag(r.get("ETag")), self.size, r.get("VersionId"))
        if self.buf:
            self._send_part(bytes(self.buf))
            self.buf.clear()
        parts = [{"PartNumber": n, "ETag": e} for n, e in self.parts]
        try:
            r = s.call("CompleteMultipartUpload(If-None-Match)", self.key, lambda: s.client.complete_multipart_upload(
                Bucket=b, Key=self.key, UploadId=self.upload_id, MultipartUpload={"Parts": parts}, IfNoneMatch="*"))
        except PreconditionFailed:
            return self._pending()
        return WrittenObject(self.key, s.uri(self.key), strip_etag(r.get("ETag")), self.size, r.get("VersionId"))

    def _pending(self, single_put_etag: str | None = None) -> PendingWrite:
        info = self.store.head(self.key)
        # S3's multipart ETag is md5(concatenated part md5s)-N, and a part's ETag is its md5
        # (not under SSE-KMS: then nothing matches and the object is replaced, never adopted).
        try:
            digests = b"".join(bytes.fromhex(strip_etag(e)) for _n, e in self.parts)
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

