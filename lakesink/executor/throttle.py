"""A steady rate limit for a restore worker (``lakesink restore --max-rate``), pure.

A restore into a live cluster can take the destination's whole produce capacity; ``--max-rate N`` holds each
worker (one source partition, or one destination partition) to N records a second. :class:`Throttle` keeps the
schedule, not the gaps: record ``n`` is due ``n / rate`` seconds after the first, so a pause (a transaction
commit, a slow read) is caught up at once instead of lowering the rate for good, and no burst goes beyond that
schedule.
"""
from __future__ import annotations

import time
from typing import Callable

__all__ = ["Throttle"]


class Throttle:
    """``rate`` records per second from the first :meth:`delay` call on (``clock``: seconds, monotonic)."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic):
        if not rate > 0:
            raise ValueError(f"a rate limit is > 0 records per second, not {rate!r}")
        self.rate, self.clock = float(rate), clock
        self.start: float | None = None

    def delay(self, done: int) -> float:
        """Seconds to wait before the record after ``done`` records may go (0: now)."""
        now = self.clock()
        if self.start is None:
            self.start = now
        return max(0.0, self.start + done / self.rate - now)
