"""`lakesink status` remembers failed runs (issue #31 item 3), on a real broker, S3 endpoint and S3 manifest: a sink
run that fails on a bad record records FAILED with its error line; status says FAILED (exit 1) with that line,
tolerates it with --max-failures 1, and after a good run shows it as the last run. The sink runs in process on
the local engine (no JVM)."""
from __future__ import annotations

import json

from support.archive_checks import base_config, json_payloads, produce, write_config

from lakesink.cli.main import main


def test_status_remembers_a_failed_run_until_a_good_one(kafka, s3, bucket, topic_name, tmp_path, capsys):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, [b"not json {"], headers=False)
    bad = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name))
    assert main(["sink", "--config", bad, "--once", "--flush-tail", "--engine", "local"]) == 6
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lakesink: error: "), err

    assert main(["status", "--config", bad]) == 1
    out = capsys.readouterr().out.splitlines()
    summary = next(line for line in out if line.startswith("job '"))
    assert summary.startswith(f"job 'job-{topic_name}': FAILED, UNHEALTHY"), out  # it ran, though it never committed
    assert any(line.startswith("  the last run failed; the last at ") and "exit 6: " in line for line in out), out
    assert main(["--format", "json", "status", "--config", bad]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["state"] == "FAILED" and doc["never_ran"] is True and doc["failures"] == 1 and doc["last_run"]["outcome"] == "FAILED" and doc["last_run"]["exit_code"] == 6
    assert doc["last_run"]["error"] in err[0]

    # the same job, told to skip what it cannot parse: a good run; status shows it as the last one
    good = write_config(tmp_path, name="good.json", cfg=base_config(kafka, s3, bucket, topic_name, **{
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": f"{topic_name}-dlq"}))
    kafka.create_topic(f"{topic_name}-dlq", partitions=1)
    produce(kafka, topic_name, json_payloads(3), headers=False)
    assert main(["sink", "--config", good, "--once", "--flush-tail", "--engine", "local"]) == 0
    capsys.readouterr()
    assert main(["status", "--config", good]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("  last run: OK at ") and out[-1].endswith(", 1 batch(es), 3 record(s)"), out
