"""Session-scoped local stack for the integration tests: ``kafka``, ``s3``, ``spark`` (+ lazily ``spark_cluster``).

The fixtures are thin wrappers over :mod:`lakesink.devstack`; each service is started only when a test asks
for it and is stopped at session end even if a test (or another fixture) failed. Every test in this
directory is marked ``integration`` and gets a generous default timeout (2 shared CPU cores).
"""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from lakesink.devstack.kafka import KafkaBroker
from lakesink.devstack.s3 import S3Endpoint

INTEGRATION_DIR = Path(__file__).parent
DEFAULT_TIMEOUT_S = 600


def pytest_collection_modifyitems(config, items):
    for item in items:
        if INTEGRATION_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(DEFAULT_TIMEOUT_S))


@pytest.fixture(scope="session")
def kafka():
    """A real single-node KRaft Kafka broker on 127.0.0.1 (``kafka.bootstrap_servers``)."""
    broker = KafkaBroker()
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def s3():
    """moto's S3 server on 127.0.0.1 (``s3.endpoint_url``, ``s3.client()``, ``s3.s3_settings()``)."""
    endpoint = S3Endpoint()
    try:
        endpoint.start()
        yield endpoint
    finally:
        endpoint.stop()


@pytest.fixture(scope="session")
def spark(s3):
    """One local[2] SparkSession for the whole run, with Kafka/Delta/S3A jars and the S3 endpoint configured."""
    from lakesink.runtime.spark import get_spark

    session = get_spark(
        app_name="lakesink-tests",
        master="local[2]",
        s3=s3.s3_settings(),
        conf={"spark.sql.shuffle.partitions": "2", "spark.databricks.delta.snapshotPartitions": "2",
              "spark.ui.enabled": "false"},
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_cluster():
    """A Spark standalone master + 2 workers (separate JVMs); only started by tests that use it."""
    from lakesink.devstack.spark_cluster import StandaloneCluster

    cluster = StandaloneCluster(workers=2, cores=1, memory="1g")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark_connect(s3):
    """A Spark Connect client session (``pyspark.sql.connect.session.SparkSession``) on a real Spark Connect server
    (:class:`lakesink.devstack.connect.SparkConnectServer`: the pip pyspark's server, the project's jars, the S3
    endpoint's keys in its environment); started once, only by tests that use it (~50 s). pyspark routes
    ``pyspark.sql.functions`` to Connect while ``$SPARK_CONNECT_MODE_ENABLED`` is set, which would break this
    process's classic session: it is set here only while the session is created, and by the tests using it
    (``monkeypatch.setenv``), as ``SparkSession.builder.remote()`` sets it for a user."""
    import os

    from lakesink.devstack.connect import SparkConnectServer

    server = SparkConnectServer(s3=s3.s3_settings(), driver_memory="2g")
    session = None
    before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    try:
        server.start()
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
        session = server.session()
        if before is None:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        yield session
    finally:
        if session is not None:
            session.stop()  # before the server: a client whose server is gone retries for minutes
        server.stop()
        if before is None:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


@pytest.fixture
def bucket(s3) -> str:
    """A fresh, empty bucket on the S3 endpoint."""
    return s3.create_bucket(f"test-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


# ------------------------------------------------------------------------------ Schema Registry (issue #11)
# Apicurio Registry with its Confluent-compatible API (lakesink.devstack.registry); only started when asked for.

@pytest.fixture(scope="session")
def schema_registry():
    """A real Schema Registry (Apicurio, in-memory) on 127.0.0.1; ``.url`` is the Confluent API
    (``http://127.0.0.1:P/apis/ccompat/v7``). Its default compatibility is NONE: tests set it per subject."""
    from lakesink.devstack.registry import SchemaRegistry

    registry = SchemaRegistry()
    try:
        registry.start()
        yield registry
    finally:
        registry.stop()


@pytest.fixture(scope="session")
def schema_registry_url(schema_registry) -> str:
    """``schema.registry.url`` of the session's Schema Registry."""
    return schema_registry.url
# ------------------------------------------------------------------------------ end Schema Registry


@pytest.fixture(params=["spark", "local"])
def runner(request, spark):
    """Each task runner in turn (lakesink.runners): Spark tasks in the test session, then two local worker
    processes; a test taking it runs once on each."""
    if request.param == "spark":
        from lakesink.runners.spark import SparkRunner

        yield SparkRunner(spark)
        return
    from lakesink.runners.local import LocalRunner

    with LocalRunner(2) as r:
        yield r
