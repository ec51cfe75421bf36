"""The local stack as one unit: Kafka broker + S3 endpoint + Schema Registry, and the supervisor process behind
``lakesink dev up``.

``LocalStack`` starts the services in this process (broker and registry as child JVMs, S3 on a thread) and
stops them all.

``python -m lakesink.devstack.stack --state-file F`` is the background supervisor that ``lakesink dev up``
launches in its own session: it starts a LocalStack, writes ``F`` (JSON with pids, ports, endpoint,
credentials; with ``--kafka-security sasl_ssl`` also the SASL_SSL listener, its CA file and SCRAM user), then
sleeps until SIGTERM/SIGINT, stops the stack and removes ``F``. The broker and the registry
die with the supervisor even if it is SIGKILLed (PR_SET_PDEATHSIG).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from lakesink.errors import DevStackError, LakesinkError
from lakesink.devstack.kafka import SECURITY, KafkaBroker
from lakesink.devstack.registry import SchemaRegistry
from lakesink.devstack.s3 import S3Endpoint


class LocalStack:
    """Kafka broker + S3 endpoint + Schema Registry (Apicurio, Confluent API);
    ``with LocalStack() as stack: stack.kafka.bootstrap_servers, stack.registry.url ...``."""

    def __init__(self, kafka_port: int = 0, s3_port: int = 0, kafka_start_timeout: float = 60.0,
                 registry_port: int = 0, registry: bool = True, kafka_security: str = "plaintext"):
        self.kafka = KafkaBroker(port=kafka_port, start_timeout=kafka_start_timeout, security=kafka_security)
        self.s3 = S3Endpoint(port=s3_port)
        #: None with ``registry=False`` (the demo needs none: its JVM and its download are spared)
        self.registry = SchemaRegistry(port=registry_port) if registry else None

    def services(self) -> list:
        """The services this stack runs, in start order."""
        return [svc for svc in (self.s3, self.kafka, self.registry) if svc is not None]

    def check_installed(self, command: str) -> None:
        """NotInstalledError naming what brings it when something a service needs is absent (moto, the Kafka jars,
        the registry), before anything starts."""
        from lakesink.devstack import require_moto
        from lakesink.runtime.jars import find_dir, require_java

        require_moto(command)
        require_java(command)
        find_dir("kafka", command)
        if self.registry is not None:
            try:
                find_dir("registry", command)
            except LakesinkError as e:
                raise type(e)(f"{e}; or leave it out: --no-registry") from None

    def start(self) -> "LocalStack":
        try:
            for svc in self.services():
                svc.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        errors = []
        for svc in reversed(self.services()):
            try:
                svc.stop()
            except Exception as e:  # pragma: no cover - best effort
                errors.append(f"{svc!r}: {e}")
        if errors:
            raise DevStackError("stopping the local stack: " + "; ".join(errors))

    def __enter__(self) -> "LocalStack":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def info(self) -> dict:
        return {
            "bootstrap_servers": self.kafka.bootstrap_servers,
            "kafka_pid": self.kafka.pid,
            "kafka_port": self.kafka.port,
            "kafka_controller_port": self.kafka.controller_port,
            "kafka_log": str(self.kafka.log_path),
            "s3_endpoint": self.s3.endpoint_url,
            "s3_port": self.s3.port,
            "s3_access_key": self.s3.access_key,
            "s3_secret_key": self.s3.secret_key,
            "s3_region": self.s3.region,
            **({"schema_registry_url": self.registry.url,
                "registry_pid": self.registry.pid,
                "registry_port": self.registry.port,
                "registry_log": str(self.registry.log_path)} if self.registry is not None else {}),
            **({"kafka_security": "sasl_ssl", "secured_bootstrap_servers": self.kafka.secured_bootstrap_servers,
                "kafka_ca_location": self.kafka.ca_location, "kafka_sasl_mechanism": "SCRAM-SHA-512",
                "kafka_sasl_username": self.kafka.sasl_username, "kafka_sasl_password": self.kafka.sasl_password}
               if self.kafka.security == "sasl_ssl" else {"kafka_security": "plaintext"}),
        }


def write_json_atomic(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.touch(mode=0o600)  # it may hold the SASL_SSL listener's SCRAM password
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def supervise(state_file: Path, kafka_port: int = 0, s3_port: int = 0, registry_port: int = 0,
              registry: bool = True, kafka_security: str = "plaintext") -> int:
    """Run a LocalStack until SIGTERM/SIGINT; publish it in ``state_file`` while it runs."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    stack = LocalStack(kafka_port=kafka_port, s3_port=s3_port, registry_port=registry_port, registry=registry,
                       kafka_security=kafka_security)
    try:
        stack.start()
    except DevStackError as e:
        print(f"lakesink dev stack: {e}", file=sys.stderr, flush=True)
        return 1
    try:
        info = {"supervisor_pid": os.getpid(), "started_at": time.time(), **stack.info()}
        write_json_atomic(state_file, info)
        print(f"dev stack ready: {json.dumps(info)}", flush=True)
        while not stop.is_set() and stack.kafka.running() and (stack.registry is None or stack.registry.running()):
            stop.wait(1.0)
        if not stop.is_set():
            gone = "the Kafka broker" if not stack.kafka.running() else "the Schema Registry"
            print(f"lakesink dev stack: {gone} exited; shutting down", file=sys.stderr, flush=True)
    finally:
        try:
            current = json.loads(state_file.read_text())
            if current.get("supervisor_pid") == os.getpid():
                state_file.unlink()
        except (OSError, ValueError):
            pass
        stack.stop()
        print("dev stack stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lakesink.devstack.stack",
                                 description="supervisor of the local Kafka + S3 + Schema Registry stack "
                                             "(see lakesink dev up)")
    ap.add_argument("--state-file", type=Path, required=True)
    ap.add_argument("--kafka-port", type=int, default=0)
    ap.add_argument("--s3-port", type=int, default=0)
    ap.add_argument("--registry-port", type=int, default=0)
    ap.add_argument("--no-registry", action="store_true")
    ap.add_argument("--kafka-security", choices=SECURITY, default="plaintext")
    args = ap.parse_args(argv)
    return supervise(args.state_file, args.kafka_port, args.s3_port, args.registry_port, not args.no_registry,
                     args.kafka_security)


if __name__ == "__main__":
    sys.exit(main())
