"""Bounded retries shared by the clients of every dependency (S3, Kafka metadata): full-jitter exponential
backoff and a total deadline, so a dependency that stays down fails the batch in bounded time."""
from __future__ import annotations

import random
import time
from typing import Callable, TypeVar

T = TypeVar("T")

#: Upper bound of one backoff sleep.
MAX_BACKOFF_S = 10.0


def backoff_s(attempt: int, base_ms: int, rng: Callable[[float, float], float] = random.uniform) -> float:
    """Full-jitter exponential backoff before retry ``attempt`` (1-based): uniform in [0, base·2^(attempt-1)],
    capped at :data:`MAX_BACKOFF_S`."""
    cap = min(MAX_BACKOFF_S, base_ms / 1000.0 * (2 ** min(attempt - 1, 20)))
    return rng(0.0, cap)


def retry_until(fn: Callable[[], T], deadline_s: float, base_ms: int,
                retryable: Callable[[BaseException], bool], *, clock: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], None] = time.sleep,
                rng: Callable[[float, float], float] = random.uniform) -> tuple[T, int]:
    """``fn()`` retried while ``retryable(error)`` and the next attempt would start before ``deadline_s`` from
    now; returns (result, retries made). The last error is re-raised when giving up; ``fn`` bounds one attempt.
    ``clock``, ``sleep`` and ``rng`` (the backoff's jitter) are the real ones unless a test scripts them."""
    deadline = clock() + deadline_s
    attempt = 0
    while True:
        try:
            return fn(), attempt
        except Exception as e:  # noqa: BLE001 - classified by ``retryable``
            attempt += 1
            pause = backoff_s(attempt, base_ms, rng)
            if not retryable(e) or clock() + pause >= deadline:
                raise
            sleep(pause)


__all__ = ["MAX_BACKOFF_S", "backoff_s", "retry_until"]
