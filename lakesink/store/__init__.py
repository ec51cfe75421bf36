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

Modules: :mod:`~lakesink.store.settings` (one settings value: :class:`StoreSettings` holding its
:class:`S3Settings`), :mod:`~lakesink.store.base` (the interface and its values), :mod:`~lakesink.store.local`
and :mod:`~lakesink.store.s3` (the two stores). Every public name is importable from ``lakesink.store``.
"""
from __future__ import annotations

from lakesink.retry import MAX_BACKOFF_S, backoff_s  # shared with the Kafka clients; kept importable here
from lakesink.store.base import (BATCH_KEY, MIN_PART_SIZE, OWNER_KEY, RUN_KEY, TEMP_MARKER, ObjectInfo, ObjectStore,
                                 ObjectWriter, PendingWrite, WrittenObject, strip_etag, upload_metadata)
from lakesink.store.local import LocalStore
from lakesink.store.s3 import THROTTLE_CODES, S3Store
from lakesink.store.settings import S3Settings, StoreSettings

__all__ = ["open_store", "StoreSettings", "S3Settings", "ObjectStore", "ObjectWriter", "ObjectInfo", "WrittenObject",
           "PendingWrite", "LocalStore", "S3Store", "upload_metadata", "strip_etag", "MIN_PART_SIZE", "TEMP_MARKER",
           "OWNER_KEY", "RUN_KEY", "BATCH_KEY", "THROTTLE_CODES", "backoff_s", "MAX_BACKOFF_S"]


def open_store(settings: StoreSettings) -> ObjectStore:
    """The store for ``settings``: a local directory for ``file://`` endpoints, else S3."""
    if settings.is_local:
        return LocalStore(settings)
    return S3Store(settings)
