"""The last record per key of one source partition: the selection of ``restore --latest-per-key`` (pure).

A restore with ``latest_per_key`` reads one source partition's selection twice, in source-offset order:

1. :meth:`LatestPerKey.scan` sees every selected record's offset and key (the ``.keys`` side file, bytes as
   :func:`lakesink.executor.readback.read_key_positions` gives them: keys are compared as those bytes) and keeps,
   per key, the position of its last record;
2. :meth:`LatestPerKey.verdict` then says, for each record read again in the same order, whether it is that last
   record (:data:`KEEP`), an older version of its key (:data:`SUPERSEDED`), or the last record but a tombstone
   (null value) dropped on request (:data:`TOMBSTONE`).

A position is ``(offset, n)``: records a transform made of one Kafka record share its offset
(:mod:`lakesink.transforms`), so ``n`` counts the earlier records of that offset with the same key. Only the
records after a record can supersede it, so a scan may start anywhere before the first record that will be
produced (a resumed restore skips what its progress covers, see :mod:`lakesink.executor.restore`).

A record without a key (null, not empty) has no "latest": :class:`~lakesink.errors.RestoreRefusedError` names
it (Kafka's compaction refuses keyless records too; the sink never archives a null key with
``store.kafka.keys=true``). Memory: one dict entry per distinct key (the key bytes, a Python int, about 100
bytes more per key), for one source partition at a time per worker.
"""
from __future__ import annotations

from typing import Sequence

from lakesink.errors import RestoreRefusedError

__all__ = ["KEEP", "SUPERSEDED", "TOMBSTONE", "LatestPerKey", "latest_per_key"]

KEEP = "keep"
SUPERSEDED = "superseded"
TOMBSTONE = "tombstone"


class LatestPerKey:
    """Per key, the position of its last record in one source partition's selection (see the module docstring).

    ``where``: how to name the source partition in an error (``orders-0``)."""

    def __init__(self, where: str = "", drop_tombstones: bool = False):
        self.where = where
        self.drop_tombstones = drop_tombstones
        self.last: dict[bytes, int] = {}  # key -> offset of its last record
        self.repeats: dict[bytes, int] = {}  # key -> n of its last record when n > 0 (transforms only)
        self.scanned = 0
        self._scan_at: int | None = None  # offset of the records scanned last, and their keys' counts
        self._scan_seen: dict[bytes, int] = {}
        self._read_at: int | None = None
        self._read_seen: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self.last)

    def _keyless(self, offset: int) -> RestoreRefusedError:
        return RestoreRefusedError(
            f"record {self.where}@{offset} has no key: --latest-per-key keeps the last record of each key, and a "
            f"keyless record has none (a compacted topic refuses keyless records); restore without "
            f"--latest-per-key, or leave it out with --from-offset/--to-offset or --where; nothing of "
            f"{self.where} was produced by this run")

    def scan(self, offsets: Sequence[int], keys: Sequence[bytes | None]) -> None:
        """First pass: records in source-offset order (several calls continue one another)."""
        last, repeats = self.last, self.repeats
        for offset, key in zip(offsets, keys):
            if key is None:
                raise self._keyless(offset)
            if offset != self._scan_at:
                self._scan_at, self._scan_seen = offset, {}
            n = self._scan_seen.get(key, 0)
            self._scan_seen[key] = n + 1
            last[key] = offset
            if n:
                repeats[key] = n
            else:
                repeats.pop(key, None)
        self.scanned += len(offsets)

    def verdict(self, offset: int, key: bytes | None, value: bytes | None) -> str:
        """Second pass, one record at a time in the same order: :data:`KEEP`, :data:`SUPERSEDED` or
        :data:`TOMBSTONE` (the key's last record, a null value, and ``drop_tombstones``)."""
        if key is None:
            raise self._keyless(offset)
        if offset != self._read_at:
            self._read_at, self._read_seen = offset, {}
        n = self._read_seen.get(key, 0)
        self._read_seen[key] = n + 1
        if self.last.get(key) != offset or self.repeats.get(key, 0) != n:
            return SUPERSEDED
        if value is None and self.drop_tombstones:
            return TOMBSTONE
        return KEEP

    def kept_offsets(self) -> list[int]:
        """The offsets of the last records, ascending (with repeats when a transform made several)."""
        return sorted(self.last.values())


def latest_per_key(records: Sequence[tuple[int, bytes | None, bytes | None]], drop_tombstones: bool = False,
                   where: str = "") -> list[tuple[int, bytes | None, bytes | None]]:
    """The ``(offset, key, value)`` records (source-offset order) :class:`LatestPerKey` keeps, in the same order:
    the whole selection logic in one call (for tests and small selections)."""
    sel = LatestPerKey(where, drop_tombstones)
    sel.scan([r[0] for r in records], [r[1] for r in records])
    return [r for r in records if sel.verdict(r[0], r[1], r[2]) == KEEP]
