"""Which archived records a read takes: :class:`Cut` (offset and timestamp bounds), decided per record and,
from the manifest row alone, per object (:mod:`lakesink.executor.readback` reads with it; restore and
``read_archive`` build it)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cut:
    """Which records to take: offsets in ``[from_offset, to_offset]`` and timestamps in ``[from_ts, to_ts]``
    (epoch ms; None = unbounded). With a time bound, records without a timestamp are left out."""

    from_offset: int | None = None
    to_offset: int | None = None
    from_ts: int | None = None
    to_ts: int | None = None

    @property
    def by_time(self) -> bool:
        return self.from_ts is not None or self.to_ts is not None

    def admits(self, offset: int | None, ts: int | None) -> bool:
        """Whether one record is inside the cut."""
        if offset is not None and ((self.from_offset is not None and offset < self.from_offset)
                                   or (self.to_offset is not None and offset > self.to_offset)):
            return False
        if self.by_time:
            if ts is None:
                return False
            if (self.from_ts is not None and ts < self.from_ts) or (self.to_ts is not None and ts > self.to_ts):
                return False
        return True

    def object_overlap(self, obj: Any) -> bool | None:
        """From the manifest row alone (``obj``: a readback ``ArchivedObject``): False if no record of ``obj``
        can be in the cut, True if every record is, None if the cut may fall inside the object."""
        lo, hi = obj.first_offset, obj.last_offset
        if (self.from_offset is not None and hi < self.from_offset) or (self.to_offset is not None and lo > self.to_offset):
            return False
        inside = (self.from_offset is None or lo >= self.from_offset) and (self.to_offset is None or hi <= self.to_offset)
        if self.by_time:
            tmin, tmax = obj.min_timestamp_ms, obj.max_timestamp_ms
            if tmin is None or tmax is None:
                return None
            if (self.from_ts is not None and tmax < self.from_ts) or (self.to_ts is not None and tmin > self.to_ts):
                return False
            inside = inside and (self.from_ts is None or tmin >= self.from_ts) and (self.to_ts is None or tmax <= self.to_ts)
        return True if inside else None


NO_CUT = Cut()
