"""``lakesink dev up|down|status``: the local Kafka broker + S3 endpoint as background processes.

``up`` launches ``python -m lakesink.devstack.stack`` in its own session (detached from the terminal; log in
``.lakesink/dev-stack.log``), waits (bounded) until it has written ``.lakesink/dev-stack.json`` (pids, ports,
endpoint) and prints how to reach the services. ``down`` stops it; ``status`` prints the state.
Paths are relative to the current directory unless ``--state-file`` says otherwise.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from lakesink.devstack import kill_pid, log_tail, pid_alive, port_open, spawn
from lakesink.errors import DevStackError

DEFAULT_STATE = Path(".lakesink") / "dev-stack.json"


def add_parser(sub: argparse._SubParsersAction) -> None:
    dev = sub.add_parser("dev", help="run the local stack (Kafka broker + S3 endpoint) in the background",
                         description=__doc__)
    dev_sub = dev.add_subparsers(dest="dev_command", metavar="ACTION")
    dev.set_defaults(func=lambda args: (dev.print_help(), 2)[1])

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--state-file", type=Path, default=DEFAULT_STATE,
                       help=f"where the stack's pids/ports are kept (default: {DEFAULT_STATE})")

    up = dev_sub.add_parser("up", help="start the broker and the S3 endpoint in the background")
    common(up)
    up.add_argument("--kafka-port", type=int, default=0, help="broker port (default: a free one)")
    up.add_argument("--s3-port", type=int, default=0, help="S3 endpoint port (default: a free one)")
    up.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the stack (default 120)")
    up.set_defaults(func=cmd_up)

    down = dev_sub.add_parser("down", help="stop the background stack")
    common(down)
    down.add_argument("--timeout", type=float, default=30.0)
    down.set_defaults(func=cmd_down)

    status = dev_sub.add_parser("status", help="print the background stack's endpoints (exit 1 if not running)")
    common(status)
    status.set_defaults(func=cmd_status)


def read_state(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise DevStackError(f"cannot read the dev stack state {path}: {e} (delete it if stale)") from None


def _running(state: dict | None) -> bool:
    return bool(state) and pid_alive(int(state.get("supervisor_pid", 0) or 0))


def _print_state(state: dict) -> None:
    print(f"Kafka bootstrap servers: {state['bootstrap_servers']}  (pid {state.get('kafka_pid')})")
    print(f"S3 endpoint:             {state['s3_endpoint']}  (access/secret key "
          f"{state['s3_access_key']}/{state['s3_secret_key']}, region {state['s3_region']}, path-style)")
    print(f"Supervisor pid:          {state['supervisor_pid']}")
    print(f"# export LAKESINK_BOOTSTRAP_SERVERS={state['bootstrap_servers']} "
          f"AWS_ENDPOINT_URL={state['s3_endpoint']} AWS_ACCESS_KEY_ID={state['s3_access_key']} "
          f"AWS_SECRET_ACCESS_KEY={state['s3_secret_key']} AWS_DEFAULT_REGION={state['s3_region']}")


def cmd_up(args: argparse.Namespace) -> int:
    state_file: Path = args.state_file.absolute()
    state = read_state(state_file)
    if _running(state):
        print(f"dev stack already running (state: {state_file})")
        _print_state(state)
        return 0
    if state is not None:
        state_file.unlink(missing_ok=True)  # stale: its supervisor is gone
        for key in ("kafka_pid",):
            if state.get(key):
                kill_pid(int(state[key]), 10)
    log = state_file.with_name("dev-stack.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as fh:
        fh.write(f"\n=== lakesink dev up {time.strftime('%Y-%m-%d %H:%M:%S')} ===\n".encode())
    proc = spawn(
        [sys.executable, "-m", "lakesink.devstack.stack", "--state-file", str(state_file),
         "--kafka-port", str(args.kafka_port), "--s3-port", str(args.s3_port)],
        log, detach=True,
    )
    deadline = time.monotonic() + args.timeout
    while True:
        state = read_state(state_file)
        if state and state.get("supervisor_pid") == proc.pid:
            break
        if proc.poll() is not None:
            raise DevStackError(f"the dev stack exited with {proc.returncode}; {log} tail:\n{log_tail(log)}")
        if time.monotonic() > deadline:
            kill_pid(proc.pid, 10)
            raise DevStackError(f"the dev stack was not ready after {args.timeout:.0f}s; {log} tail:\n"
                                f"{log_tail(log)}")
        time.sleep(0.25)
    print(f"dev stack up (state: {state_file}, log: {log})")
    _print_state(state)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    state_file: Path = args.state_file.absolute()
    state = read_state(state_file)
    if state is None:
        print("dev stack not running")
        return 0
    sup = int(state.get("supervisor_pid", 0) or 0)
    if sup:
        kill_pid(sup, args.timeout)
    if state.get("kafka_pid"):
        kill_pid(int(state["kafka_pid"]), args.timeout)
    if sup and pid_alive(sup):
        raise DevStackError(f"supervisor pid {sup} is still alive after SIGKILL")
    state_file.unlink(missing_ok=True)
    print("dev stack stopped")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state_file: Path = args.state_file.absolute()
    state = read_state(state_file)
    if not _running(state):
        print("dev stack not running" + (f" (stale state file {state_file})" if state else ""))
        return 1
    _print_state(state)
    kafka_ok = port_open(int(state["kafka_port"]))
    s3_ok = port_open(int(state["s3_port"]))
    print(f"Kafka port {'open' if kafka_ok else 'CLOSED'}, S3 port {'open' if s3_ok else 'CLOSED'}")
    return 0 if (kafka_ok and s3_ok) else 1
