"""Fault injection for the crash tests, passed to SinkJob as its ``hooks`` (lakesink reads no fault from the
environment). ``KillAt`` SIGKILLs the driver at a named point of the commit protocol; ``RaiseAt`` raises
there (in-process tests, where the driver must survive)."""
from __future__ import annotations

import os
import signal
import threading

from lakesink.hooks import Hooks


class Crash(Exception):
    """What RaiseAt raises."""


class KillAt(Hooks):
    """``point[:arg]``: at driver point ``point`` SIGKILL the driver (``during_commit:MS``: MS after the commit
    starts); at executor point ``after_upload:N`` SIGKILL driver and worker after the (N+1)-th upload."""

    def __init__(self, spec: str, driver_pid: int | None = None):
        self.point, _, arg = spec.partition(":")
        self.arg = int(arg or 0)
        self.driver_pid = driver_pid or os.getpid()
        self.seen = 0

    def driver(self, point: str) -> None:
        if point != self.point:
            return
        if point == "during_commit":  # kill while the Delta commit is in flight
            threading.Timer((self.arg or 500) / 1000, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        else:
            os.kill(os.getpid(), signal.SIGKILL)

    def for_executors(self) -> Hooks:
        return self

    def executor(self, point: str) -> None:
        if point != self.point:
            return
        self.seen += 1
        if self.seen > self.arg:
            os.kill(self.driver_pid, signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)


class RaiseAt(Hooks):
    """Raise :class:`Crash` at driver point ``point`` (the batch then commits nothing)."""

    def __init__(self, point: str):
        self.point = point

    def driver(self, point: str) -> None:
        if point == self.point:
            raise Crash(point)


class CallAt(Hooks):
    """Call ``fn()`` at driver point ``point`` (driver only: never shipped to executors)."""

    def __init__(self, point: str, fn):
        self.point, self.fn = point, fn

    def driver(self, point: str) -> None:
        if point == self.point:
            self.fn()
