"""A local directory as an object store (``file://``): for development and for shared file systems mounted at the
same path on every node (NFS, DBFS FUSE). Creates are atomic hard links of a fully written temp file."""
from __future__ import annotations

import hashlib
import os
import stat
import uuid
from typing import Iterator
from urllib.parse import urlparse

from lakesink.errors import ObjectChangedError, StoreError
from lakesink.store.base import (TEMP_MARKER, ObjectInfo, ObjectStore, ObjectWriter, PendingWrite, WrittenObject,
                                 strip_etag)
from lakesink.store.settings import StoreSettings

_XATTR_PREFIX = "user."


class LocalStore(ObjectStore):
    """Objects are files at ``<root>/<bucket>/<key>``; ETag = MD5 hex of the content (as S3 PUT)."""

    def __init__(self, settings: StoreSettings):
        self.settings = settings
        path = urlparse(settings.s3.endpoint_url).path
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
        if etag is not None and hashlib.md5(data).hexdigest() != strip_etag(etag):
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


