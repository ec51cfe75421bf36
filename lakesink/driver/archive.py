"""Reading the archive back through the manifest (never by listing the bucket), on the driver.

The readers run where the records are needed, so they live in :mod:`lakesink.executor.readback` (they also
run in Spark's Python workers); this module keeps their names for driver-side callers and notebooks.
Every failure is a :class:`lakesink.errors.ArchiveReadError` or the store's own
:class:`lakesink.errors.StoreError` (missing object, :class:`~lakesink.errors.ObjectChangedError`).
"""
from __future__ import annotations

from lakesink.executor.readback import (FIELDS, ArchivedObject, Cut, RestoredRecord, iter_objects, read_object,
                                        read_records)

__all__ = ["FIELDS", "ArchivedObject", "Cut", "RestoredRecord", "iter_objects", "read_object", "read_records"]
