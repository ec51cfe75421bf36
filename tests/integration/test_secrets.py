"""A run's credentials never reach a process's command line, Spark's event log or the run's output."""
from __future__ import annotations

import uuid
from pathlib import Path

from archive_checks import base_config, json_payloads, process_tree, produce, run_cli, write_config


def test_planted_secret_is_in_no_argv_event_log_or_output(kafka, s3, bucket, topic_name, tmp_path):
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

    def snapshot_cmdlines(pgid: int) -> None:
        for pid in process_tree(pgid):
            try:
                seen[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                pass

    rc, out = run_cli(["sink", "--config", cfg, "--once", "--flush-tail"],
                      env_extra={"SPARK_CONF_DIR": str(conf_dir)}, watch=snapshot_cmdlines)
    assert rc == 0, out
    assert "batch 0: 2 objects, 20 records" in out, out  # the credentials worked (S3A and boto3)
    jvms = [c for c in seen.values() if "java" in c and "org.apache.spark" in c]
    assert jvms, f"the Spark JVM was never seen: {sorted(seen.values())}"
    for pid, cmdline in seen.items():
        assert secret not in cmdline and access_key not in cmdline, f"pid {pid}: {cmdline}"
    logs = list(events.rglob("*"))
    assert any(p.is_file() for p in logs), "no event log written"
    for p in logs:
        if p.is_file():
            text = p.read_bytes().decode(errors="replace")
            assert secret not in text and access_key not in text, f"{p} holds the credentials"
    assert secret not in out and access_key not in out


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
