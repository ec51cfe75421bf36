"""A batch's uploads deleted before its commit (issue 26 item 6a): `lakesink vacuum --execute` with a retention
shorter than a running batch takes that batch's uploads for orphans and deletes them. The sink then commits
nothing (safe) and says so as what it is: exit 5 (a dependency failed), one line naming the missing object and
the likely deleter -- not a lost race (exit 4), which an upload replaced by another run's bytes still is. The
next run archives everything exactly once.

The sink is the real `lakesink sink` command run in process (the session's Spark); the deletion happens at the
driver's ``before_commit`` point (every upload done and resolved, the commit not started), through the hooks a
SinkJob gets by default, swapped for this test only."""
from __future__ import annotations

import pytest
from support.archive_checks import base_config, check_exactly_once, json_payloads, manifest_rows, produce, write_config
from support.faults import CallAt

import lakesink.driver.sink as sink_module
from lakesink.cli.main import main
from lakesink.config import SinkConfig
from lakesink.driver.vacuum import vacuum


def _uploads(s3, bucket: str, topic: str) -> list[str]:
    listed = s3.client().list_objects_v2(Bucket=bucket, Prefix=f"topics/{topic}/")
    return sorted(o["Key"] for o in listed.get("Contents", []))


@pytest.mark.parametrize("fault", ["vacuum", "replaced"])
def test_uploads_deleted_before_the_commit_exit_5_and_a_replacement_stays_exit_4(
        spark, kafka, s3, bucket, topic_name, tmp_path, capsys, monkeypatch, fault):
    kafka.create_topic(topic_name, partitions=2)
    sent = produce(kafka, topic_name, json_payloads(20), partition_of=lambda i: i % 2)
    raw = base_config(kafka, s3, bucket, topic_name, **{"flush.size": "5"})
    cfg = SinkConfig.from_dict(raw)
    f = write_config(tmp_path, raw)
    seen: dict[str, list[str]] = {}

    def vacuum_with_a_short_retention():
        """What `lakesink vacuum --execute --retention 0s` does while the batch runs: its uploads are orphans."""
        seen["uploads"] = _uploads(s3, bucket, topic_name)
        report = vacuum(None, cfg, retention_s=0, execute=True)
        seen["deleted"] = sorted(o.key for o in report.orphans)

    def another_run_replaces_them():
        """Another run of the job took them for orphans and replaced them with its own bytes."""
        seen["uploads"] = _uploads(s3, bucket, topic_name)
        for key in seen["uploads"]:
            s3.client().put_object(Bucket=bucket, Key=key, Body=b'{"other": "run"}\n',
                                   Metadata={"lakesink-job": cfg.name})

    hook = vacuum_with_a_short_retention if fault == "vacuum" else another_run_replaces_them
    monkeypatch.setattr(sink_module, "NO_HOOKS", CallAt("before_commit", hook))
    rc = main(["sink", "--config", f, "--once", "--progress", "none"])
    err = capsys.readouterr().err.strip()
    n = len(seen["uploads"])  # 2 partitions x 10 records, flush.size 5: 4 objects, each with its side file
    assert n == 8 and sum(k.endswith(".json") for k in seen["uploads"]) == 4, seen
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lakesink: error: "), err
    line = lines[0]
    if fault == "vacuum":
        assert seen["deleted"] == seen["uploads"], seen  # vacuum took every upload of the running batch
        assert rc == 5, err
        first = f"s3://{bucket}/{seen['uploads'][0]}"
        assert line.startswith(f"lakesink: error: {first} (and {n - 1} more of its {n} objects), uploaded by job "
                               f"{cfg.name!r} batch 0 "), line
        for words in ("is gone before the commit", "probably deleted by `lakesink vacuum --execute` with a "
                      "--retention shorter than this batch takes", "or by another deleter", "nothing was committed",
                      "the next run archives its records again"):
            assert words in line, (words, line)
        assert "replaced by another run" not in line, line
    else:
        assert rc == 4, err
        assert "was replaced by another run of job" in line and "committed nothing" in line, line
    assert manifest_rows(spark, cfg) == [], "a batch whose uploads are gone committed rows"

    # the next run (no fault) archives every record exactly once: the deleted uploads are written again, the
    # replaced ones are taken for orphans of a failed run and replaced
    monkeypatch.undo()
    assert main(["sink", "--config", f, "--once", "--progress", "none"]) == 0, capsys.readouterr().err
    check_exactly_once(spark, cfg, sent, "json")
