"""A real single-node Apache Kafka broker (KRaft, combined broker+controller) for tests and the dev stack.

Runs the broker from the jars in ``.cache/jars/kafka`` (``scripts/bootstrap`` downloads them) with
``java -cp``: ``kafka.tools.StorageTool format --standalone`` then ``kafka.Kafka server.properties``.
Binds 127.0.0.1 on free ports, keeps its data in a temp dir, and is killed with its parent (Linux
PR_SET_PDEATHSIG) or at interpreter exit at the latest.

    with KafkaBroker() as kafka:
        kafka.create_topic("orders", partitions=3)
        Producer({"bootstrap.servers": kafka.bootstrap_servers})...

``security="sasl_ssl"`` adds a second listener, SASL_SSL with SCRAM-SHA-512, on ``sasl_port``: its certificate is
signed by a CA made for this broker (:mod:`lakesink.devstack.tls`, SAN ``IP:127.0.0.1,DNS:localhost``), its SCRAM
user (random password) is created through the admin API once the broker is up. The PLAINTEXT listener stays (the
broker's own helpers, :meth:`KafkaBroker.admin` and :meth:`KafkaBroker.create_topic`, use it);
:meth:`KafkaBroker.client_options` gives the ``kafka.*`` keys of a config that reaches the secured one.
"""
from __future__ import annotations

import base64
import os
import secrets
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from lakesink.devstack import (LOOPBACK, check_java, classpath, ensure_port_free, free_port, jars_dir, log_tail,
                               register_for_exit, spawn, terminate, unregister_for_exit, wait_until)
from lakesink.devstack.service import JvmService, jvm_options
from lakesink.errors import DevStackError

KAFKA_JARS_ENV = "LAKESINK_KAFKA_JARS_DIR"
#: ``security`` values of :class:`KafkaBroker` (``lakesink dev up --kafka-security``)
SECURITY = ("plaintext", "sasl_ssl")
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")


def random_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (like ``kafka-storage random-uuid``).

    Never one starting with ``-``: ``kafka-storage format -t -abc…`` reads it as an option (Kafka's own
    ``Uuid.randomUuid`` redraws those too)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cid.startswith("-"):
            return cid


def broker_classpath(jar_dir: Path) -> list[Path]:
    """The broker's jars (``jvm/kafka/pom.xml`` pins slf4j-api 2.x so the log4j2 binding is seen)."""
    return sorted(jar_dir.glob("*.jar"))


class KafkaBroker(JvmService):
    """One KRaft Kafka process (broker + controller) on 127.0.0.1.

    ``port``/``controller_port``: 0 (default) picks free ports; an explicit port that is taken raises
    DevStackError. ``data_dir``: default a fresh temp dir, removed by :meth:`stop`; an explicit dir is kept.
    ``start_timeout``: bound on the wait until an AdminClient can list topics. ``security``: ``plaintext`` or
    ``sasl_ssl`` (a second, SASL_SSL SCRAM-SHA-512 listener on ``sasl_port`` for user ``sasl_username``, see the
    module docstring).
    """

    failed_log_prefix = "lakesink-kafka-failed"

    def __init__(
        self,
        port: int = 0,
        controller_port: int = 0,
        data_dir: str | os.PathLike | None = None,
        *,
        jar_dir: str | os.PathLike | None = None,
        heap: str = "512m",
        start_timeout: float = 60.0,
        config: dict[str, object] | None = None,
        security: str = "plaintext",
        sasl_username: str = "lakesink",
    ):
        if security not in SECURITY:
            raise DevStackError(f"Kafka security {security!r}: expected one of {', '.join(SECURITY)}")
        self.security = security
        self.sasl_username = sasl_username
        self.sasl_password: str | None = None
        self.sasl_port: int | None = None
        self.tls = None  # lakesink.devstack.tls.CertificateAuthority once started with sasl_ssl
        self._req_port = int(port)
        self._req_controller_port = int(controller_port)
        self._req_data_dir = Path(data_dir) if data_dir is not None else None
        self._jar_dir = Path(jar_dir) if jar_dir is not None else None
        self.heap = heap
        self.start_timeout = float(start_timeout)
        self.extra_config = dict(config or {})
        self.port: int | None = None
        self.controller_port: int | None = None
        self.data_dir: Path | None = None
        self.cluster_id: str | None = None
        self._owns_dir = False
        self._proc: subprocess.Popen | None = None
        self._cmd: list[str] | None = None  # the broker's command line, once started
        self._server_cmd: list[str] | None = None  # set while halted (see halt)

    # ------------------------------------------------------------------ properties
    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise DevStackError("KafkaBroker is not started")
        return f"{LOOPBACK}:{self.port}"

    @property
    def secured_bootstrap_servers(self) -> str:
        """The SASL_SSL listener (``security="sasl_ssl"`` only)."""
        if self.sasl_port is None:
            raise DevStackError("KafkaBroker has no SASL_SSL listener (start it with security='sasl_ssl')")
        return f"{LOOPBACK}:{self.sasl_port}"

    @property
    def ca_location(self) -> str:
        """The PEM file of the CA that signed the SASL_SSL listener's certificate."""
        if self.tls is None:
            raise DevStackError("KafkaBroker has no SASL_SSL listener (start it with security='sasl_ssl')")
        return str(self.tls.ca_pem)

    def client_options(self, password: str | None = None, ca_location: str | None = None) -> dict[str, str]:
        """The ``kafka.*`` config keys (prefix included) of a client of the SASL_SSL listener, as Kafka Connect
        spells them (both lakesink readers take them); ``password``/``ca_location`` override the right ones."""
        pw = self.sasl_password if password is None else password
        return {"kafka.bootstrap.servers": self.secured_bootstrap_servers,
                "kafka.security.protocol": "SASL_SSL",
                "kafka.sasl.mechanism": SCRAM_MECHANISM,
                "kafka.sasl.jaas.config": f'{SCRAM_MODULE} required username="{self.sasl_username}" password="{pw}";',
                "kafka.ssl.ca.location": ca_location or self.ca_location}

    @property
    def pid(self) -> int | None:
        """The broker JVM's process id while it runs (None otherwise)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / "broker.log"

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "KafkaBroker":
        if self.running():
            return self
        if self._server_cmd is not None:  # halted: the same process again, on the same ports and data
            self._proc = spawn(self._server_cmd, self.log_path)
            register_for_exit(self)
            self._wait_ready(self.port, self._admin_ready, 0.5, f"Kafka broker on {self.bootstrap_servers}")
            self._server_cmd = None
            return self
        # a requested port that is taken is the cheapest problem to find: before Java and the jars
        if self._req_port:
            ensure_port_free(self._req_port, "Kafka broker")
        if self._req_controller_port:
            ensure_port_free(self._req_controller_port, "Kafka controller")
        java = check_java()
        jar_dir = self._jar_dir or jars_dir("kafka", KAFKA_JARS_ENV)
        cp = classpath(broker_classpath(jar_dir))

        auto_ports = not (self._req_port and self._req_controller_port)
        return self._start_retrying(lambda: self._start_once(java, cp), auto_ports, lambda: self._owns_dir)

    def _start_once(self, java: str, cp: str) -> None:
        self.port = self._req_port or free_port()
        self.controller_port = self._req_controller_port or free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        if self.security == "sasl_ssl":
            self.sasl_port = free_port()
            while self.sasl_port in (self.port, self.controller_port):
                self.sasl_port = free_port()
        if self._req_data_dir is not None:
            self.data_dir = self._req_data_dir
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._owns_dir = False
        else:
            self.data_dir = Path(tempfile.mkdtemp(prefix="lakesink-kafka-"))
            self._owns_dir = True
        logs = self.data_dir / "logs"
        if self.security == "sasl_ssl" and self.tls is None:
            from lakesink.devstack.tls import make_ca

            self.tls = make_ca(self.data_dir / "tls")
            self.sasl_password = secrets.token_urlsafe(16)
        props = self.data_dir / "server.properties"
        props.write_text(self._properties(logs))
        self.cluster_id = random_cluster_id()
        jvm = [java, "-Xms128m", f"-Xmx{self.heap}", "-Djava.awt.headless=true", *jvm_options(),
               f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}", "-cp", cp]

        already_formatted = (logs / "meta.properties").exists()
        if not already_formatted:
            fmt = [*jvm, "kafka.tools.StorageTool", "format", "--standalone",
                   "-t", self.cluster_id, "-c", str(props)]
            with open(self.log_path, "ab") as log:
                try:
                    rc = subprocess.run(fmt, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        timeout=120).returncode
                except subprocess.TimeoutExpired:
                    rc = -1
            if rc != 0:
                raise DevStackError(
                    f"Kafka storage format failed (exit {rc}) in {self.data_dir}; log tail:\n"
                    f"{log_tail(self.log_path)}"
                )

        self._proc = spawn([*jvm, "kafka.Kafka", str(props)], self.log_path)
        self._cmd = [*jvm, "kafka.Kafka", str(props)]
        self._wait_ready(self.port, self._admin_ready, 0.5, f"Kafka broker on {self.bootstrap_servers}")
        if self.security == "sasl_ssl" and not already_formatted:
            self._add_scram_user()

    def _add_scram_user(self) -> None:
        """The SCRAM user, through the PLAINTEXT listener's admin API (``StorageTool format --add-scram`` would put
        the password on a command line)."""
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        upsert = UserScramCredentialUpsertion(self.sasl_username, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                                      8192),
                                              self.sasl_password.encode())
        admin = self.admin()  # kept alive until its futures are done
        try:
            for fut in admin.alter_user_scram_credentials([upsert], request_timeout=30).values():
                fut.result(30)
        except Exception as e:  # noqa: BLE001 - KafkaException
            raise DevStackError(f"cannot create the SCRAM user {self.sasl_username!r} on {self.bootstrap_servers}: "
                                f"{e}") from None

    def _properties(self, logs: Path) -> str:
        p = self.port
        c = self.controller_port
        conf: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "listeners": f"PLAINTEXT://{LOOPBACK}:{p},CONTROLLER://{LOOPBACK}:{c}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{p}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.quorum.bootstrap.servers": f"{LOOPBACK}:{c}",
            "log.dirs": str(logs),
            "num.partitions": 1,
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 4,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "num.network.threads": 2,
            "num.io.threads": 4,
            "log.segment.bytes": 16 * 1024 * 1024,
            "log.index.size.max.bytes": 1024 * 1024,
        }
        if self.security == "sasl_ssl":
            s = self.sasl_port
            conf.update({
                "listeners": f"PLAINTEXT://{LOOPBACK}:{p},SASL_SSL://{LOOPBACK}:{s},CONTROLLER://{LOOPBACK}:{c}",
                "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{p},SASL_SSL://{LOOPBACK}:{s}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
                "sasl.enabled.mechanisms": SCRAM_MECHANISM,
                f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": f"{SCRAM_MODULE} required;",
                "listener.name.sasl_ssl.ssl.keystore.type": "PKCS12",
                "listener.name.sasl_ssl.ssl.keystore.location": str(self.tls.broker_p12),
                "listener.name.sasl_ssl.ssl.keystore.password": self.tls.password,
                "listener.name.sasl_ssl.ssl.key.password": self.tls.password,
            })
        conf.update(self.extra_config)
        return "".join(f"{k}={v}\n" for k, v in conf.items())

    def _admin_ready(self) -> bool:
        self.admin().list_topics(timeout=3)
        return True

    def halt(self, timeout: float = 20.0) -> None:
        """Stop the broker process (SIGTERM, SIGKILL after ``timeout`` s) but keep its ports and data: the next
        :meth:`start` restarts it as it was (a broker restart as clients see it; for fault-injection tests)."""
        if not self.running():
            raise DevStackError("KafkaBroker.halt: the broker is not running")
        terminate(self._proc, timeout)
        self._proc, self._server_cmd = None, self._cmd

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the broker, SIGKILL after ``timeout`` s, remove the temp data dir. Idempotent."""
        unregister_for_exit(self)
        self._server_cmd = None
        terminate(self._proc, timeout)
        self._proc = None
        if self._owns_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self._owns_dir = False

    # ------------------------------------------------------------------ helpers
    def admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 3})

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        config: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create ``name`` (replication 1) and wait until it is visible with all its partitions."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()
        topic = NewTopic(name, num_partitions=partitions, replication_factor=1,
                         config={k: str(v) for k, v in (config or {}).items()})
        fut = admin.create_topics([topic], operation_timeout=timeout, request_timeout=timeout)[name]
        try:
            fut.result(timeout=timeout)
        except Exception as e:
            raise DevStackError(f"cannot create topic {name!r} on {self.bootstrap_servers}: {e}") from None

        def visible() -> bool:
            md = admin.list_topics(topic=name, timeout=5).topics.get(name)
            return (md is not None and md.error is None and len(md.partitions) == partitions
                    and all(p.leader >= 0 for p in md.partitions.values()))

        if not wait_until(visible, timeout, interval=0.2):
            raise DevStackError(f"topic {name!r} created but not visible after {timeout:.0f}s")

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self.port else "not started"
        return f"KafkaBroker({where}, pid={self.pid})"


__all__ = ["KafkaBroker", "random_cluster_id", "broker_classpath", "KAFKA_JARS_ENV", "SECURITY"]
