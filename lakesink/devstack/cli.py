"""``lakesink dev up|down|status``: the local Kafka broker + S3 endpoint + Schema Registry as background processes.

``up`` launches ``python -m lakesink.devstack.stack`` in its own session (detached from the terminal; log in
``.lakesink/dev-stack.log``), waits (bounded) until it has written ``.lakesink/dev-stack.json`` (pids, ports,
endpoint) and returns how to reach the services. ``down`` stops it; ``status`` returns the state.
Paths are relative to the current directory unless ``state_file`` says otherwise. The functions return a
:class:`DevResult`; ``lakesink.cli.dev`` holds the argument parser and the rendering.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lakesink.devstack import kill_pid, log_tail, pid_alive, port_open, spawn
from lakesink.errors import DevStackError

@dataclass
class DevResult:
    """``lakesink dev up|down|status``."""

    action: str                # up | down | status
    running: bool
    message: str | None = None  # "dev stack up (...)", "dev stack not running", ...
    state: dict | None = None   # the stack's state file (pids, ports, endpoint, keys)
    state_file: str | None = None
    log: str | None = None
    ports_open: dict[str, bool] | None = None  # status only: {"kafka": bool, "s3": bool, "registry": bool}
    exit_code: int = 0


DEFAULT_STATE = Path(".lakesink") / "dev-stack.json"


def read_state(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise DevStackError(f"cannot read the dev stack state {path}: {e} (delete it if stale)") from None


def _running(state: dict | None) -> bool:
    return bool(state) and pid_alive(int(state.get("supervisor_pid", 0) or 0))


def up(state_file: Path = DEFAULT_STATE, kafka_port: int = 0, s3_port: int = 0, timeout: float = 120.0,
       registry_port: int = 0, registry: bool = True, kafka_security: str = "plaintext") -> DevResult:
    """Start the stack in the background (``registry=False``: no Schema Registry; ``kafka_security="sasl_ssl"``: the
    broker also listens with SASL_SSL, SCRAM-SHA-512 and a CA made for it, see
    :class:`lakesink.devstack.kafka.KafkaBroker`). What a service needs and is
    not installed (moto, Java, the jars) is named in one line before anything starts."""
    from lakesink.devstack.stack import LocalStack

    state_file = Path(state_file).absolute()
    log = state_file.with_name("dev-stack.log")
    state = read_state(state_file)
    if _running(state):
        return DevResult("up", True, f"dev stack already running (state: {state_file})", state,
                         str(state_file), str(log))
    if state is not None:
        state_file.unlink(missing_ok=True)  # stale: its supervisor is gone
        for key in ("kafka_pid", "registry_pid"):
            if state.get(key):
                kill_pid(int(state[key]), 10)
    LocalStack(registry=registry).check_installed("dev up")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as fh:
        fh.write(f"\n=== lakesink dev up {time.strftime('%Y-%m-%d %H:%M:%S')} ===\n".encode())
    proc = spawn(
        [sys.executable, "-m", "lakesink.devstack.stack", "--state-file", str(state_file),
         "--kafka-port", str(kafka_port), "--s3-port", str(s3_port), "--registry-port", str(registry_port),
         *([] if registry else ["--no-registry"]), "--kafka-security", kafka_security],
        log, detach=True,
    )
    deadline = time.monotonic() + timeout
    while True:
        state = read_state(state_file)
        if state and state.get("supervisor_pid") == proc.pid:
            break
        if proc.poll() is not None:
            raise DevStackError(f"the dev stack exited with {proc.returncode}; {log} tail:\n{log_tail(log)}")
        if time.monotonic() > deadline:
            kill_pid(proc.pid, 10)
            raise DevStackError(f"the dev stack was not ready after {timeout:.0f}s; {log} tail:\n"
                                f"{log_tail(log)}")
        time.sleep(0.25)
    return DevResult("up", True, f"dev stack up (state: {state_file}, log: {log})", state, str(state_file), str(log))


def down(state_file: Path = DEFAULT_STATE, timeout: float = 30.0) -> DevResult:
    state_file = Path(state_file).absolute()
    state = read_state(state_file)
    if state is None:
        return DevResult("down", False, "dev stack not running", None, str(state_file))
    sup = int(state.get("supervisor_pid", 0) or 0)
    if sup:
        kill_pid(sup, timeout)
    for key in ("kafka_pid", "registry_pid"):
        if state.get(key):
            kill_pid(int(state[key]), timeout)
    if sup and pid_alive(sup):
        raise DevStackError(f"supervisor pid {sup} is still alive after SIGKILL")
    state_file.unlink(missing_ok=True)
    return DevResult("down", False, "dev stack stopped", state, str(state_file))


def status(state_file: Path = DEFAULT_STATE) -> DevResult:
    """Exit code 1 when the stack is not running or one of its ports is closed."""
    state_file = Path(state_file).absolute()
    state = read_state(state_file)
    if not _running(state):
        msg = "dev stack not running" + (f" (stale state file {state_file})" if state else "")
        return DevResult("status", False, msg, state, str(state_file), exit_code=1)
    ports = {"kafka": port_open(int(state["kafka_port"])), "s3": port_open(int(state["s3_port"]))}
    if state.get("registry_port"):
        ports["registry"] = port_open(int(state["registry_port"]))
    return DevResult("status", True, None, state, str(state_file), str(state_file.with_name("dev-stack.log")),
                     ports_open=ports, exit_code=0 if all(ports.values()) else 1)
