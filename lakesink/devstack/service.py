"""What the devstack's JVM services share: a child process on loopback ports, started with a bounded wait for
readiness, retried on a bind race for ports it picked itself, its log kept when a start fails."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from lakesink.devstack import log_tail, port_open, register_for_exit, wait_until
from lakesink.errors import DevStackError

BIND_RACE = ("Address already in use", "Port already bound")

#: extra JVM options of the devstack's services (space-separated), e.g. ``-XX:TieredStopAtLevel=1`` where many
#: short-lived brokers start (the test suite), and C2's faster code never pays for its compile time
JVM_OPTIONS_ENV = "LAKESINK_DEV_JVM_OPTIONS"


def jvm_options() -> list[str]:
    """The services' extra JVM options from ``$LAKESINK_DEV_JVM_OPTIONS`` (none when unset)."""
    return os.environ.get(JVM_OPTIONS_ENV, "").split()


class JvmService:
    """Base of :class:`~lakesink.devstack.kafka.KafkaBroker` and :class:`~lakesink.devstack.registry.SchemaRegistry`.

    Subclasses set ``_proc`` in their ``_start_once``, define ``log_path`` and ``stop``, and name themselves in
    ``failed_log_prefix`` (the temp-dir name a failed start's log is copied to)."""

    failed_log_prefix = "lakesink-service-failed"
    start_timeout: float = 60.0
    _proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, timeout: float = 20.0) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self):  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _start_retrying(self, start_once: Callable[[], None], auto_ports: bool, owns_log: Callable[[], bool]):
        """``start_once()``; with ports picked here, again (up to 3 times) if another process took one first."""
        last_error: DevStackError | None = None
        for _ in range(3 if auto_ports else 1):
            try:
                start_once()
                register_for_exit(self)
                return self
            except DevStackError as e:
                last_error = e
                if owns_log():
                    self._keep_failed_log()
                self.stop()
                if not (auto_ports and any(s in str(e) for s in BIND_RACE)):
                    break
        assert last_error is not None
        raise last_error

    def _wait_ready(self, port: int, ready: Callable[[], bool], interval: float, what: str) -> None:
        """Wait (within ``start_timeout``) for ``port`` to open, then for ``ready()``; DevStackError with the
        log tail if the process exits or time runs out."""
        assert self._proc is not None
        t0 = time.monotonic()
        ok = wait_until(lambda: port_open(port), self.start_timeout, alive=self.running)
        if ok:
            ok = wait_until(ready, max(5.0, self.start_timeout - (time.monotonic() - t0)), interval=interval,
                            alive=self.running)
        if not ok:
            state = (f"exited with {self._proc.returncode}" if not self.running()
                     else f"not ready after {self.start_timeout:.0f}s")
            raise DevStackError(f"{what} {state} (full log copied to {tempfile.gettempdir()}/"
                                f"{self.failed_log_prefix}-*.log); log tail:\n{log_tail(self.log_path)}")

    def _keep_failed_log(self) -> None:
        """Copy the log out of the service's temp dir (which stop() removes) for post-mortems."""
        if self.log_path.exists():
            kept = Path(tempfile.gettempdir()) / f"{self.failed_log_prefix}-{os.getpid()}-{int(time.time())}.log"
            try:
                shutil.copyfile(self.log_path, kept)
            except OSError:
                pass


__all__ = ["JvmService", "BIND_RACE"]
