"""The runs table (issue #31 item 3): each `lakesink sink` run's outcome next to a path manifest, and `status`
reading it: FAILED with the last run's error line and log, --max-failures, the last run when healthy."""
from __future__ import annotations

import datetime as dt
import io
import json

import pytest

from lakesink.manifest.runs import FAILED, OK, RunRow, RunsTable, consecutive_failures, record_run, runs_location


def row(outcome: str, minute: int, job: str = "j", error: str | None = None) -> RunRow:
    t = dt.datetime(2026, 11, 27, 3, minute)
    return RunRow(job=job, run_id=f"r{minute}", command="sink", started_at=t, ended_at=t + dt.timedelta(seconds=30),
                  outcome=outcome, exit_code=0 if outcome == OK else 5, error=error, log_path="/tmp/x.log" if error else None,
                  batches=1 if outcome == OK else 0, records=10 if outcome == OK else 0)


def test_runs_are_kept_per_job_newest_first(tmp_path):
    loc = runs_location(str(tmp_path / "manifest"))
    assert loc == str(tmp_path / "manifest_runs") and runs_location("db.manifest") is None
    table = RunsTable(loc)
    assert table.last("j") == []  # no table yet
    for r in (row(OK, 1), row(FAILED, 2, error="broker down"), row(OK, 3, job="other"), row(FAILED, 4, error="again")):
        assert record_run(str(tmp_path / "manifest"), None, r) is None
    runs = table.last("j")
    assert [(r.run_id, r.outcome, r.error) for r in runs] == [("r4", FAILED, "again"), ("r2", FAILED, "broker down"),
                                                               ("r1", OK, None)]
    assert runs[0].ended_at == dt.datetime(2026, 11, 27, 3, 4, 30)  # naive UTC, as written
    assert consecutive_failures(runs) == 2 and consecutive_failures(runs[2:]) == 0


def test_a_write_that_fails_is_a_warning_not_an_error(tmp_path):
    (tmp_path / "manifest_runs").write_text("a file where the table would go")
    warning = record_run(str(tmp_path / "manifest"), None, row(OK, 1))
    assert warning is not None and warning.startswith("run r1: outcome not recorded in ")


def _report(tmp_path, runs: list[RunRow], max_failures: int = 0):
    from lakesink.config import SinkConfig
    from lakesink.driver.status import StatusReport, Thresholds, add_runs

    m = str(tmp_path / "manifest")
    for r in reversed(runs):  # oldest first, as they happened
        record_run(m, None, r)
    cfg = SinkConfig.from_dict({"name": "j", "topics": "t", "format.class": "json", "flush.size": "10",
                                "s3.bucket.name": "bucket", "manifest.location": m,
                                "kafka.bootstrap.servers": "127.0.0.1:1"})
    rep = StatusReport(job="j", manifest=m, partitions=[], thresholds=Thresholds(max_failures=max_failures))
    add_runs(rep, cfg)
    return rep


def _text(rep) -> list[str]:
    from lakesink.cli.output import StatusResult, TextOutput

    out = io.StringIO()
    TextOutput(out=out).status(StatusResult(rep))
    return out.getvalue().splitlines()


def test_status_is_failed_with_the_last_runs_error_and_log(tmp_path):
    rep = _report(tmp_path, [row(FAILED, 5, error="lakesink: broker 127.0.0.1:1 refused"), row(OK, 1)])
    assert (rep.state, rep.healthy, rep.exit_code, rep.failures) == ("FAILED", False, 1, 1)
    assert rep.problems[0] == ("the last run failed; the last at 2026-11-27 03:05:30 UTC, exit 5: lakesink: broker "
                               "127.0.0.1:1 refused (log: /tmp/x.log)")
    lines = _text(rep)
    assert lines[0].startswith("job 'j': FAILED, UNHEALTHY (1 problem(s))") and lines[1].startswith("  the last run failed")
    from lakesink.cli.output import StatusResult, status_dict

    doc = json.loads(json.dumps(status_dict(StatusResult(rep)), default=str))
    assert doc["state"] == "FAILED" and doc["failures"] == 1 and doc["last_run"]["error"].endswith("refused")


def test_max_failures_tolerates_a_streak_and_shows_the_last_run(tmp_path):
    rep = _report(tmp_path, [row(FAILED, 6, error="x"), row(FAILED, 5, error="y"), row(OK, 1)], max_failures=2)
    assert (rep.state, rep.healthy, rep.failures) == ("OK", True, 2)
    assert _text(rep)[-1] == "  last run: FAILED at 2026-11-27 03:06:30 UTC, exit 5: x"
    assert _report(tmp_path / "b", [row(FAILED, 7, error="z"), row(FAILED, 6, error="x"), row(FAILED, 5, error="y")],
                   max_failures=2).state == "FAILED"


def test_a_healthy_job_shows_its_last_good_run(tmp_path):
    rep = _report(tmp_path, [row(OK, 9), row(FAILED, 5, error="y")])
    assert (rep.state, rep.failures) == ("OK", 0)
    assert _text(rep)[-1] == "  last run: OK at 2026-11-27 03:09:30 UTC, 1 batch(es), 10 record(s)"


def test_max_failures_below_zero_is_a_usage_error(tmp_path, capsys):
    from lakesink.cli.main import main

    cfg = tmp_path / "job.properties"
    cfg.write_text("name=j\ntopics=t\nformat.class=json\nflush.size=10\ns3.bucket.name=bucket\n"
                   f"manifest.location={tmp_path / 'm'}\nkafka.bootstrap.servers=127.0.0.1:1\n")
    assert main(["status", "--config", str(cfg), "--max-failures", "-1"]) == 2
    assert capsys.readouterr().err.strip() == "lakesink: error: --max-failures -1: must be 0 or more"


def test_a_failing_sink_run_records_its_outcome(tmp_path, capsys):
    """`lakesink sink` whose preflight cannot reach its S3 endpoint: exit 5, the same line as always, and a FAILED
    row with that line in the runs table beside the (path) manifest."""
    from lakesink.cli.main import main

    m = tmp_path / "manifest"
    cfg = tmp_path / "job.properties"
    cfg.write_text("name=j\ntopics=t\nformat.class=json\nflush.size=10\ns3.bucket.name=bucket\ns3.region=us-east-1\n"
                   "store.url=http://127.0.0.1:1\naws.access.key.id=testing\naws.secret.access.key=testing\n"
                   f"manifest.location={m}\nkafka.bootstrap.servers=127.0.0.1:1\n")
    rc = main(["sink", "--config", str(cfg), "--once", "--engine", "local"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 5 and len(err) == 1, err
    (run,) = RunsTable(runs_location(str(m))).last("j")
    assert (run.outcome, run.exit_code, run.command, run.batches) == (FAILED, 5, "sink", 0)
    assert err[0].startswith("lakesink: error: ") and run.error in err[0], (run.error, err)
