"""A run's credentials never reach a process's command line, Spark's event log or the run's output."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from support.archive_checks import (base_config, is_local_worker, json_payloads, process_tree, produce, run_cli,
                                    write_config)


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_planted_secret_is_in_no_argv_event_log_or_output(kafka, s3, bucket, topic_name, tmp_path, engine):
    """With the Spark engine: no process's argv (the JVM's included) nor Spark's event log; with the local engine:
    no process's argv (the local workers get their tasks through pipes)."""
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(20))
    access_key = f"AKIAPLANTED{uuid.uuid4().hex[:8].upper()}"
    secret = f"planted-secret-{uuid.uuid4().hex}"
    cfg = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{
        "aws.access.key.id": access_key, "aws.secret.access.key": secret, "flush.size": "10"}))
    # Spark reads spark-defaults.conf from SPARK_CONF_DIR: turn the event log on for this run
    conf_dir, events = tmp_path / "conf", tmp_path / "events"
    conf_dir.mkdir()
    events.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n")

    seen: dict[int, str] = {}
    worker_pids: set[int] = set()

    def snapshot_cmdlines(pgid: int) -> None:
        for pid in process_tree(pgid):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if cmdline:  # a process that has exited (a zombie) reads as empty: keep what it ran with
                seen[pid] = cmdline
                if is_local_worker(pid, cmdline):
                    worker_pids.add(pid)

    rc, out = run_cli(["sink", "--config", cfg, "--once", "--flush-tail", "--engine", engine],
                      env_extra={"SPARK_CONF_DIR": str(conf_dir)}, watch=snapshot_cmdlines)
    assert rc == 0, out
    assert "batch 0: 2 objects, 20 records" in out, out  # the credentials worked (S3A and boto3)
    jvms = [c for c in seen.values() if "java" in c and "org.apache.spark" in c]
    workers = [c for pid, c in seen.items() if pid in worker_pids]
    if engine == "spark":
        assert jvms, f"the Spark JVM was never seen: {sorted(seen.values())}"
    else:
        assert workers and not jvms, f"local workers, no JVM: {sorted(seen.values())}"
    for pid, cmdline in seen.items():
        assert secret not in cmdline and access_key not in cmdline, f"pid {pid}: {cmdline}"
    logs = list(events.rglob("*"))
    assert any(p.is_file() for p in logs) is (engine == "spark"), "an event log only where Spark ran"
    for p in logs:
        if p.is_file():
            text = p.read_bytes().decode(errors="replace")
            assert secret not in text and access_key not in text, f"{p} holds the credentials"
    assert secret not in out and access_key not in out


# ---------------------------------------------------------------- issue #14 item 9: every place a run leaves text


def test_planted_secrets_are_in_no_output_log_conf_dump_or_manifest(kafka, s3, bucket, topic_name, tmp_path):
    """An S3 secret key, a SASL password and a Schema Registry password planted in the config appear nowhere a
    CLI sink run writes: stdout, stderr, the run's Spark log file (with Spark's conf dump on: spark.logConf),
    the manifest's data files and its ``_delta_log`` JSON. The same run stores its objects with SSE-S3
    (``s3.ssea.name=AES256``), checked with HeadObject."""
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(20))
    s3_secret = f"planted-s3-{uuid.uuid4().hex}"
    sasl_password = f"planted-sasl-{uuid.uuid4().hex}"
    registry_password = f"planted-sr-{uuid.uuid4().hex}"
    secrets = (s3_secret, sasl_password, registry_password)
    cfg = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{
        "aws.secret.access.key": s3_secret, "flush.size": "10", "s3.ssea.name": "AES256",
        # a SASL login the PLAINTEXT listener never asks for: the password is in the config all the same
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                                   f'username="u" password="{sasl_password}";'),
        "schema.registry.basic.auth.credentials.source": "USER_INFO",
        "schema.registry.basic.auth.user.info": f"sr-user:{registry_password}"}))
    conf_dir, logs = tmp_path / "conf", tmp_path / "logs"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.logConf true\n")
    rc, out = run_cli(["sink", "--config", cfg, "--once", "--flush-tail", "--engine", "spark"],  # Spark's conf dump
                      env_extra={"SPARK_CONF_DIR": str(conf_dir), "LAKESINK_LOG_DIR": str(logs)})
    assert rc == 0, out
    assert "batch 0: 2 objects, 20 records" in out, out
    places: dict[str, str] = {"stdout+stderr": out}
    log_files = [p for p in logs.rglob("*") if p.is_file()]
    assert log_files and any(p.stat().st_size > 0 for p in log_files), "the run wrote no Spark log file"
    places.update({str(p): p.read_bytes().decode(errors="replace") for p in log_files})
    client = s3.client()
    manifest_keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="_lakesink/").get("Contents", [])]
    assert any("_delta_log/" in k and k.endswith(".json") for k in manifest_keys), manifest_keys
    places.update({f"s3://{bucket}/{k}": client.get_object(Bucket=bucket, Key=k)["Body"].read().decode(
        errors="replace") for k in manifest_keys})
    for where, text in places.items():
        for secret in secrets:
            assert secret not in text, f"{where} holds a planted secret"
    data = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="topics/").get("Contents", [])]
    assert data
    for key in data:
        assert client.head_object(Bucket=bucket, Key=key).get("ServerSideEncryption") == "AES256", key


def test_sse_kms_headers_are_on_stored_objects(s3, bucket):
    """``s3.ssea.name=aws:kms`` with ``s3.sse.kms.key.id``: objects the sink's store writes (single PUT and
    multipart) carry both, as HeadObject reports them."""
    from lakesink import wiring
    from lakesink.config import SinkConfig
    from lakesink.store import open_store

    key_id = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    cfg = SinkConfig.from_dict({"name": "j", "topics": "t", "flush.size": "1", "s3.bucket.name": bucket,
                                "s3.region": "us-east-1", "store.url": s3.endpoint_url, "aws.access.key.id": "testing",
                                "aws.secret.access.key": "testing", "kafka.bootstrap.servers": "127.0.0.1:9",
                                "manifest.location": f"s3a://{bucket}/_lakesink/manifest",
                                "s3.ssea.name": "aws:kms", "s3.sse.kms.key.id": key_id, "s3.part.size": "5242880"})
    store = open_store(wiring.store_settings(cfg))
    store.put_bytes("topics/t/small.json", b"{}\n")
    w = store.open_writer("topics/t/big.json")
    w.write(b"x" * (6 * 1024 * 1024))  # over s3.part.size: a multipart upload
    w.commit()
    client = s3.client()
    for key in ("topics/t/small.json", "topics/t/big.json"):
        head = client.head_object(Bucket=bucket, Key=key)
        assert head.get("ServerSideEncryption") == "aws:kms", (key, head)
        assert head.get("SSEKMSKeyId") == key_id, (key, head)


def test_planted_session_token_is_in_no_output_or_log_file(kafka, s3, bucket, topic_name, tmp_path):
    """s3.credentials.source=session: the keys and token reach boto3, delta-rs and S3A (moto accepts the
    token) and none of the three appears in the run's output or its Spark log file."""
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(10))
    access_key = f"ASIAPLANTED{uuid.uuid4().hex[:8].upper()}"
    secret, token = f"planted-secret-{uuid.uuid4().hex}", f"planted-token-{uuid.uuid4().hex}"
    cfg = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{
        "aws.access.key.id": access_key, "aws.secret.access.key": secret, "aws.session.token": token,
        "s3.credentials.source": "session", "flush.size": "10"}))
    log = tmp_path / "spark.log"
    rc, out = run_cli(["sink", "--config", cfg, "--once", "--flush-tail"],
                      env_extra={"LAKESINK_SPARK_LOG_FILE": str(log)})
    assert rc == 0, out
    assert "batch 0: 1 objects, 10 records" in out or "batch 0: 1 object, 10 records" in out, out
    text = out + (log.read_text(errors="replace") if log.exists() else "")
    for planted in (access_key, secret, token):
        assert planted not in text


def test_unknown_credentials_provider_class_is_one_config_line(kafka, s3, bucket, topic_name, tmp_path):
    cfg = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{
        "s3.credentials.provider.class": "com.example.VaultProvider", "aws.session.token": "planted-tok-9"}))
    rc, out = run_cli(["check", cfg])
    assert rc == 3, out
    assert "s3.credentials.provider.class" in out and "planted-tok-9" not in out
