"""``kafka.*`` keys for librdkafka (admin client, direct reader) and for Spark's Java consumer: mapped where
the names differ, refused at config load where librdkafka cannot take them; ``kafka.reader``."""
from __future__ import annotations

import pytest

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.config.kafka import librdkafka_options
from lakesink.driver.kafka_admin import client_config, isolation_level
from lakesink.errors import ConfigError
from lakesink.executor.columnar import ColumnarPlan
from lakesink.executor.kafka_reader import arrow_schema, consumer_config

BASE = {"name": "j", "topics": "t", "flush.size": "3", "s3.bucket.name": "bkt", "manifest.location": "/tmp/m",
        "kafka.bootstrap.servers": "localhost:9092"}
SECRET = "s3cr3t-Pa55w0rd"
PLAIN = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="{SECRET}";'
SCRAM = f"org.apache.kafka.common.security.scram.ScramLoginModule required username=bob password={SECRET};"


def problems(**over) -> str:
    with pytest.raises(ConfigError) as ei:
        SinkConfig.from_dict({**BASE, **over})
    assert SECRET not in str(ei.value)
    return str(ei.value)


def test_reader_defaults_to_direct_and_read_committed():
    c = SinkConfig.from_dict(BASE)
    assert c.kafka_reader == "direct" and "reader" not in c.kafka_options
    assert c.kafka_options == {"bootstrap.servers": "localhost:9092"}  # only what the config says ...
    assert isolation_level(c.kafka_options) == "read_committed"  # ... read_committed wherever it is used
    assert wiring.librdkafka_config(c.kafka_options)["isolation.level"] == "read_committed"
    assert "isolation.level" not in client_config(c.kafka_options)  # consumer-only
    assert SinkConfig.from_dict({**BASE, "kafka.reader": "Spark"}).kafka_reader == "spark"
    assert "kafka.reader" in problems(**{"kafka.reader": "jvm"})
    c = SinkConfig.from_dict({**BASE, "kafka.isolation.level": "read_uncommitted"})
    assert isolation_level(c.kafka_options) == "read_uncommitted"
    assert "kafka.isolation.level" in problems(**{"kafka.isolation.level": "committed"})


def test_jaas_plain_and_scram_become_librdkafka_credentials():
    c = SinkConfig.from_dict({**BASE, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": PLAIN})
    assert c.kafka_options["sasl.jaas.config"] == PLAIN  # Spark's source gets the Java form
    conf = wiring.librdkafka_config(c.kafka_options)
    assert (conf["sasl.username"], conf["sasl.password"], conf["sasl.mechanism"]) == ("alice", SECRET, "PLAIN")
    assert "sasl.jaas.config" not in conf and "sasl.jaas.config" not in client_config(c.kafka_options)
    assert SECRET not in repr(c) and SECRET not in str(c.as_dict())
    c = SinkConfig.from_dict({**BASE, "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": SCRAM})
    conf = consumer_config(c.kafka_options, "g")
    assert (conf["sasl.username"], conf["sasl.password"], conf["sasl.mechanism"]) == ("bob", SECRET, "SCRAM-SHA-512")
    assert conf["group.id"] == "g" and conf["enable.auto.commit"] is False and conf["enable.partition.eof"] is True
    assert "kafka.sasl.jaas.config" in problems(**{"kafka.sasl.jaas.config": SCRAM})  # SCRAM needs a mechanism
    msg = problems(**{"kafka.sasl.jaas.config":
                      "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"})
    assert "kafka.sasl.jaas.config" in msg and "sasl.kerberos" in msg
    assert "kafka.sasl.jaas.config='******'" in problems(**{"kafka.sasl.jaas.config": f"password={SECRET}"})


@pytest.mark.parametrize("key, value, says", [
    ("kafka.ssl.truststore.location", "/etc/kafka/truststore.jks", "ssl.ca.location"),
    ("kafka.ssl.keystore.location", "/etc/kafka/keystore.jks", "PKCS#12"),
    ("kafka.ssl.truststore.password", SECRET, "ssl.ca.location"),
    ("kafka.max.poll.records", "500", "no equivalent"),
    ("kafka.no.such.setting", "1", "No such configuration property"),
    ("kafka.session.timeout.ms", "soon", "Invalid value"),
    ("kafka.enable.auto.commit", "true", "set by lakesink"),
    ("kafka.ssl.key.password", "", None),  # accepted: librdkafka takes it (value checked when used)
])
def test_keys_librdkafka_cannot_take_fail_at_load(key, value, says):
    if says is None:
        SinkConfig.from_dict({**BASE, key: value})
        return
    msg = problems(**{key: value})
    assert f"{key}=" in msg and says in msg


def test_renamed_keys_are_mapped():
    conf, probs = librdkafka_options({"fetch.max.wait.ms": "200", "client.id": "x"})
    assert conf == {"fetch.wait.max.ms": "200", "client.id": "x", "isolation.level": "read_committed"} and not probs


def test_direct_reader_columns_and_columnar_plans():
    import pyarrow as pa

    assert arrow_schema(False, False, False).names == ["value", "partition", "offset", "ts"]
    s = arrow_schema(True, True, True)
    assert s.names == ["value", "partition", "offset", "ts", "key", "topic", "headers"]
    assert s.field("headers").type == pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    assert ColumnarPlan("parquet", "{}").for_direct_reader().python_check  # decoded a column at a time
    assert ColumnarPlan("avro", "{}").for_direct_reader().python_check
    assert ColumnarPlan("json").for_direct_reader() == ColumnarPlan("json")


def test_driver_admin_clients_log_warnings_only_unless_the_config_says():
    """librdkafka's info lines (BGQUEUE on destroy) reached `lakesink status`'s stderr; the config still decides."""
    assert client_config(SinkConfig.from_dict(BASE).kafka_options)["log_level"] == "4"
    c = SinkConfig.from_dict({**BASE, "kafka.log_level": "7"})
    assert client_config(c.kafka_options)["log_level"] == "7"


def test_admin_client_config_drops_every_consumer_only_setting():
    """An admin client warns (CONFWARN) about each consumer property; the driver's and restore's admin clients
    are built from client_config, which drops the one list of them (lakesink.config.kafka.CONSUMER_ONLY)."""
    from lakesink.config.kafka import CONSUMER_ONLY

    c = SinkConfig.from_dict({**BASE, "kafka.fetch.min.bytes": "1", "kafka.session.timeout.ms": "30000",
                              "kafka.socket.keepalive.enable": "true"})
    conf = client_config(c.kafka_options)
    assert not set(conf) & set(CONSUMER_ONLY)
    assert conf["socket.keepalive.enable"] == "true" and conf["bootstrap.servers"] == "localhost:9092"
