"""A local S3 endpoint (moto's server) for tests, the demo and ``lakesink dev up``.

From a test or the demo (a child process that dies with this one)::

    with S3Endpoint() as s3:                 # moto's server on 127.0.0.1, free port
        s3.create_bucket("lake")
        get_spark(s3=s3.s3_settings())

The child process runs::

    python -m lakesink.devstack.s3 --port 9000    # serves until SIGTERM/SIGINT

or :meth:`S3Endpoint.spawn` which starts that runner and waits until it answers. Credentials are moto's
dummy ``testing``/``testing``, region ``us-east-1``; clients must use path-style addressing.
"""
from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import threading
from pathlib import Path

from lakesink.devstack import (LOOPBACK, ensure_port_free, require_moto, free_port, log_tail, port_open, register_for_exit, spawn, terminate, unregister_for_exit, wait_until)
from lakesink.errors import DevStackError
from lakesink.store.settings import S3Settings

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"


def quiet_werkzeug() -> None:
    """moto serves through werkzeug, which logs every request at INFO: keep only errors."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)


class S3Endpoint:
    """moto S3 on ``http://127.0.0.1:<port>``.

    ``port=0`` picks a free one; an explicit port that is taken raises DevStackError. :meth:`start` runs
    the server on a daemon thread of this process; :meth:`spawn` runs it in a child process instead.
    """

    def __init__(self, port: int = 0, host: str = LOOPBACK):
        self.host = host
        self._req_port = int(port)
        self.port: int | None = None
        self._server = None
        self._proc: subprocess.Popen | None = None
        self.access_key = ACCESS_KEY
        self.secret_key = SECRET_KEY
        self.region = REGION

    @property
    def endpoint_url(self) -> str:
        if self.port is None:
            raise DevStackError("S3Endpoint is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "S3Endpoint":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float = 60.0) -> "S3Endpoint":
        """Serve from a child process (log in the temp directory), dying with this process.

        Not a thread of this process: delta-rs holds the GIL while it waits for S3, so a manifest read or
        commit against a server on a thread of the same interpreter would wait for a response that thread can
        never send."""
        import os
        import tempfile

        if self._server is not None or self._proc is not None:
            return self
        log = Path(tempfile.gettempdir()) / f"lakesink-s3-{os.getpid()}-{id(self):x}.log"
        return self.spawn(log, timeout=timeout)

    def serve_in_thread(self, timeout: float = 30.0) -> "S3Endpoint":
        """Serve on a daemon thread of this process (what the child process of :meth:`start` runs)."""
        if self._server is not None or self._proc is not None:
            return self
        require_moto("the local S3 endpoint")
        quiet_werkzeug()
        from moto.server import ThreadedMotoServer

        if self._req_port:
            ensure_port_free(self._req_port, "S3 endpoint", self.host)
        server = ThreadedMotoServer(ip_address=self.host, port=self._req_port, verbose=False)
        # ThreadedMotoServer.start() waits forever if the bind fails: start it on a helper thread, bounded.
        starter = threading.Thread(target=server.start, daemon=True)
        starter.start()
        starter.join(timeout)
        if starter.is_alive():
            raise DevStackError(f"moto S3 server did not start on {self.host}:{self._req_port} in {timeout:.0f}s")
        self._server = server
        self.port = server.get_host_and_port()[1]
        register_for_exit(self)
        return self

    def spawn(self, log_path: Path, *, detach: bool = False, timeout: float = 60.0) -> "S3Endpoint":
        """Run ``python -m lakesink.devstack.s3`` as a child process and wait until it answers."""
        require_moto("the local S3 endpoint")  # one line naming the extra, not the child's ModuleNotFoundError
        port = self._req_port or free_port(self.host)
        if self._req_port:
            ensure_port_free(port, "S3 endpoint", self.host)
        self._proc = spawn([sys.executable, "-m", "lakesink.devstack.s3", "--host", self.host, "--port", str(port)],
                           log_path, detach=detach)
        self.port = port
        alive = lambda: self._proc is not None and self._proc.poll() is None  # noqa: E731
        if not wait_until(lambda: port_open(port, self.host), timeout, alive=alive):
            rc = self._proc.poll()
            terminate(self._proc)
            self._proc = None
            state = f"exited with {rc}" if rc is not None else f"not answering after {timeout:.0f}s"
            raise DevStackError(f"S3 endpoint on {self.host}:{port} {state}; log tail:\n{log_tail(log_path)}")
        if not detach:
            register_for_exit(self)
        return self

    def stop(self) -> None:
        unregister_for_exit(self)
        if self._server is not None:
            try:
                self._server.stop()
            finally:
                self._server = None
        if self._proc is not None:
            terminate(self._proc, 10)
            self._proc = None

    # ------------------------------------------------------------------ clients
    def s3_settings(self) -> S3Settings:
        return S3Settings(
            endpoint_url=self.endpoint_url,
            access_key=self.access_key,
            secret_key=self.secret_key,
            region=self.region,
            path_style=True,
        )

    def client(self):
        """A boto3 S3 client for this endpoint (path-style)."""
        import boto3

        return boto3.client("s3", **self.s3_settings().boto3_kwargs())

    def create_bucket(self, name: str) -> str:
        if len(name) < 3:
            raise DevStackError(f"bucket name {name!r}: S3 bucket names need at least 3 characters")
        self.client().create_bucket(Bucket=name)
        return name

    def __repr__(self) -> str:
        where = self.endpoint_url if self.port else "not started"
        return f"S3Endpoint({where})"


def main(argv: list[str] | None = None) -> int:
    """``python -m lakesink.devstack.s3 [--host H] [--port P]``: serve until SIGTERM/SIGINT."""
    ap = argparse.ArgumentParser(prog="python -m lakesink.devstack.s3", description=__doc__.splitlines()[0])
    ap.add_argument("--host", default=LOOPBACK)
    ap.add_argument("--port", type=int, default=0, help="0 = a free port (printed)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    endpoint = S3Endpoint(port=args.port, host=args.host).serve_in_thread()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"S3 endpoint ready: {endpoint.endpoint_url}", flush=True)
    while not stop.is_set():
        stop.wait(1.0)
    endpoint.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
