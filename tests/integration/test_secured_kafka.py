"""Secured Kafka (issue #28 items 2 and 3) on the project's own broker with a SASL_SSL SCRAM-SHA-512 listener and a
CA made for it (``KafkaBroker(security="sasl_ssl")``, what ``lakesink dev up --kafka-security sasl_ssl`` starts):

* the sink over it with both readers (librdkafka, Spark's Java source) and both engines, trusting the CA through
  ``kafka.ssl.ca.location`` (PEM) or Connect's ``kafka.ssl.truststore.*`` (a PKCS12 trust store written by keytool);
  dead letters, restore, ``status`` and the preflight over it too;
* each way a secured connection fails (a wrong password, an untrusted CA, a host that does not resolve, a refused
  port) said in one line on every command, exit 5, at the first definitive answer (counted in the run's log file,
  where librdkafka's own lines go: none reach the terminal), never showing the password.

The module has its own broker (the session's is PLAINTEXT only). Records are produced and read back through the
broker's PLAINTEXT listener; everything lakesink does goes through the SASL_SSL one.
"""
from __future__ import annotations

import json
import re
import socket
import uuid
from pathlib import Path

import pytest
from support.archive_checks import (base_config, check_exactly_once, consume, json_payloads, produce, run_cli,
                                    write_config)

import lakesink
from lakesink.config import SinkConfig
from lakesink.devstack.kafka import KafkaBroker
from lakesink.devstack.tls import make_ca, truststore
from lakesink.driver.preflight import check_broker
from lakesink.driver.restore import restore
from lakesink.errors import ConfigError


@pytest.fixture(scope="module")
def secured():
    """A broker of this module with a PLAINTEXT and a SASL_SSL (SCRAM-SHA-512, private CA) listener."""
    broker = KafkaBroker(security="sasl_ssl")
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


def secured_config(broker, s3, bucket: str, topic: str, trust: str = "pem", **over) -> dict:
    """A job's config reaching ``broker`` over SASL_SSL only: the CA as a PEM ``kafka.ssl.ca.location`` or as
    Connect's PKCS12 or JKS ``kafka.ssl.truststore.*`` keys."""
    cfg = base_config(broker, s3, bucket, topic)
    cfg.update(broker.client_options())
    if trust in ("pkcs12", "jks"):
        password = uuid.uuid4().hex
        suffix = ".p12" if trust == "pkcs12" else ".jks"
        store = truststore(Path(broker.ca_location), Path(broker.ca_location).with_name(f"trust-{password[:6]}{suffix}"),
                           trust.upper(), password)
        del cfg["kafka.ssl.ca.location"]
        cfg.update({"kafka.ssl.truststore.location": str(store), "kafka.ssl.truststore.password": password,
                    "kafka.ssl.truststore.type": trust.upper()})
    cfg.update(over)
    return cfg


#: every trust store kind on each reader, and the direct reader on both engines (its TLS is librdkafka's on either)
@pytest.mark.parametrize("reader, engine, trust", [("direct", "local", "pem"), ("direct", "spark", "pkcs12"),
                                                   ("direct", "local", "jks"), ("spark", "spark", "pem"),
                                                   ("spark", "spark", "pkcs12"), ("spark", "spark", "jks")])
def test_sink_over_sasl_ssl_on_both_readers_and_engines(spark, secured, s3, bucket, topic_name, reader, engine,
                                                        trust):
    secured.create_topic(topic_name, partitions=2)
    sent = produce(secured, topic_name, json_payloads(60), partition_of=lambda i: i % 2)
    cfg = SinkConfig.from_dict(secured_config(secured, s3, bucket, topic_name, trust,
                                              **{"kafka.reader": reader, "flush.size": "10"}))
    assert cfg.kafka_options["bootstrap.servers"] == secured.secured_bootstrap_servers
    check_broker(cfg)  # the preflight, over SASL_SSL
    results = lakesink.run(spark if engine == "spark" else None, cfg, engine=engine, flush_tail=True)
    assert sum(r.records for r in results) == 60, [r.summary() for r in results]
    check_exactly_once(spark, cfg, sent, "json")


def test_a_jks_truststore_with_a_wrong_password_is_one_line(secured, s3, bucket, topic_name, tmp_path):
    jks = truststore(Path(secured.ca_location), tmp_path / "trust.jks", "JKS", "changeit")
    cfg = secured_config(secured, s3, bucket, topic_name)
    del cfg["kafka.ssl.ca.location"]
    cfg.update({"kafka.ssl.truststore.location": str(jks), "kafka.ssl.truststore.password": "not-it-7Qx"})
    with pytest.raises(ConfigError) as e:
        SinkConfig.from_dict(cfg)
    assert len(str(e.value).splitlines()) == 1 and "kafka.ssl.truststore.location" in str(e.value)
    assert "keytool cannot open" in str(e.value) and "not-it-7Qx" not in str(e.value)


def test_dead_letters_restore_and_status_over_sasl_ssl(spark, secured, s3, bucket, topic_name, tmp_path):
    dlq, copy = f"{topic_name}-dlq", f"{topic_name}-copy"
    for t, n in ((topic_name, 2), (dlq, 1), (copy, 2)):
        secured.create_topic(t, partitions=n)
    bad = {3, 17}
    values = [b"{broken %d" % i if i in bad else json.dumps({"i": i}).encode() for i in range(40)]
    produce(secured, topic_name, values, partition_of=lambda i: i % 2)
    raw = secured_config(secured, s3, bucket, topic_name, **{"value.decoder": "json", "errors.tolerance": "all",
                                                             "errors.deadletterqueue.topic.name": dlq})
    cfg = SinkConfig.from_dict(raw)
    (res,) = lakesink.run(None, cfg, engine="local", flush_tail=True)
    assert res.dead_lettered == 2 and res.records == 38, res.summary()
    letters = consume(secured, dlq)  # produced by lakesink over SASL_SSL
    assert sorted(v for _, v, _, _, _ in letters) == [b"{broken 17", b"{broken 3"]

    rep = restore(spark, cfg, to_topic=copy)
    assert rep.records == 38, rep
    restored = sorted(json.loads(v)["i"] for p in (0, 1) for _, v, _, _, _ in consume(secured, copy, partition=p))
    assert restored == sorted(i for i in range(40) if i not in bad)

    path = write_config(tmp_path, raw)
    rc, out = run_cli(["status", "--config", path, "--format", "json"], timeout=120)
    assert rc == 0, out
    report = json.loads(out[out.index("{"):])
    assert report["state"] == "OK" and report["total_lag"] == 0, report
    assert secured.sasl_password not in out and "rdkafka" not in out


# ------------------------------------------------------------------------------------------------ failures (item 3)
def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


WRONG_PASSWORD = f"wrong-{uuid.uuid4().hex}"
KINDS = ["wrong_password", "untrusted_ca", "unresolvable_host", "refused_port"]
COMMANDS = {"sink": ["sink"], "status": ["status"], "restore": ["restore", "--to-topic", "never-produced"],
            "vacuum": ["vacuum"], "validate": ["validate", "--sample", "0"]}


@pytest.fixture(scope="module")
def archived(secured, s3, tmp_path_factory):
    """A job archived over SASL_SSL (for the commands that read its archive: vacuum, validate)."""
    topic = f"t-{uuid.uuid4().hex[:10]}"
    bucket = s3.create_bucket(f"test-{uuid.uuid4().hex[:12]}")
    secured.create_topic(topic, partitions=1)
    produce(secured, topic, json_payloads(20))
    raw = secured_config(secured, s3, bucket, topic)
    lakesink.run(None, SinkConfig.from_dict(raw), engine="local", flush_tail=True)
    return raw


def broken(secured, raw: dict, kind: str, tmp: Path) -> tuple[dict, str]:
    """The archived job's config with its Kafka access broken as ``kind`` says; the excerpt its error must hold."""
    cfg = dict(raw)
    where = secured.secured_bootstrap_servers
    if kind == "wrong_password":
        cfg.update(secured.client_options(password=WRONG_PASSWORD))
        return cfg, f"authentication failed at {where} (SASL SCRAM-SHA-512, user 'lakesink')"
    if kind == "untrusted_ca":
        cfg["kafka.ssl.ca.location"] = str(make_ca(tmp / "other-ca", untrusted=True).ca_pem)
        return cfg, f"TLS certificate of {where} not trusted (certificate verify failed)"
    if kind == "unresolvable_host":
        cfg["kafka.bootstrap.servers"] = "no-such-host.invalid:9093"
        return cfg, "host name 'no-such-host.invalid' does not resolve (kafka.bootstrap.servers)"
    port = _dead_port()
    cfg["kafka.bootstrap.servers"] = f"127.0.0.1:{port}"
    return cfg, f"connection refused by 127.0.0.1:{port}"


LIBRDKAFKA_LINE = re.compile(r"rdkafka|\|FAIL\||FAIL \[|librdkafka")
#: librdkafka's log line of each failure kind (what the run's log file holds, one per connection attempt)
ATTEMPT_LINE = {"wrong_password": "Authentication failed", "untrusted_ca": "certificate verify failed",
                "unresolvable_host": "Failed to resolve", "refused_port": "Connection refused"}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("kind", KINDS)
def test_a_kafka_failure_is_one_line_exit_5_at_the_first_answer(secured, archived, kind, command, tmp_path):
    cfg, excerpt = broken(secured, archived, kind, tmp_path)
    path = write_config(tmp_path, cfg)
    logs = tmp_path / "logs"
    rc, out = run_cli([*COMMANDS[command], "--config", path], env_extra={"LAKESINK_LOG_DIR": str(logs)},
                      timeout=180)
    print(out)
    assert WRONG_PASSWORD not in out and secured.sasl_password not in out
    assert not [line for line in out.splitlines() if LIBRDKAFKA_LINE.search(line)], out
    if command in ("vacuum", "validate"):  # they read the archive, never Kafka: a broken Kafka access is no failure
        assert rc == 0, out
        return
    errors = [line for line in out.splitlines() if line.startswith("lakesink: error: ")]
    assert rc == 5 and len(errors) == 1, out
    assert excerpt in errors[0], errors[0]
    assert "no answer in" not in out and "gave up after" not in out  # the deadlines' messages: not reached
    # counted, not timed: librdkafka's lines are in the run's log file, and they show the first definitive answer
    # ended the command (a retry loop would log an attempt every backoff, for the 60 s deadline)
    logged = "".join(p.read_text(errors="replace") for p in logs.glob("*.log")) if logs.exists() else ""
    attempts = logged.count(ATTEMPT_LINE[kind])
    assert 1 <= attempts <= 3, logged
    assert WRONG_PASSWORD not in logged and secured.sasl_password not in logged


def test_verbose_shows_librdkafka_s_lines(secured, archived, tmp_path):
    cfg, excerpt = broken(secured, archived, "wrong_password", tmp_path)
    rc, out = run_cli(["status", "--verbose", "--config", write_config(tmp_path, cfg)], timeout=180)
    assert rc == 5 and excerpt in out, out
    assert "Authentication failed" in out and "rdkafka" in out  # librdkafka's own line, on the terminal
    assert WRONG_PASSWORD not in out


def test_dev_up_with_kafka_security_sasl_ssl(tmp_path):
    """``lakesink dev up --kafka-security sasl_ssl``: the listener, user and CA printed (never the password, also
    not in ``--format json``), a config from them passes the preflight over SASL_SSL; ``dev down`` stops it."""
    import os
    import subprocess
    import sys

    def run(*args):
        proc = subprocess.run([sys.executable, "-m", "lakesink.cli", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=180)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout + proc.stderr

    state_file = tmp_path / ".lakesink" / "dev-stack.json"
    try:
        out = run("dev", "up", "--kafka-security", "sasl_ssl", "--no-registry")
        info = json.loads(state_file.read_text())
        assert oct(os.stat(state_file).st_mode & 0o777) == "0o600"  # it holds the SCRAM password
        assert info["kafka_security"] == "sasl_ssl" and info["kafka_sasl_password"] not in out
        assert (f"Kafka SASL_SSL:          {info['secured_bootstrap_servers']}  (SCRAM-SHA-512, user "
                f"{info['kafka_sasl_username']}, password in {state_file}; CA {info['kafka_ca_location']})") in out
        doc = run("--format", "json", "dev", "status")
        assert info["kafka_sasl_password"] not in doc and info["secured_bootstrap_servers"] in doc
        cfg = SinkConfig.from_dict({
            "name": "dev-secured", "topics": "t", "flush.size": "10", "format.class": "json",
            "s3.bucket.name": "dev-bucket", "store.url": f"file://{tmp_path / 'store'}",
            "manifest.location": str(tmp_path / "manifest"),
            "kafka.bootstrap.servers": info["secured_bootstrap_servers"], "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": info["kafka_sasl_mechanism"],
            "kafka.sasl.jaas.config": f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                      f'username="{info["kafka_sasl_username"]}" '
                                      f'password="{info["kafka_sasl_password"]}";',
            "kafka.ssl.ca.location": info["kafka_ca_location"]})
        check_broker(cfg)  # SASL_SSL with the printed CA and the state file's password
    finally:
        subprocess.run([sys.executable, "-m", "lakesink.cli", "dev", "down"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=180)
    assert not state_file.exists()
