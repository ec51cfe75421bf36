"""Bad-input paths of lakesink.runtime.spark / lakesink.devstack that need no running service."""
from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest

from lakesink import devstack
from lakesink.devstack import parse_java_version
from lakesink.errors import DevStackError, LakesinkError
from lakesink.store.settings import S3Settings


# ------------------------------------------------------------------------------ Java
@pytest.mark.parametrize("text, major", [
    ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment ...', 17),
    ('java version "1.8.0_292"\nJava(TM) SE Runtime Environment', 8),
    ('openjdk version "21" 2023-09-19', 21),
    ('openjdk version "11.0.2" 2019-01-15', 11),
    ('openjdk version "25-ea" 2025-09-16', 25),
    ('Picked up JAVA_TOOL_OPTIONS: -Xmx1g\nopenjdk version "17.0.1" 2021-10-19', 17),
])
def test_parse_java_version(text, major):
    assert parse_java_version(text) == major


def test_parse_java_version_garbage():
    with pytest.raises(DevStackError, match="cannot parse"):
        parse_java_version("bash: java: command not found")


def _fake_java(tmp_path: Path, output: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{output}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return home


def test_old_java_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, 'java version "1.8.0_292"')))
    monkeypatch.setattr(devstack, "_java_checked", {})
    with pytest.raises(DevStackError) as e:
        devstack.check_java()
    msg = str(e.value)
    assert "Java 8" in msg and ">= 17" in msg and "\n" not in msg
    assert isinstance(e.value, LakesinkError)


def test_missing_java_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DevStackError) as e:
        devstack.check_java()
    assert "java not found" in str(e.value) and "\n" not in str(e.value)


def test_kafka_broker_without_java(tmp_path, monkeypatch):
    from lakesink.devstack.kafka import KafkaBroker

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LakesinkError, match="java not found"):
        KafkaBroker().start()


# ------------------------------------------------------------------------------ jars
def test_spark_jars_dir_missing(tmp_path, monkeypatch):
    from lakesink.runtime import spark as lspark

    monkeypatch.setenv(lspark.JARS_ENV, str(tmp_path / "nope"))
    with pytest.raises(LakesinkError, match="lakesink setup") as e:
        lspark.default_jars_dir()
    assert str(tmp_path / "nope") in str(e.value)
    # get_spark fails the same way, before any JVM starts
    monkeypatch.setattr(lspark, "_use_cluster", lambda: False)
    with pytest.raises(LakesinkError, match="lakesink setup"):
        lspark.get_spark()


def test_spark_jars_dir_without_jars(tmp_path, monkeypatch):
    from lakesink.runtime import spark as lspark

    (tmp_path / "README").write_text("no jars here")
    monkeypatch.setenv(lspark.JARS_ENV, str(tmp_path))
    with pytest.raises(LakesinkError, match=r"needs the Spark jars .* holds no jar"):
        lspark.default_jars_dir()


def test_kafka_jars_dir_missing(tmp_path, monkeypatch):
    from lakesink.devstack.kafka import KAFKA_JARS_ENV

    monkeypatch.setenv(KAFKA_JARS_ENV, str(tmp_path))
    with pytest.raises(LakesinkError, match=r"needs the Kafka broker jars: .* holds no jar"):
        devstack.jars_dir("kafka", KAFKA_JARS_ENV)


# ------------------------------------------------------------------------------ S3 settings
def test_s3_settings_repr_hides_secrets():
    s = S3Settings("http://127.0.0.1:9000", "AKIAEXAMPLEKEY", "very-secret-value", "eu-west-1")
    for text in (repr(s), str(s), f"{s}", repr([s])):
        assert "AKIAEXAMPLEKEY" not in text and "very-secret-value" not in text
        assert "http://127.0.0.1:9000" in text and "eu-west-1" in text


def test_s3_settings_hadoop_conf():
    c = S3Settings("http://127.0.0.1:9000", "ak", "sk").hadoop_conf()
    assert c["fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert c["fs.s3a.connection.ssl.enabled"] == "false"
    assert c["fs.s3a.path.style.access"] == "true"
    assert c["fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert c["fs.s3a.aws.credentials.provider"].endswith("SimpleAWSCredentialsProvider")
    assert c["fs.s3a.endpoint.region"] == "us-east-1"
    # the keys never travel with the builder settings (PySpark puts those on the JVM's command line)
    assert "ak" not in c.values() and "sk" not in c.values()
    assert S3Settings("http://127.0.0.1:9000", "ak", "sk").credential_conf() == {
        "fs.s3a.access.key": "ak", "fs.s3a.secret.key": "sk"}
    assert S3Settings("http://127.0.0.1:9000").credential_conf() == {}
    aws = S3Settings(region="eu-west-1", path_style=False).hadoop_conf()
    assert "fs.s3a.endpoint" not in aws and "fs.s3a.access.key" not in aws
    assert aws["fs.s3a.path.style.access"] == "false"


# ------------------------------------------------------------------------------ ports
@pytest.fixture
def busy_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s.getsockname()[1]


def test_kafka_explicit_port_in_use(busy_port):
    from lakesink.devstack.kafka import KafkaBroker

    with pytest.raises(DevStackError, match=f"Kafka broker: port 127.0.0.1:{busy_port} is already in use"):
        KafkaBroker(port=busy_port).start()


def test_s3_explicit_port_in_use(busy_port):
    from lakesink.devstack.s3 import S3Endpoint

    with pytest.raises(DevStackError, match="S3 endpoint: port .* already in use"):
        S3Endpoint(port=busy_port).start()


def test_not_started_services_say_so():
    from lakesink.devstack.kafka import KafkaBroker
    from lakesink.devstack.s3 import S3Endpoint
    from lakesink.devstack.spark_cluster import StandaloneCluster

    with pytest.raises(DevStackError, match="not started"):
        KafkaBroker().bootstrap_servers
    with pytest.raises(DevStackError, match="not started"):
        S3Endpoint().endpoint_url
    with pytest.raises(DevStackError, match="not started"):
        StandaloneCluster().master_url
    with pytest.raises(DevStackError, match="at least one worker"):
        StandaloneCluster(workers=0)


def test_random_cluster_id_shape():
    from lakesink.devstack.kafka import random_cluster_id

    ids = {random_cluster_id() for _ in range(3000)}  # ~1 in 64 raw draws starts with "-"
    assert len(ids) == 3000 and all(len(i) == 22 and "=" not in i for i in ids)
    assert not any(i.startswith("-") for i in ids)  # kafka-storage would read "-t -abc" as an option


# ------------------------------------------------------------------------------ dev CLI state
def test_dev_status_without_stack(tmp_path, capsys):
    from lakesink.cli import main

    assert main(["dev", "status", "--state-file", str(tmp_path / "s.json")]) == 1
    assert "not running" in capsys.readouterr().out
    assert main(["dev", "down", "--state-file", str(tmp_path / "s.json")]) == 0


def test_dev_corrupt_state_file(tmp_path, capsys):
    from lakesink.cli import main

    state = tmp_path / "s.json"
    state.write_text("{not json")
    assert main(["dev", "status", "--state-file", str(state)]) == 1
    assert "cannot read the dev stack state" in capsys.readouterr().err


def test_local_sessions_read_jars_in_place_other_masters_ship_them():
    from lakesink.runtime.spark import jar_conf

    jars = ["/j/a.jar", "/j/b.jar"]
    assert jar_conf("local[2]", jars) == {"spark.driver.extraClassPath": "/j/a.jar:/j/b.jar"}
    assert jar_conf("local", jars) == {"spark.driver.extraClassPath": "/j/a.jar:/j/b.jar"}
    # a standalone master on this host runs its executors here: the jars are read in place there too
    assert jar_conf("spark://127.0.0.1:7077", jars) == {"spark.driver.extraClassPath": "/j/a.jar:/j/b.jar",
                                                        "spark.executor.extraClassPath": "/j/a.jar:/j/b.jar"}
    assert jar_conf("spark://10.1.2.3:7077", jars) == {"spark.jars": "/j/a.jar,/j/b.jar"}
    assert jar_conf("yarn", jars) == {"spark.jars": "/j/a.jar,/j/b.jar"}
