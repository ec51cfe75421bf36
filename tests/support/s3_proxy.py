"""A loopback HTTP proxy in front of the S3 endpoint that injects faults, for the reliability tests.

``FaultProxy(upstream_url)`` (a child process; see :class:`FaultProxyServer` for why) forwards every request to the real (moto) S3 server and, per request and at random
with a fixed seed: answers ``503 SlowDown`` (S3's XML error body) with probability ``slowdown``, adds
``latency_s`` seconds, or (``reset`` probability, requests with a body only) reads part of the body and
resets the connection mid-upload; with ``lost_response`` probability it forwards a request and then resets
the connection instead of answering (S3 did the work, the client never heard). ``counts`` tells what it did. Clients address it like the S3 endpoint
(path-style); the Host header is passed through unchanged, so SigV4 signatures stay valid.
"""
from __future__ import annotations

import http.client
import json
import subprocess
import sys
import urllib.request
import random
import socket
import struct
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SLOWDOWN_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
                 b'<Message>Please reduce your request rate.</Message><RequestId>fault-proxy</RequestId></Error>')
DENIED_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
               b'<Message>Access Denied</Message><RequestId>fault-proxy</RequestId></Error>')
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


class FaultProxyServer:
    """The proxy itself (threads in one process). Tests use :class:`FaultProxy`, which runs it in a child process:
    delta-rs keeps the GIL while it waits on S3, so a proxy thread in the test process would stall with it."""

    def __init__(self, upstream_url: str, slowdown: float = 0.0, reset: float = 0.0, latency_s: float = 0.0,
                 lost_response: float = 0.0, deny: float = 0.0, seed: int = 7):
        u = urlsplit(upstream_url)
        self.upstream = (u.hostname or "127.0.0.1", u.port or 80)
        self.slowdown, self.reset, self.latency_s, self.lost_response = slowdown, reset, latency_s, lost_response
        self.deny = deny  # share of requests answered 403 AccessDenied (a permission error, never retried)
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.counts: Counter = Counter()
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> "FaultProxy":
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _handle(self) -> None:
                proxy.forward(self)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="s3-fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def _draw(self) -> float:
        with self.lock:
            return self.rng.random()

    # -- one request
    def control(self, h: BaseHTTPRequestHandler) -> None:
        """``GET /__fault__?slowdown=0.2&reset=0&lost_response=0&latency_s=0&deny=0``: set rates; answers the
        counts."""
        from urllib.parse import parse_qsl

        for k, v in parse_qsl(urlsplit(h.path).query):
            if k in ("slowdown", "reset", "lost_response", "latency_s", "deny"):
                setattr(self, k, float(v))
        _read_body(h)
        data = json.dumps(dict(self.counts)).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def forward(self, h: BaseHTTPRequestHandler) -> None:
        if h.path.startswith("/__fault__"):
            return self.control(h)
        self.counts["requests"] += 1
        if self.latency_s:
            threading.Event().wait(self.latency_s)
        draw, lost = self._draw(), self._draw() < self.lost_response
        length = int(h.headers.get("Content-Length") or 0)
        if length > 1 and draw < self.reset:
            self.counts["resets"] += 1
            h.rfile.read(length // 2)  # half the upload arrived, then the connection drops
            _reset(h)
            return
        body = _read_body(h)
        if self.deny and self._draw() < self.deny:
            self.counts["denied"] += 1
            return _answer(h, 403, "Forbidden", DENIED_BODY)
        if draw < self.reset + self.slowdown:
            self.counts["slowdowns"] += 1
            h.send_response(503, "Slow Down")
            h.send_header("Content-Type", "application/xml")
            h.send_header("Content-Length", str(len(SLOWDOWN_BODY)))
            h.end_headers()
            if h.command != "HEAD":
                h.wfile.write(SLOWDOWN_BODY)
            return
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP_BY_HOP}
            if body or h.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            conn.request(h.command, h.path, body=body or None, headers=headers)
            r = conn.getresponse()
            data = r.read()
            if lost and r.status < 300:
                self.counts["lost_responses"] += 1  # S3 did the work; the client never hears of it
                _reset(h)
                return
            h.send_response(r.status, r.reason)
            for k, v in r.getheaders():
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                    h.send_header(k, v)
            h.send_header("Content-Length", str(len(data) if h.command != "HEAD" else r.getheader("Content-Length", "0")))
            h.end_headers()
            if h.command != "HEAD":
                h.wfile.write(data)
            self.counts[f"forwarded_{r.status // 100}xx"] += 1
        finally:
            conn.close()


def _answer(h: BaseHTTPRequestHandler, status: int, reason: str, body: bytes) -> None:
    h.send_response(status, reason)
    h.send_header("Content-Type", "application/xml")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    if h.command != "HEAD":
        h.wfile.write(body)


def _reset(h: BaseHTTPRequestHandler) -> None:
    """Close with RST instead of FIN: the client sees 'connection reset by peer'."""
    h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    h.connection.close()
    h.close_connection = True


def _read_body(h: BaseHTTPRequestHandler) -> bytes:
    """The request body: Content-Length or chunked (boto3 sends the former; aws-chunked bodies pass through)."""
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = bytearray()
        while True:
            size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += h.rfile.read(size)
            h.rfile.readline()
    n = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(n) if n else b""


class FaultProxy:
    """A :class:`FaultProxyServer` in a child process: ``start()``, ``url``, ``counts``, and the rates
    ``slowdown``, ``reset``, ``lost_response``, ``latency_s``, ``deny`` as settable attributes; ``stop()``."""

    RATES = ("slowdown", "reset", "lost_response", "latency_s", "deny")

    def __init__(self, upstream_url: str, seed: int = 7):
        object.__setattr__(self, "upstream_url", upstream_url)
        object.__setattr__(self, "seed", seed)
        object.__setattr__(self, "proc", None)
        object.__setattr__(self, "url", None)
        object.__setattr__(self, "_rates", dict.fromkeys(self.RATES, 0.0))

    def start(self) -> "FaultProxy":
        proc = subprocess.Popen([sys.executable, __file__, self.upstream_url, str(self.seed)],
                                stdout=subprocess.PIPE, text=True)
        object.__setattr__(self, "proc", proc)
        object.__setattr__(self, "url", proc.stdout.readline().strip())
        assert self.url.startswith("http://"), self.url
        return self

    def _control(self, **rates: float) -> dict:
        q = "&".join(f"{k}={v}" for k, v in rates.items())
        with urllib.request.urlopen(f"{self.url}/__fault__?{q}", timeout=10) as r:
            return json.loads(r.read())

    def __setattr__(self, name: str, value) -> None:
        if name not in self.RATES:
            raise AttributeError(name)
        self._control(**{name: value})
        self._rates[name] = value

    def __getattr__(self, name: str):
        if name in self.RATES:
            return self._rates[name]
        raise AttributeError(name)

    @property
    def counts(self) -> Counter:
        return Counter(self._control())

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    server = FaultProxyServer(sys.argv[1], seed=int(sys.argv[2]) if len(sys.argv) > 2 else 7).start()
    print(server.url, flush=True)
    threading.Event().wait()
