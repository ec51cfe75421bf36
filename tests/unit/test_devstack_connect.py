"""lakesink.devstack.connect: the Spark Connect server's command line holds no S3 key (its environment does), and
S3A's credential provider is left to the server's default chain (it reads that environment)."""
from __future__ import annotations

from pathlib import Path

from lakesink.devstack.connect import SERVER_CLASS, SparkConnectServer
from lakesink.manifest.table import is_connect
from lakesink.store.settings import S3Settings


def test_server_settings_hold_no_key_and_its_environment_does(tmp_path: Path) -> None:
    s3 = S3Settings(endpoint_url="http://127.0.0.1:9", access_key="AKIAPLANTED", secret_key="planted-secret")
    server = SparkConnectServer(s3=s3)
    server.work_dir = tmp_path
    conf = server.settings(15002, ["/j/a.jar", "/j/b.jar"])
    text = " ".join(f"{k}={v}" for k, v in conf.items())
    assert "planted-secret" not in text and "AKIAPLANTED" not in text
    assert "spark.hadoop.fs.s3a.aws.credentials.provider" not in conf
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9"
    assert conf["spark.connect.grpc.binding.port"] == "15002"
    assert conf["spark.driver.extraClassPath"].split(":") == ["/j/a.jar", "/j/b.jar"]
    env = server.environment()
    assert env["AWS_ACCESS_KEY_ID"] == "AKIAPLANTED" and env["AWS_SECRET_ACCESS_KEY"] == "planted-secret"
    assert "SPARK_CONNECT_MODE_ENABLED" not in env and env["SPARK_HOME"].endswith("pyspark")
    assert SERVER_CLASS.endswith("SparkConnectServer")


def test_a_classic_object_is_not_a_connect_session() -> None:
    assert not is_connect(object())
    assert not is_connect(None)
