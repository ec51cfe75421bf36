"""A real Schema Registry for tests and the dev stack: Apicurio Registry with its Confluent-compatible API.

Runs Apicurio Registry 3.0.x (Quarkus, in-memory storage) from ``.cache/jars/registry`` (``scripts/bootstrap``
unpacks ``jvm/registry/pom.xml``'s tar.gz there; a pip install: ``lakesink setup --registry``'s cache) with ``java -jar <runner jar>``, bound to 127.0.0.1 on a
free port (HTTP) and a second free port for Quarkus' management interface (which would otherwise listen on
0.0.0.0:9000). Confluent clients use :attr:`SchemaRegistry.url` (``http://127.0.0.1:P/apis/ccompat/v7``).
Killed with its parent (Linux PR_SET_PDEATHSIG), or at interpreter exit at the latest.

Differences from Confluent's registry that tests must allow for: the global compatibility level defaults to
NONE (Confluent: BACKWARD), so tests set it per subject; ids are Apicurio content ids.

    with SchemaRegistry() as sr:
        SchemaRegistryClient({"url": sr.url}).register_schema("orders-value", Schema(avsc, "AVRO"))
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from lakesink.devstack import LOOPBACK, check_java, ensure_port_free, free_port, jars_dir, spawn, terminate, unregister_for_exit
from lakesink.devstack.service import JvmService, jvm_options
from lakesink.errors import DevStackError

REGISTRY_DIR_ENV = "LAKESINK_REGISTRY_DIR"
CCOMPAT_PATH = "/apis/ccompat/v7"


def runner_jar(registry_dir: Path) -> Path:
    """The Quarkus runner jar of an unpacked Apicurio distribution (``apicurio-registry-app-*-runner.jar``)."""
    found = sorted(registry_dir.glob("*-runner.jar"))
    if not found:
        raise DevStackError(f"no Apicurio runner jar (*-runner.jar) in {registry_dir}: run `lakesink setup "
                            f"--registry`")
    return found[-1]


class SchemaRegistry(JvmService):
    """One Apicurio Registry process on 127.0.0.1 with the Confluent-compatible API.

    ``port``/``management_port``: 0 (default) picks free ports; an explicit port that is taken raises
    DevStackError. ``start_timeout``: bound on the wait until ``GET {url}/subjects`` answers 200.
    ``registry_dir``: the unpacked distribution (default ``.cache/jars/registry`` or ``$LAKESINK_REGISTRY_DIR``).
    """

    failed_log_prefix = "lakesink-registry-failed"

    def __init__(self, port: int = 0, management_port: int = 0, *, registry_dir: str | os.PathLike | None = None,
                 heap: str = "512m", start_timeout: float = 90.0):
        self._req_port = int(port)
        self._req_management_port = int(management_port)
        self._registry_dir = Path(registry_dir) if registry_dir is not None else None
        self.heap = heap
        self.start_timeout = float(start_timeout)
        self.port: int | None = None
        self.management_port: int | None = None
        self.work_dir: Path | None = None
        self._proc: subprocess.Popen | None = None

    # ------------------------------------------------------------------ properties
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:P`` (Apicurio's own API is under ``/apis/registry/v3``)."""
        if self.port is None:
            raise DevStackError("SchemaRegistry is not started")
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        """The Confluent-compatible API, what ``schema.registry.url`` and confluent-kafka clients take."""
        return self.base_url + CCOMPAT_PATH

    @property
    def log_path(self) -> Path:
        assert self.work_dir is not None
        return self.work_dir / "registry.log"

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "SchemaRegistry":
        """Start the registry and wait until its Confluent API answers; DevStackError (with the log tail) if not."""
        if self.running():
            return self
        if self._req_port:
            ensure_port_free(self._req_port, "Schema Registry")
        if self._req_management_port:
            ensure_port_free(self._req_management_port, "Schema Registry management")
        java = check_java()
        jar = runner_jar(self._registry_dir or jars_dir("registry", REGISTRY_DIR_ENV))
        auto_ports = not (self._req_port and self._req_management_port)
        return self._start_retrying(lambda: self._start_once(java, jar), auto_ports, lambda: self.work_dir is not None)

    def _start_once(self, java: str, jar: Path) -> None:
        self.port = self._req_port or free_port()
        self.management_port = self._req_management_port or free_port()
        while self.management_port == self.port:
            self.management_port = free_port()
        self.work_dir = Path(tempfile.mkdtemp(prefix="lakesink-registry-"))
        argv = [java, f"-Xmx{self.heap}", "-Djava.awt.headless=true", *jvm_options(),
                f"-Dquarkus.http.host={LOOPBACK}", f"-Dquarkus.http.port={self.port}",
                f"-Dquarkus.management.host={LOOPBACK}", f"-Dquarkus.management.port={self.management_port}",
                "-jar", str(jar)]
        self._proc = spawn(argv, self.log_path, cwd=self.work_dir)
        self._wait_ready(self.port, self._api_ready, 0.25, f"Schema Registry (Apicurio) on {self.base_url}")

    def _api_ready(self) -> bool:
        with urllib.request.urlopen(self.url + "/subjects", timeout=3) as resp:
            return resp.status == 200 and isinstance(json.loads(resp.read() or b"null"), list)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the registry, SIGKILL after ``timeout`` s, remove its work dir (and log). Idempotent."""
        unregister_for_exit(self)
        terminate(self._proc, timeout)
        self._proc = None
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    # ------------------------------------------------------------------ helpers
    def client(self, **conf):
        """A confluent-kafka ``SchemaRegistryClient`` for this registry (extra client settings in ``conf``)."""
        from confluent_kafka.schema_registry import SchemaRegistryClient

        return SchemaRegistryClient({"url": self.url, **conf})

    def __repr__(self) -> str:
        where = self.url if self.port else "not started"
        return f"SchemaRegistry({where}, pid={self.pid})"


__all__ = ["SchemaRegistry", "runner_jar", "REGISTRY_DIR_ENV", "CCOMPAT_PATH"]
