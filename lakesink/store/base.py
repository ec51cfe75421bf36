"""The object-store interface every store implements (:class:`ObjectStore`, :class:`ObjectWriter`) and the small
values they exchange (:class:`ObjectInfo`, :class:`WrittenObject`, :class:`PendingWrite`, upload metadata). See
:mod:`lakesink.store` for the create-only protocol; :mod:`lakesink.store.local` and :mod:`lakesink.store.s3`
implement it."""
from __future__ import annotations

import io
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, TypeVar

from lakesink.errors import ObjectChangedError
from lakesink.store.settings import StoreSettings

T = TypeVar("T")

MIN_PART_SIZE = 5 * 1024 * 1024
TEMP_MARKER = ".lakesink-tmp-"
# User metadata every lakesink upload carries (S3 ``x-amz-meta-*``; local files: ``user.*`` xattrs).
# It is how vacuum and conflict resolution tell this job's orphans from anyone else's objects.
OWNER_KEY = "lakesink-job"
RUN_KEY = "lakesink-run-id"
BATCH_KEY = "lakesink-batch-id"


def upload_metadata(job: str, run_id: str, batch_id: int) -> dict[str, str]:
    """The metadata of one upload of ``job``'s run ``run_id``, batch ``batch_id``."""
    return {OWNER_KEY: job, RUN_KEY: run_id, BATCH_KEY: str(batch_id)}


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


def strip_etag(etag: str | None) -> str:
    """An ETag without the quotes S3 puts around it."""
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

    def head_many(self, keys: Iterable[str]) -> dict[str, ObjectInfo | None]:
        """:meth:`head` of each of ``keys`` (None: no such object), without the user metadata and version ids
        :meth:`list` does not give either. A store may answer from fewer requests than one per key (S3: a listing
        per directory), and a listing may lag behind a write on a store that is not strongly consistent: a caller
        that acts on an absence or on a changed ETag confirms it with :meth:`head`."""
        from concurrent.futures import ThreadPoolExecutor

        unique = list(dict.fromkeys(keys))
        with ThreadPoolExecutor(max_workers=16) as pool:  # HEADs are latency-bound: overlap them
            return dict(zip(unique, pool.map(self.head, unique)))

    def confirmed_heads(self, expected: Mapping[str, str | None]) -> dict[str, ObjectInfo | None]:
        """:meth:`head_many` of ``expected``'s keys (key -> the ETag expected, None: any), with every key it shows
        gone or holding another ETag asked again with :meth:`head`: what a caller refuses or fails on is never a
        listing that lags behind a write."""
        current = self.head_many(expected)
        doubt = [k for k, info in current.items()
                 if info is None or (expected[k] is not None and info.etag != expected[k])]
        current.update(zip(doubt, map(self.head, doubt)))
        return current

    @abstractmethod
    def read(self, key: str, etag: str | None = None, version_id: str | None = None,
             byte_range: tuple[int, int] | None = None) -> bytes:
        """Read an object (or the inclusive byte range); with ``etag`` raise ObjectChangedError on mismatch."""

    @abstractmethod
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]: ...

    @abstractmethod
    def delete(self, key: str) -> None: ...

    def delete_version(self, key: str, version_id: str) -> None:
        """Delete one version of ``key`` for good (a versioned bucket keeps it after a plain delete); a store
        without versions deletes the key."""
        self.delete(key)

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
