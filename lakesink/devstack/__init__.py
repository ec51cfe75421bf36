"""The embedded local stack: a real Kafka broker, an S3 endpoint and (optionally) a Spark standalone cluster.

Used by the integration tests (``tests/integration/conftest.py``), by ``make demo`` and by
``lakesink dev up|down|status``. Everything binds to 127.0.0.1 on free ports and cleans up after itself.

- :class:`lakesink.devstack.kafka.KafkaBroker` -- single-node KRaft Apache Kafka from ``.cache/jars/kafka``.
- :class:`lakesink.devstack.s3.S3Endpoint` -- moto's S3 server (in-process thread, or a separate process).
- :class:`lakesink.devstack.spark_cluster.StandaloneCluster` -- Spark master + N workers.

This module only holds the small process helpers the three share (stdlib only, cheap to import).
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Callable, Iterable


from lakesink.errors import DevStackError

MIN_JAVA = 17
LOOPBACK = "127.0.0.1"


def repo_root() -> Path:
    """The source checkout this package lives in (``lakesink/devstack/__init__.py`` -> two levels up)."""
    return Path(__file__).resolve().parents[2]


def jars_dir(kind: str, env_var: str | None = None) -> Path:
    """The directory of jar set ``kind`` (``kafka``, ``registry``, ``spark``): ``$env_var``, else the checkout's
    ``.cache/jars/<kind>``, else the user cache ``lakesink setup`` fills (:func:`lakesink.runtime.jars.find_dir`);
    NotInstalledError (exit 5) naming the command that downloads them when none holds a jar."""
    from lakesink.runtime.jars import SET_ENV, find_dir

    if env_var and env_var != SET_ENV.get(kind):
        override = os.environ.get(env_var)
        if override and any(Path(override).glob("*.jar")):
            return Path(override)
    return find_dir(kind)


def require_moto(command: str) -> None:
    """NotInstalledError (one line, naming the extra that brings it) when moto, the local S3 endpoint, is absent."""
    import importlib.util

    if importlib.util.find_spec("moto") is None:
        from lakesink.errors import NotInstalledError

        raise NotInstalledError(f"{command} needs moto for its local S3 endpoint, which is not installed: "
                                f"pip install 'lakesink[local]'")


# ---------------------------------------------------------------------------------------------- Java

def parse_java_version(text: str) -> int:
    """Major version from ``java -version`` output: ``"1.8.0_292"`` -> 8, ``"17.0.15"`` -> 17, ``"21"`` -> 21."""
    m = re.search(r'version\s+"([^"]+)"', text)
    if not m:
        raise DevStackError(f"cannot parse the Java version from: {text.strip()[:200]!r}")
    ver = m.group(1)
    parts = re.split(r"[._+\-]", ver)
    try:
        major = int(parts[0])
        if major == 1 and len(parts) > 1:
            major = int(parts[1])
    except ValueError:
        raise DevStackError(f"cannot parse the Java version {ver!r}") from None
    return major


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` if set, else ``java`` from PATH; DevStackError if there is none."""
    home = os.environ.get("JAVA_HOME")
    if home:
        cand = Path(home) / "bin" / "java"
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    found = shutil.which("java")
    if not found:
        raise DevStackError(
            f"java not found (JAVA_HOME unset/invalid and no java on PATH): install Java >= {MIN_JAVA} "
            f"(e.g. `apt-get install openjdk-17-jdk-headless`) or set JAVA_HOME"
        )
    return found


_java_checked: dict[str, int] = {}


def check_java(minimum: int = MIN_JAVA) -> str:
    """Return the java executable after checking its major version is >= ``minimum`` (cached)."""
    java = java_executable()
    if java not in _java_checked:
        try:
            out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise DevStackError(f"cannot run {java} -version: {e}") from None
        _java_checked[java] = parse_java_version(out.stderr + out.stdout)
    major = _java_checked[java]
    if major < minimum:
        raise DevStackError(
            f"{java} is Java {major}; lakesink needs Java >= {minimum}: install a newer JDK or set JAVA_HOME"
        )
    return java


# ------------------------------------------------------------------------------------------- Ports

def free_port(host: str = LOOPBACK) -> int:
    """A port that was free a moment ago (bind to 0, read, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def ensure_port_free(port: int, what: str, host: str = LOOPBACK) -> None:
    """DevStackError naming the service when an explicitly requested port is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            raise DevStackError(
                f"{what}: port {host}:{port} is already in use ({e.strerror}); "
                f"pick another port or pass 0 for a free one"
            ) from None


def port_open(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------------------- Processes

_PR_SET_PDEATHSIG = 1
_prctl = None


def _load_prctl():
    """libc's prctl, loaded in the parent: the forked child must not import or dlopen anything."""
    global _prctl
    if _prctl is None and sys.platform.startswith("linux"):
        try:
            import ctypes

            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _prctl = False
    return _prctl or None


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """preexec_fn: ask Linux to SIGKILL this child when the parent (thread) that forked it exits."""
    if _prctl:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def spawn(
    argv: list[str],
    log_path: Path,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    detach: bool = False,
) -> subprocess.Popen:
    """Start ``argv`` with stdout+stderr appended to ``log_path``.

    ``detach=False`` (tests, demo): the child gets PR_SET_PDEATHSIG=SIGKILL (Linux), so it dies with the
    thread that started it -- start services from the main thread. ``detach=True`` (``lakesink dev up``):
    a new session, no death signal, the child outlives us.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "ab")
    try:
        kwargs: dict = dict(stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        if detach:
            kwargs["start_new_session"] = True
        elif _load_prctl() is not None:
            kwargs["preexec_fn"] = _die_with_parent
        return subprocess.Popen(argv, **kwargs)
    except OSError as e:
        raise DevStackError(f"cannot start {argv[0]}: {e}") from None
    finally:
        log.close()


def terminate(proc: subprocess.Popen | None, timeout: float = 20.0) -> None:
    """SIGTERM, wait up to ``timeout`` s, then SIGKILL. Safe to call twice."""
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.terminate()
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours still "exists": reap it if we can
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    return True


def kill_pid(pid: int, timeout: float = 20.0) -> None:
    """SIGTERM a (non-child) pid, wait, then SIGKILL."""
    if not pid_alive(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(empty log)"


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    interval: float = 0.25,
    alive: Callable[[], bool] | None = None,
) -> bool:
    """Poll ``check`` until true (-> True), the timeout passes or ``alive()`` turns false (-> False)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return True
        except Exception:
            pass
        if alive is not None and not alive():
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


_to_stop: "weakref.WeakSet" = weakref.WeakSet()


def register_for_exit(service: object) -> None:
    """Stop ``service`` (calls ``.stop()``) at interpreter exit if the caller forgot."""
    _to_stop.add(service)


def unregister_for_exit(service: object) -> None:
    _to_stop.discard(service)


@atexit.register
def stop_registered() -> None:  # pragma: no cover - exit path
    """Stop every service still registered (at interpreter exit, or before a deliberate ``os._exit``)."""
    for svc in list(_to_stop):
        try:
            svc.stop()  # type: ignore[attr-defined]
        except Exception:
            pass


def classpath(jars: Iterable[Path]) -> str:
    return os.pathsep.join(str(j) for j in jars)


__all__ = [
    "DevStackError",
    "LOOPBACK",
    "MIN_JAVA",
    "check_java",
    "classpath",
    "ensure_port_free",
    "free_port",
    "jars_dir",
    "require_moto",
    "java_executable",
    "kill_pid",
    "log_tail",
    "parse_java_version",
    "pid_alive",
    "port_open",
    "register_for_exit",
    "repo_root",
    "spawn",
    "terminate",
    "unregister_for_exit",
    "wait_until",
]
