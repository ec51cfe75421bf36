"""A clock the test drives, for code that takes ``clock=`` / ``sleep=`` (retry loops, stall detectors): the tests
count attempts and sleeps and name the event that ended a loop, instead of bounding how long it took."""
from __future__ import annotations


class FakeClock:
    """``clock()`` returns ``now``, which moves only by ``sleep(s)``, ``advance(s)`` or ``tick`` (added after each
    reading, for loops that read the clock once a round). Every sleep is kept in ``sleeps``. More than
    ``max_sleeps`` sleeps or ``max_reads`` readings raise AssertionError: a loop that would never end fails the
    test instead of hanging it."""

    def __init__(self, start: float = 0.0, tick: float = 0.0, max_sleeps: int = 1000, max_reads: int = 100_000):
        self.now, self.tick = start, tick
        self.sleeps: list[float] = []
        self.reads = 0
        self.max_sleeps, self.max_reads = max_sleeps, max_reads

    def __call__(self) -> float:
        self.reads += 1
        if self.reads > self.max_reads:
            raise AssertionError(f"the clock was read {self.reads} times: the loop never ended")
        now = self.now
        self.now += self.tick
        return now

    def sleep(self, seconds: float) -> None:
        """Record the sleep and move the clock by it; nothing waits."""
        self.sleeps.append(seconds)
        if len(self.sleeps) > self.max_sleeps:
            raise AssertionError(f"{len(self.sleeps)} sleeps: the loop never gave up")
        self.now += seconds

    def advance(self, seconds: float) -> None:
        """Time the code under test spends working (a request, a poll), not sleeping."""
        self.now += seconds


def upper_bound(lo: float, hi: float) -> float:
    """A backoff's jitter (``rng(lo, hi)``) always at its upper bound: the longest pauses, a fixed count."""
    return hi
