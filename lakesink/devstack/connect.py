"""A Spark Connect server on 127.0.0.1: the server Databricks serverless and shared clusters put behind a client
session, started from the pip pyspark with the project's jars.

pip's pyspark has no ``sbin/start-connect-server.sh``, but its ``jars/`` hold ``spark-connect_2.13``, so the
server is started as::

    SPARK_HOME=<pyspark> <pyspark>/bin/spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer \\
        --master local[2] --driver-memory 2g --conf spark.connect.grpc.binding.port=P ...

with the project's jars (Kafka source, Delta, S3A; :func:`lakesink.runtime.spark.default_jars_dir`) on the driver
class path, the Delta SQL extension and catalog, and the S3A settings of an S3 endpoint (the devstack's moto).
A client session: ``SparkConnectServer.session()`` or ``SparkSession.builder.remote(server.url)``.

Credentials are the server's, as on a cluster: the S3 keys reach the server JVM as ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` in its environment (S3A's default credential chain reads them; on Databricks it is the
cluster's instance profile or storage credential), never as a ``--conf`` argument (readable through ``ps``) nor
in a session conf a client can read back.

It starts in about 50 s on two cores, so tests start one per test session (``tests/integration/conftest.py``).
The JVM dies with the thread that started it (PR_SET_PDEATHSIG), or at interpreter exit at the latest.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from lakesink.devstack import LOOPBACK, check_java, ensure_port_free, free_port, spawn, terminate, unregister_for_exit
from lakesink.devstack.service import JvmService, jvm_options
from lakesink.errors import DevStackError
from lakesink.store.settings import S3Settings

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

#: The settings of the S3A credential chain that must not be pinned on the server: with static keys
#: :meth:`S3Settings.hadoop_conf` names SimpleAWSCredentialsProvider, which reads the keys from the Hadoop conf;
#: the server reads them from its environment through S3A's default chain instead.
_PROVIDER_KEY = "fs.s3a.aws.credentials.provider"


def spark_home() -> Path:
    """The installed pyspark package directory (its ``bin/spark-submit`` and ``jars/``)."""
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-submit").is_file():
        raise DevStackError(f"{home}/bin/spark-submit not found: is pyspark installed from its full distribution?")
    if not any((home / "jars").glob("spark-connect_*.jar")):
        raise DevStackError(f"no spark-connect jar in {home}/jars: this pyspark cannot run a Spark Connect server")
    return home


class SparkConnectServer(JvmService):
    """One Spark Connect server (a local-master driver JVM) on 127.0.0.1.

    ``port``: 0 (default) picks a free one; an explicit port that is taken raises DevStackError. ``s3``: the S3
    endpoint the server's S3A reads and writes (its keys go into the server's environment). ``conf``: more
    server settings, applied last. ``start_timeout``: bound on the wait until the gRPC port answers.
    """

    failed_log_prefix = "lakesink-connect-failed"

    def __init__(self, port: int = 0, *, s3: S3Settings | None = None, master: str = "local[2]",
                 driver_memory: str = "2g", conf: dict[str, str] | None = None, start_timeout: float = 240.0):
        self._req_port = int(port)
        self.s3 = s3
        self.master = master
        self.driver_memory = driver_memory
        self.conf = dict(conf or {})
        self.start_timeout = float(start_timeout)
        self.port: int | None = None
        self.work_dir: Path | None = None
        self._proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The client's remote URL, ``sc://127.0.0.1:P``."""
        if self.port is None:
            raise DevStackError("the Spark Connect server is not started")
        return f"sc://{LOOPBACK}:{self.port}"

    @property
    def log_path(self) -> Path:
        if self.work_dir is None:
            return Path(tempfile.gettempdir()) / "lakesink-connect-not-started.log"
        return self.work_dir / "connect-server.log"

    def settings(self, port: int, jars: list[str]) -> dict[str, str]:
        """The server's Spark settings (no secret among them: they are ``--conf`` arguments)."""
        from lakesink.runtime.spark import DELTA_CATALOG, DELTA_EXTENSION

        assert self.work_dir is not None
        conf = {
            "spark.driver.extraClassPath": os.pathsep.join(jars),
            "spark.sql.extensions": DELTA_EXTENSION,
            "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
            "spark.connect.grpc.binding.address": LOOPBACK,
            "spark.connect.grpc.binding.port": str(port),
            "spark.connect.grpc.port.maxRetries": "0",  # the port asked for, or a bind error (retried here)
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.warehouse.dir": str(self.work_dir / "warehouse"),
            "spark.sql.shuffle.partitions": "2",
            "spark.databricks.delta.snapshotPartitions": "2",
            "spark.driver.extraJavaOptions": " ".join([f"-Dderby.system.home={self.work_dir}", *jvm_options()]),
        }
        if self.s3 is not None:
            conf.update({f"spark.hadoop.{k}": v for k, v in self.s3.hadoop_conf().items() if k != _PROVIDER_KEY})
        conf.update({k: str(v) for k, v in self.conf.items()})
        return conf

    def environment(self) -> dict[str, str]:
        """The server's environment: SPARK_HOME, this interpreter for its Python workers, loopback only, and the S3
        keys (S3A's default chain reads ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``)."""
        env = dict(os.environ)
        env["SPARK_HOME"] = str(spark_home())
        env["PYSPARK_PYTHON"] = sys.executable
        env["SPARK_LOCAL_IP"] = LOOPBACK
        for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "SPARK_CONF_DIR"):
            env.pop(key, None)
        if self.s3 is not None and self.s3.access_key is not None and self.s3.secret_key is not None:
            env["AWS_ACCESS_KEY_ID"] = self.s3.access_key
            env["AWS_SECRET_ACCESS_KEY"] = self.s3.secret_key
            if self.s3.session_token:
                env["AWS_SESSION_TOKEN"] = self.s3.session_token
            else:
                env.pop("AWS_SESSION_TOKEN", None)
        return env

    def start(self) -> "SparkConnectServer":
        """Start the server and wait until its gRPC port answers; DevStackError (with the log tail) if not."""
        if self.running():
            return self
        if self._req_port:
            ensure_port_free(self._req_port, "Spark Connect server")
        check_java()
        home = spark_home()
        from lakesink.runtime.spark import default_jars_dir

        jars = sorted(str(p) for p in default_jars_dir().glob("*.jar"))
        return self._start_retrying(lambda: self._start_once(home, jars), not self._req_port,
                                    lambda: self.work_dir is not None)

    def _start_once(self, home: Path, jars: list[str]) -> None:
        self.port = self._req_port or free_port()
        self.work_dir = Path(tempfile.mkdtemp(prefix="lakesink-connect-"))
        argv = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", self.master,
                "--driver-memory", self.driver_memory, "--name", "lakesink-connect-server"]
        for key, value in self.settings(self.port, jars).items():
            argv += ["--conf", f"{key}={value}"]
        argv.append("spark-internal")  # spark-submit's primary resource for a class already on the class path
        self._proc = spawn(argv, self.log_path, env=self.environment(), cwd=self.work_dir)
        self._wait_ready(self.port, lambda: True, 0.5, f"Spark Connect server on {LOOPBACK}:{self.port}")

    def session(self) -> Any:
        """A client session on this server (``pyspark.sql.connect.session.SparkSession``)."""
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        return RemoteSparkSession.builder.remote(self.url).getOrCreate()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the server, SIGKILL after ``timeout`` s, remove its work dir (and log). Idempotent."""
        unregister_for_exit(self)
        terminate(self._proc, timeout)
        self._proc = None
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    def __repr__(self) -> str:
        where = self.url if self.port and self.running() else "not started"
        return f"SparkConnectServer({where})"


__all__ = ["SparkConnectServer", "SERVER_CLASS", "spark_home"]
