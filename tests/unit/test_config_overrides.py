"""Connect client overrides (issue 26 item 3, lakesink.config.overrides): no security setting under
consumer.override.* / producer.override.* / admin.override.* is silently dropped; each ends in kafka.* or a config
error naming the key and what to write instead."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lakesink.config import SinkConfig
from lakesink.config.keys import KNOWN_KEYS
from lakesink.config.overrides import is_security_setting
from lakesink.config.translate import CONNECTORS, translate
from lakesink.errors import ConfigError

BASE = {"name": "job", "topics": "orders", "flush.size": "3", "s3.bucket.name": "bkt",
        "manifest.location": "s3a://bkt/_lakesink/manifest", "kafka.bootstrap.servers": "localhost:9092"}
PREFIXES = ("consumer.override.", "producer.override.", "admin.override.")
SECRET = "s3cr3t-Pa55word"
PLAIN = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}";'
KERBEROS = 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k.keytab";'

#: security settings lakesink's clients take: (setting, value)
APPLIED = [("security.protocol", "SASL_SSL"), ("sasl.mechanism", "SCRAM-SHA-512"),
           ("ssl.ca.location", "/etc/kafka/ca.pem"), ("ssl.certificate.location", "/etc/kafka/client.pem"),
           ("ssl.key.location", "/etc/kafka/client.key"), ("ssl.key.password", SECRET),
           ("ssl.endpoint.identification.algorithm", "https"), ("sasl.username", "u"),
           ("sasl.password", SECRET)]
#: security settings librdkafka cannot take: (setting, value, what the error line names to write instead)
REFUSED = [("ssl.truststore.location", "/etc/kafka/truststore.jks", "kafka.ssl.ca.location"),
           ("ssl.truststore.password", SECRET, "kafka.ssl.ca.location"),
           ("ssl.truststore.type", "JKS", "kafka.ssl.ca.location"),
           ("ssl.keystore.type", "JKS", "kafka.ssl.certificate.location"),
           ("ssl.keystore.location", "/etc/kafka/keystore.jks", "kafka.ssl.certificate.location"),
           ("sasl.jaas.config", KERBEROS, "kafka.sasl.kerberos"),
           ("sasl.login.callback.handler.class", "com.example.Handler", "sasl.oauthbearer"),
           ("security.protocol", "NOT_A_PROTOCOL", "must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")]


def load(**values) -> SinkConfig:
    return SinkConfig.from_dict({**BASE, **values})


def problems(values: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as ei:
        load(**values)
    return {p.key: p.message for p in ei.value.problems}


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("setting, value", APPLIED)
def test_a_security_override_ends_in_kafka_settings(prefix, setting, value):
    key = prefix + setting
    cfg = load(**{key: value})
    assert cfg.kafka_options[setting] == value
    assert key not in dict(cfg.ignored_keys)
    assert any(f"{key} -> kafka.{setting}" in w for w in cfg.warnings)  # `lakesink check` says so


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("setting, value, instead", REFUSED)
def test_a_security_override_librdkafka_cannot_take_is_refused_naming_it(prefix, setting, value, instead):
    key = prefix + setting
    with pytest.raises(ConfigError) as ei:
        load(**{key: value})
    assert [p.key for p in ei.value.problems] == [key]  # one line, naming the override itself
    assert instead in ei.value.problems[0].message
    assert SECRET not in str(ei.value) and "keyTab" not in str(ei.value)


def test_the_pasted_sasl_ssl_connect_config_connects_with_its_credentials():
    cfg = load(**{"consumer.override.security.protocol": "SASL_SSL", "consumer.override.sasl.mechanism": "PLAIN",
                  "consumer.override.sasl.jaas.config": PLAIN})
    assert (cfg.kafka_options["security.protocol"], cfg.kafka_options["sasl.mechanism"]) == ("SASL_SSL", "PLAIN")
    from lakesink import wiring

    rd = wiring.librdkafka_config(cfg.kafka_options)  # what the reader, admin client and producers get
    assert (rd["security.protocol"], rd["sasl.username"], rd["sasl.password"]) == ("SASL_SSL", "u", SECRET)
    for text in (repr(cfg), json.dumps(cfg.as_dict()), " ".join(cfg.warnings), repr(cfg.ignored_keys)):
        assert SECRET not in text


def test_every_security_override_is_applied_or_refused_never_ignored():
    settings = [s for s, _v in APPLIED] + [s for s, _v, _i in REFUSED] + ["enable.ssl.certificate.verification",
                                                                           "ssl.cipher.suites", "sasl.kerberos.keytab"]
    values = {s: v for s, v in APPLIED} | {s: v for s, v, _ in REFUSED if s != "security.protocol"}
    for prefix in PREFIXES:
        for setting in settings:
            assert is_security_setting(setting), setting
            key, value = prefix + setting, values.get(setting, "x")
            try:
                cfg = load(**{key: value})
            except ConfigError as e:
                assert key in {p.key for p in e.problems}, (key, str(e))
                continue
            assert setting in cfg.kafka_options and key not in dict(cfg.ignored_keys), key


@pytest.mark.parametrize("setting, value", [("isolation.level", "read_uncommitted"), ("group.id", "connect-orders"),
                                            ("max.partition.fetch.bytes", "2097152"), ("client.id", "archiver"),
                                            ("max.poll.records", "500"), ("auto.offset.reset", "earliest"),
                                            ("request.timeout.ms", "30000"), ("fetch.min.bytes", "lots"),
                                            ("partition.assignment.strategy",
                                             "org.apache.kafka.clients.consumer.RoundRobinAssignor")])
def test_a_non_security_consumer_override_is_applied_exactly_when_kafka_x_would_be(setting, value):
    """One rule: consumer.override.X means kafka.X when lakesink's clients take kafka.X; otherwise it is listed as
    ignored with the reason kafka.X would be refused for (not a config error: nothing about security changes)."""
    try:
        load(**{f"kafka.{setting}": value})
        takes = True
    except ConfigError:
        takes = False
    cfg = load(**{f"consumer.override.{setting}": value})
    ignored = dict(cfg.ignored_keys)
    assert (cfg.kafka_options.get(setting) == value) is takes
    assert (f"consumer.override.{setting}" in ignored) is (not takes)
    if not takes:
        assert ignored[f"consumer.override.{setting}"].startswith(f"not applied as kafka.{setting}: ")


@pytest.mark.parametrize("key", ["producer.override.acks", "producer.override.linger.ms",
                                 "admin.override.request.timeout.ms", "producer.override.isolation.level"])
def test_a_non_security_producer_or_admin_override_is_ignored_saying_how_to_apply_it(key):
    cfg = load(**{key: "all" if key.endswith("acks") else "read_committed" if "isolation" in key else "5"})
    name = key.split(".override.", 1)[1]
    assert name not in cfg.kafka_options
    assert f"write kafka.{name} to apply it to every client" in dict(cfg.ignored_keys)[key]


def test_a_conflict_with_kafka_x_names_both_keys():
    got = problems({"kafka.security.protocol": "SSL", "consumer.override.security.protocol": "SASL_SSL"})
    msg = got["consumer.override.security.protocol"]
    assert "conflicts with kafka.security.protocol='SSL'" in msg and len(got) == 1
    # equal values are no conflict
    assert load(**{"kafka.security.protocol": "SSL", "producer.override.security.protocol": "SSL"}
                ).kafka_options["security.protocol"] == "SSL"


def test_a_conflict_between_overrides_names_both_keys_and_masks_secrets():
    got = problems({"consumer.override.security.protocol": "SSL", "producer.override.security.protocol": "SASL_SSL"})
    assert "conflicts with consumer.override.security.protocol='SSL'" in got["producer.override.security.protocol"]
    with pytest.raises(ConfigError) as ei:
        load(**{"kafka.ssl.key.password": SECRET, "consumer.override.ssl.key.password": SECRET + "x"})
    assert "conflicts with kafka.ssl.key.password='******'" in str(ei.value) and SECRET not in str(ei.value)


def test_a_non_security_consumer_override_conflicts_too():
    got = problems({"kafka.isolation.level": "read_committed", "consumer.override.isolation.level": "read_uncommitted"})
    assert "conflicts with kafka.isolation.level='read_committed'" in got["consumer.override.isolation.level"]


def test_an_override_naming_no_setting_is_an_error():
    assert problems({"consumer.override.": "x"})["consumer.override."] == "names no client setting"


# ------------------------------------------------------------------------------------------------ the CLI

def _check(tmp_path, text: str) -> subprocess.CompletedProcess:
    f = tmp_path / "connect.properties"
    f.write_text("".join(f"{k}={v}\n" for k, v in BASE.items()) + text)
    return subprocess.run([sys.executable, "-m", "lakesink.cli", "check", str(f)], capture_output=True, text=True,
                          timeout=120)


def test_cli_check_refuses_a_java_trust_store_override_with_exit_3(tmp_path):
    r = _check(tmp_path, "consumer.override.security.protocol=SSL\n"
                         "consumer.override.ssl.truststore.location=/etc/kafka/truststore.jks\n"
                         f"consumer.override.ssl.truststore.password={SECRET}\n")
    assert r.returncode == 3, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("lakesink: error: ") and "consumer.override.ssl.truststore.location" in r.stderr
    assert "kafka.ssl.ca.location" in r.stderr and SECRET not in r.stderr + r.stdout
    assert "Traceback" not in r.stderr


def test_cli_check_applies_a_sasl_ssl_override_and_says_so(tmp_path):
    r = _check(tmp_path, "consumer.override.security.protocol=SASL_SSL\nconsumer.override.sasl.mechanism=PLAIN\n"
                         f"consumer.override.sasl.jaas.config={PLAIN}\nconsumer.override.max.poll.records=500\n")
    assert r.returncode == 0, r.stderr
    assert "consumer.override.security.protocol -> kafka.security.protocol" in r.stdout
    assert "consumer.override.sasl.jaas.config -> kafka.sasl.jaas.config" in r.stdout
    assert "ignored: consumer.override.max.poll.records (not applied as kafka.max.poll.records" in r.stdout
    assert SECRET not in r.stdout + r.stderr


# --------------------------------------------------------------------------------------- check --translate

AIVEN = {"name": "orders-s3", "connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector",
         "topics": "orders", "aws.s3.bucket.name": "my-archive", "file.max.records": "500",
         "kafka.bootstrap.servers": "k:9092"}


def test_translate_keeps_security_overrides_as_kafka_settings():
    t = translate(CONNECTORS["aiven"], {**AIVEN, "consumer.override.security.protocol": "SASL_SSL",
                                        "consumer.override.sasl.mechanism": "PLAIN",
                                        "consumer.override.sasl.jaas.config": PLAIN,
                                        "producer.override.acks": "all"}, set(KNOWN_KEYS))
    c = t.config
    assert (c["kafka.security.protocol"], c["kafka.sasl.mechanism"], c["kafka.sasl.jaas.config"]) == \
        ("SASL_SSL", "PLAIN", PLAIN)
    mapping = {k: (target, note) for k, target, note in t.mapping}
    assert mapping["consumer.override.security.protocol"][0] == "kafka.security.protocol"
    assert mapping["producer.override.acks"][0] == "-"
    cfg = SinkConfig.from_dict(c)
    assert cfg.kafka_options["security.protocol"] == "SASL_SSL"


def test_translate_keeps_a_conflicting_override_for_check_to_name():
    t = translate(CONNECTORS["aiven"], {**AIVEN, "kafka.security.protocol": "SSL",
                                        "consumer.override.security.protocol": "SASL_SSL"}, set(KNOWN_KEYS))
    assert t.config["consumer.override.security.protocol"] == "SASL_SSL"
    with pytest.raises(ConfigError, match="conflicts with kafka.security.protocol"):
        SinkConfig.from_dict(t.config)


def test_a_security_protocol_typo_is_refused_in_kafka_settings_too():
    """librdkafka is not asked about security.protocol (its probe must not connect): checked by name."""
    got = problems({"kafka.security.protocol": "SASL-SSL"})
    assert "must be one of PLAINTEXT, SSL" in got["kafka.security.protocol"]
    assert load(**{"kafka.security.protocol": "sasl_ssl"}).kafka_options["security.protocol"] == "sasl_ssl"
