"""A Spark standalone cluster (1 master + N workers, separate JVMs) on 127.0.0.1.

pip's pyspark has no ``sbin/start-*.sh``, so the daemons are started with ``<pyspark>/bin/spark-class``::

    spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port P --webui-port Q
    spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:P --cores 1 --memory 1g

:meth:`StandaloneCluster.start` waits (bounded) until the master's JSON status page (``/json/``) shows all
workers ALIVE. Use it with ``get_spark(master=cluster.master_url, ...)``; the driver ships ``spark.jars`` to
the executors. Each worker offers ``memory``, so keep ``spark.executor.memory`` <= that (default 1g).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from lakesink.devstack import (LOOPBACK, check_java, free_port, log_tail, register_for_exit, spawn, terminate, unregister_for_exit, wait_until)
from lakesink.devstack.service import jvm_options
from lakesink.errors import DevStackError


def spark_class() -> Path:
    """``<pyspark>/bin/spark-class`` of the installed pyspark."""
    import pyspark

    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.is_file():
        raise DevStackError(f"{path} not found: is pyspark installed from its full distribution?")
    return path


class StandaloneCluster:
    """Master + ``workers`` workers, each with ``cores`` cores and ``memory`` memory, in a temp work dir."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g", *, start_timeout: float = 90.0):
        if workers < 1:
            raise DevStackError(f"workers={workers}: need at least one worker")
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.start_timeout = float(start_timeout)
        self.port: int | None = None
        self.webui_port: int | None = None
        self.work_dir: Path | None = None
        self._master: subprocess.Popen | None = None
        self._workers: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        if self.port is None:
            raise DevStackError("StandaloneCluster is not started")
        return f"spark://{LOOPBACK}:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://{LOOPBACK}:{self.webui_port}"

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _env(self) -> dict[str, str]:
        assert self.work_dir is not None
        env = dict(os.environ)
        env.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env["SPARK_LOG_DIR"] = str(self.work_dir / "logs")
        env["SPARK_WORKER_DIR"] = str(self.work_dir / "work")
        env.setdefault("SPARK_DAEMON_MEMORY", "512m")
        if jvm_options():  # the master's and workers' JVMs (the executors' come from the application's conf)
            env["SPARK_DAEMON_JAVA_OPTS"] = f"{env.get('SPARK_DAEMON_JAVA_OPTS', '')} {' '.join(jvm_options())}".strip()
        return env

    def start(self) -> "StandaloneCluster":
        if self._master is not None:
            return self
        check_java()
        cls = str(spark_class())
        self.work_dir = Path(tempfile.mkdtemp(prefix="lakesink-spark-"))
        env = self._env()
        try:
            self.port, self.webui_port = free_port(), free_port()
            self._master = spawn(
                [cls, "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                 "--port", str(self.port), "--webui-port", str(self.webui_port)],
                self.work_dir / "master.log", env=env,
            )
            register_for_exit(self)
            if not wait_until(lambda: self.status() is not None, self.start_timeout, interval=0.5,
                              alive=lambda: self._master.poll() is None):
                raise DevStackError(self._failure("master did not come up", self.work_dir / "master.log"))
            for i in range(self.workers):
                wdir = self.work_dir / f"worker-{i}"
                wdir.mkdir()
                self._workers.append(spawn(
                    [cls, "org.apache.spark.deploy.worker.Worker", self.master_url,
                     "--host", LOOPBACK, "--cores", str(self.cores), "--memory", self.memory,
                     "--work-dir", str(wdir), "--webui-port", str(free_port())],
                    self.work_dir / f"worker-{i}.log", env=env,
                ))
            if not wait_until(lambda: self.alive_workers() >= self.workers, self.start_timeout, interval=0.5,
                              alive=lambda: all(p.poll() is None for p in [self._master, *self._workers])):
                logs = [self.work_dir / f"worker-{i}.log" for i in range(self.workers)]
                bad = next((lg for p, lg in zip(self._workers, logs) if p.poll() is not None), logs[0])
                raise DevStackError(self._failure(
                    f"{self.alive_workers()}/{self.workers} workers registered", bad))
        except BaseException:
            self.stop()
            raise
        return self

    def _failure(self, what: str, log: Path) -> str:
        return f"Spark standalone cluster at {self.master_url}: {what}; {log.name} tail:\n{log_tail(log)}"

    def status(self) -> dict | None:
        """The master's ``/json/`` document, or None if it does not answer."""
        if self.webui_port is None:
            return None
        try:
            with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=2) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except Exception:
            return None

    def alive_workers(self) -> int:
        st = self.status() or {}
        return sum(1 for w in st.get("workers", []) if w.get("state") == "ALIVE")

    def stop(self, timeout: float = 20.0) -> None:
        """Stop workers, then the master (SIGTERM, SIGKILL after ``timeout``), remove the work dir."""
        unregister_for_exit(self)
        for p in self._workers:
            terminate(p, timeout)
        self._workers = []
        terminate(self._master, timeout)
        self._master = None
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    def __repr__(self) -> str:
        where = self.master_url if self.port else "not started"
        return f"StandaloneCluster({where}, workers={self.workers})"


__all__ = ["StandaloneCluster", "spark_class"]
