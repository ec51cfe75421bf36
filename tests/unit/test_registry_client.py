"""How lakesink.schemas.registry turns HTTP answers into errors: 401/403 (credentials refused, secret never
shown), 5xx (bounded retries, then one line naming the id and URL), 404 40403 (unknown id). The answers come
from a stdlib HTTP server that only returns a status; the registry's real behaviour is covered against
Apicurio in tests/integration/test_schema_registry.py."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lakesink.errors import RegistryAuthError, RegistryError, SchemaNotFoundError
from lakesink.schemas.registry import RegistryClient, RegistrySettings, shared_registry_client

SECRET = "pa55-w0rd"


@pytest.fixture
def answering():
    """``answering(status, body)`` → base URL of a server answering every request so; ``.requests`` counts."""
    servers = []

    def start(status: int, body: dict):
        calls = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                calls.append((self.path, self.headers.get("Authorization")))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}", calls

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def client_for(url: str, **kw) -> RegistryClient:
    s = RegistrySettings(url, retries_wait_ms=1, retries_max_wait_ms=5, **kw)
    conf = s.client_config()
    conf.pop("url")
    return RegistryClient(shared_registry_client(s.url, conf), s.shown_url)


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_are_one_line_without_the_secret(answering, status):
    url, calls = answering(status, {"error_code": status * 100 + 1, "message": "Unauthorized"})
    c = client_for(url, user_info=f"alice:{SECRET}")
    with pytest.raises(RegistryAuthError) as ei:
        c.schema(42)
    msg = str(ei.value)
    assert f"refused the credentials (HTTP {status})" in msg and "schema id 42" in msg and url in msg
    assert SECRET not in msg and "\n" not in msg
    assert len(calls) == 1 and calls[0][1].startswith("Basic ")  # the header was sent; 401 is not retried


def test_server_errors_are_retried_a_bounded_number_of_times(answering):
    url, calls = answering(503, {"error_code": 50301, "message": "unavailable"})
    c = client_for(url, max_retries=2)
    with pytest.raises(RegistryError) as ei:
        c.schema(7)
    assert len(calls) == 3  # one try + max_retries
    msg = str(ei.value)
    assert "HTTP 503" in msg and "schema id 7" in msg and url in msg and "\n" not in msg
    assert not isinstance(ei.value, (RegistryAuthError, SchemaNotFoundError))


def test_unknown_id_and_cache(answering):
    url, calls = answering(404, {"error_code": 40403, "message": "Schema 9 not found"})
    c = client_for(url)
    with pytest.raises(SchemaNotFoundError) as ei:
        c.schema(9)
    assert ei.value.schema_id == 9 and "schema id 9 not found" in str(ei.value)


def test_cached_schema_is_asked_once(answering):
    url, calls = answering(200, {"schema": '"string"', "schemaType": "AVRO", "references": []})
    c = client_for(url)
    for _ in range(5):
        got = c.schema(3)
    assert (got.id, got.schema_type, got.text) == (3, "AVRO", '"string"') and len(calls) == 1


def test_url_credentials_never_in_messages(answering):
    url, _ = answering(500, {"message": "boom"})
    with_user = url.replace("http://", f"http://bob:{SECRET}@")
    c = client_for(with_user, max_retries=0)
    with pytest.raises(RegistryError) as ei:
        c.schema(1)
    assert SECRET not in str(ei.value) and "******@127.0.0.1" in str(ei.value)
