"""Issue #28 items 2-3 without a broker: librdkafka's error-callback errors classified in one line (the texts are
librdkafka 2.16's own, as its error callback gave them against the project's broker), and the kafka.* key table for
the two clients (Connect's trust/key store keys for librdkafka, librdkafka's CA for Spark's Java client)."""
from __future__ import annotations

import datetime as dt

import pytest
from confluent_kafka import KafkaError, KafkaException

from lakesink.config.kafka import java_options, librdkafka_options, store_type
from lakesink.config.kafka_errors import ErrorWatch, classify, mask
from lakesink.errors import ConfigError

PASSWORD = "pw-Zq81-never-shown"
CONF = {"bootstrap.servers": "127.0.0.1:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": PASSWORD, "ssl.ca.location": "/etc/kafka/ca.pem"}

AUTH = ("sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication failed during "
        "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 305ms in state AUTH_REQ)")
UNTRUSTED = ("sasl_ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate "
             "verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly "
             "configured or root CA certificates are installed (install ca-certificates package) (after 5ms in "
             "state SSL_HANDSHAKE)")
RESOLVE = ("no-such-host.invalid:9092/bootstrap: Failed to resolve 'no-such-host.invalid:9092': Name or service "
           "not known (after 1ms in state CONNECT)")
REFUSED = ("127.0.0.1:9093/bootstrap: Connect to ipv4#127.0.0.1:9093 failed: Connection refused (after 0ms in state "
           "CONNECT)")


def err(code: int, text: str) -> KafkaError:
    return KafkaError(code, text)


def test_a_refused_login_names_mechanism_and_user_never_the_password():
    for e in (err(KafkaError._AUTHENTICATION, AUTH), KafkaException(err(KafkaError._AUTHENTICATION, AUTH)),  # noqa: SLF001
              err(KafkaError.SASL_AUTHENTICATION_FAILED, f"{AUTH} password={PASSWORD}")):
        f = classify(e, CONF)
        assert f.kind == "authentication" and f.definitive and f.broker == "127.0.0.1:9093"
        assert "authentication failed at 127.0.0.1:9093 (SASL SCRAM-SHA-512, user 'alice')" in f.message
        assert PASSWORD not in f.message and "\n" not in f.message


def test_an_untrusted_certificate_is_named_with_the_ca_the_client_trusts():
    f = classify(err(KafkaError._SSL, UNTRUSTED), CONF)  # noqa: SLF001
    assert f.kind == "tls" and f.definitive
    assert f.message.startswith("TLS certificate of 127.0.0.1:9093 not trusted (certificate verify failed)")
    assert "/etc/kafka/ca.pem" in f.message
    plain = classify(err(KafkaError._SSL, "127.0.0.1:9092/bootstrap: SSL handshake failed: error:0A00010B:SSL "  # noqa: SLF001
                                          "routines::wrong version number (after 2ms in state SSL_HANDSHAKE)"), CONF)
    assert plain.kind == "tls" and "is it a TLS listener? kafka.security.protocol" in plain.message


def test_resolve_and_refused_are_definitive_only_once_every_bootstrap_server_failed():
    resolve, refused = classify(err(KafkaError._RESOLVE, RESOLVE), CONF), classify(err(KafkaError._TRANSPORT, REFUSED), CONF)  # noqa: SLF001,E501
    assert resolve.kind == "resolve" and resolve.message == ("host name 'no-such-host.invalid' does not resolve "
                                                             "(kafka.bootstrap.servers)")
    assert refused.kind == "refused" and refused.message.startswith("connection refused by 127.0.0.1:9093")
    assert not resolve.definitive and not refused.definitive
    watch = ErrorWatch(CONF)
    watch(err(KafkaError._TRANSPORT, REFUSED))  # noqa: SLF001
    assert watch.failure() is None  # another bootstrap server may still answer
    watch(err(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))  # noqa: SLF001
    assert watch.failure().kind == "refused"
    assert watch.failure(connecting=False) is None  # a client that was connected: a restart, retried
    watch(err(KafkaError._SSL, UNTRUSTED))  # noqa: SLF001
    assert watch.failure(connecting=False).kind == "tls" and watch.attempts == 2


def test_other_transport_errors_are_transient():
    f = classify(err(KafkaError._TRANSPORT, "127.0.0.1:9093/1: Disconnected (after 5012ms in state UP)"), CONF)  # noqa: SLF001
    assert f.kind == "transport" and not f.definitive
    watch = ErrorWatch(CONF)
    watch(err(KafkaError._TRANSPORT, "127.0.0.1:9093/1: Disconnected (after 5012ms in state UP)"))  # noqa: SLF001
    watch(err(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))  # noqa: SLF001
    assert watch.failure() is None


def test_mask_removes_every_secret_value():
    jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="{PASSWORD}";'
    text = f"x {PASSWORD} y {jaas}"
    out = mask(text, {**CONF, "sasl.jaas.config": jaas})
    assert PASSWORD not in out and "******" in out


def _ca_pem_and_p12(tmp_path, password: bytes | None):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM)
    enc = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    p12 = tmp_path / "truststore.p12"
    p12.write_bytes(pkcs12.serialize_key_and_certificates(None, None, None, [cert], enc))
    (tmp_path / "ca.pem").write_bytes(pem)
    return pem.decode(), p12


def test_connect_truststore_keys_become_librdkafka_s_ca(tmp_path):
    pem, p12 = _ca_pem_and_p12(tmp_path, b"changeit")
    conf, problems = librdkafka_options({"ssl.truststore.location": str(p12), "ssl.truststore.password": "changeit",
                                         "ssl.truststore.type": "PKCS12"})
    assert not problems and conf["ssl.ca.pem"] == pem
    assert not any(k.startswith("ssl.truststore") for k in conf)  # librdkafka has no such keys
    conf, problems = librdkafka_options({"ssl.truststore.location": str(tmp_path / "ca.pem"),
                                         "ssl.truststore.type": "PEM"})
    assert not problems and conf["ssl.ca.location"] == str(tmp_path / "ca.pem")
    _conf, problems = librdkafka_options({"ssl.truststore.location": str(p12), "ssl.truststore.password": "wrong"})
    assert problems[0][0] == "kafka.ssl.truststore.location" and "wrong password" in problems[0][1]
    assert "wrong" not in problems[0][1].replace("wrong password", "")


def test_a_jks_truststore_reaches_librdkafka_through_keytool(tmp_path):
    """librdkafka reads no JKS: its certificates are listed by the JDK's keytool into ssl.ca.pem; a store keytool
    cannot open (a wrong password, not a JKS file) is one line naming the key, never the password."""
    from lakesink.devstack.tls import make_ca, truststore

    ca = make_ca(tmp_path)
    jks = truststore(ca.ca_pem, tmp_path / "trust.jks", "JKS", PASSWORD)
    assert store_type(str(jks), None) == "JKS"
    conf, problems = librdkafka_options({"ssl.truststore.location": str(jks), "ssl.truststore.password": PASSWORD})
    assert not problems and conf["ssl.ca.pem"].startswith("-----BEGIN CERTIFICATE-----")
    _conf, problems = librdkafka_options({"ssl.truststore.location": str(jks), "ssl.truststore.password": "nope!"})
    assert problems[0][0] == "kafka.ssl.truststore.location" and "keytool cannot open" in problems[0][1]
    assert "password was incorrect" in problems[0][1] and "nope!" not in problems[0][1]
    junk = tmp_path / "junk.jks"
    junk.write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 60)
    _conf, problems = librdkafka_options({"ssl.truststore.location": str(junk), "ssl.truststore.password": "x"})
    assert len(problems) == 1 and "is a JKS trust store keytool cannot open" in problems[0][1]


def test_keystore_keys_for_both_clients(tmp_path):
    conf, problems = librdkafka_options({"ssl.keystore.location": "/k/client.p12", "ssl.keystore.type": "PKCS12",
                                         "ssl.keystore.password": PASSWORD})
    assert not problems and conf["ssl.keystore.location"] == "/k/client.p12" and "ssl.keystore.type" not in conf
    conf, problems = librdkafka_options({"ssl.keystore.location": "/k/client.pem", "ssl.keystore.type": "PEM"})
    assert not problems and conf["ssl.certificate.location"] == conf["ssl.key.location"] == "/k/client.pem"
    _conf, problems = librdkafka_options({"ssl.keystore.type": "JKS"})
    assert "librdkafka cannot read a JKS key store" in problems[0][1]


def test_java_client_gets_librdkafka_s_ca_as_a_pem_truststore():
    j = java_options({"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL", "ssl.ca.location": "/ca.pem",
                      "sasl.jaas.config": "x", "fetch.wait.max.ms": "100"})
    assert j == {"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL", "sasl.jaas.config": "x",
                 "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem", "fetch.max.wait.ms": "100"}
    # Connect's own keys pass through untouched (the Java client reads JKS, PKCS12 and PEM itself)
    keys = {"ssl.truststore.location": "/t.jks", "ssl.truststore.password": "p", "ssl.truststore.type": "JKS",
            "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "p", "ssl.keystore.type": "PKCS12"}
    assert java_options(keys) == keys
    assert java_options({"ssl.certificate.location": "/c.pem", "ssl.key.location": "/c.pem"})["ssl.keystore.type"] \
        == "PEM"
    with pytest.raises(ConfigError, match="one file"):
        java_options({"ssl.certificate.location": "/c.pem", "ssl.key.location": "/k.pem"})


@pytest.mark.parametrize("command", [["status"], ["restore", "--to-topic", "copy"], ["sink"]])
def test_commands_say_a_refused_broker_in_one_line_and_log_librdkafka_to_the_run_log(tmp_path, command):
    """No service needed: a closed port. Exit 5 at the first refusal, one error line, librdkafka's own lines in the
    run's log file and not on the terminal (before: 'Broker transport failure', 60 s of retries for status and
    restore, and librdkafka's lines on stderr)."""
    import json
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = {"name": "job-refused", "topics": "t", "flush.size": "10", "format.class": "json",
           "s3.bucket.name": "bucket-refused", "store.url": f"file://{tmp_path / 'store'}",
           "manifest.location": str(tmp_path / "manifest"), "kafka.bootstrap.servers": f"127.0.0.1:{port}",
           "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "SCRAM-SHA-512",
           "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                     f'username="bob" password="{PASSWORD}";'}
    path = tmp_path / "sink.json"
    path.write_text(json.dumps(cfg))
    logs = tmp_path / "logs"
    r = subprocess.run([sys.executable, "-m", "lakesink.cli", *command, "--config", str(path)], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "LAKESINK_LOG_DIR": str(logs)})
    out = r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("lakesink: error: ")]
    assert r.returncode == 5 and len(errors) == 1, out
    assert f"connection refused by 127.0.0.1:{port}" in errors[0] and "no answer in" not in out
    assert "rdkafka" not in out and "FAIL" not in out and PASSWORD not in out
    logged = "".join(p.read_text() for p in logs.glob("*.log"))
    assert 1 <= logged.count("Connection refused") <= 3, logged  # counted: the first answer ended it
    assert PASSWORD not in logged


def test_verbose_routes_librdkafka_lines_to_stderr(capsys, tmp_path, monkeypatch):
    import logging

    from lakesink.runtime.client_logs import route_client_logs
    from lakesink.config.kafka_errors import LOGGER_NAME

    monkeypatch.setenv("LAKESINK_SPARK_LOG_FILE", str(tmp_path / "run.log"))
    logger = logging.getLogger(LOGGER_NAME)
    saved = (list(logger.handlers), logger.propagate, logger.level)
    try:
        route_client_logs(False)
        logger.error("FAIL [rdkafka#producer-1] quiet")
        route_client_logs(True)
        logger.error("FAIL [rdkafka#producer-1] loud")
    finally:
        logger.handlers[:] = saved[0]
        logger.propagate, logger.level = saved[1], saved[2]
    err = capsys.readouterr().err
    assert "quiet" not in err and "loud" in err
    assert "quiet" in (tmp_path / "run.log").read_text()
