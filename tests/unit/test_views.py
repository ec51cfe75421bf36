"""Pure parts of `lakesink sql` / `lakesink status`: view selection, the status report's thresholds, rendering."""
from __future__ import annotations

import datetime as dt
import io
import json

from lakesink.cli.output import CsvOutput, JsonOutput, StatusResult, TableResult, TextOutput
from lakesink.driver.status import Thresholds, build_report, partition_progress
from lakesink.manifest.views import VIEWS, needs_broker

NOW = dt.datetime(2026, 11, 23, 12, 0, 0)


def test_only_queries_naming_lag_or_end_offsets_need_the_broker():
    assert needs_broker("SELECT * FROM lag")
    assert needs_broker("select topic from LAG where lag_records > 0")
    assert needs_broker("SELECT * FROM end_offsets")
    assert not needs_broker("SELECT lag_records FROM objects")  # a column name, not the view
    assert not needs_broker("SELECT * FROM committed_offsets")
    assert list(VIEWS) == ["committed_offsets", "objects", "schema_history", "gaps", "erasures", "lag"]


def test_partition_progress_takes_the_highest_range_end_and_latest_commit_of_the_job():
    rows = [
        {"job": "j", "topic": "t", "kafka_partition": 0, "range_end": 9, "committed_at": NOW - dt.timedelta(hours=2)},
        {"job": "j", "topic": "t", "kafka_partition": 0, "range_end": 19, "committed_at": NOW - dt.timedelta(hours=1)},
        {"job": "other", "topic": "t", "kafka_partition": 0, "range_end": 99, "committed_at": NOW},
        {"job": "j", "topic": "t", "kafka_partition": 1, "range_end": 4,
         "committed_at": (NOW - dt.timedelta(minutes=5)).replace(tzinfo=dt.timezone.utc)},
    ]
    assert partition_progress(rows, "j") == {("t", 0): (20, NOW - dt.timedelta(hours=1)),
                                             ("t", 1): (5, NOW - dt.timedelta(minutes=5))}


def _report(thresholds: Thresholds, orphans=()):
    progress = {("t", 0): (20, NOW - dt.timedelta(hours=1)), ("t", 1): (5, NOW - dt.timedelta(minutes=5))}
    bounds = {("t", 0): (0, 20), ("t", 1): (0, 105), ("t", 2): (3, 10)}
    return build_report("j", "s3a://b/m", progress, bounds, orphans, thresholds, NOW)


def test_status_report_lag_age_and_orphans():
    rep = _report(Thresholds(), orphans=[("t", 1), ("t", 1), None])
    by = {p.partition: p for p in rep.partitions}
    assert (by[0].committed_offset, by[0].end_offset, by[0].lag, by[0].last_commit_age_s) == (20, 20, 0, 3600.0)
    assert (by[1].lag, by[1].orphans) == (100, 2)
    assert (by[2].committed_offset, by[2].lag, by[2].last_commit_at) == (None, 7, None)  # from earliest
    assert rep.orphans == 3 and rep.orphans_unplaced == 1 and rep.total_lag == 107
    assert rep.healthy and rep.exit_code == 0


def test_status_thresholds_make_it_unhealthy_and_name_the_partition():
    rep = _report(Thresholds(max_lag=50))
    assert rep.exit_code == 1 and rep.problems == ["t-1: lag 100 > --max-lag 50"]
    # age counts only where records wait: t-0 is caught up although its last commit is an hour old
    rep = _report(Thresholds(max_age_s=120))
    assert rep.problems == ["t-1: last commit 5m ago > --max-age 2m with 100 record(s) waiting",
                            "t-2: 7 record(s) waiting and nothing ever committed"]
    assert _report(Thresholds(max_lag=100)).healthy


def test_a_partition_gone_from_the_broker_is_a_problem():
    rep = build_report("j", "m", {("gone", 0): (5, NOW)}, {}, [], Thresholds(), NOW)
    assert rep.exit_code == 1 and "not found on the broker" in rep.problems[0]


def test_table_rendering_text_json_csv():
    r = TableResult(["topic", "n", "at", "parts"], [("t", 12, NOW, [0, 1]), ("longer", None, None, [])])
    out = io.StringIO()
    TextOutput(out=out).render(r)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["topic", "n", "at", "parts"] and set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].split()[:2] == ["t", "12"] and "2026-11-23 12:00:00" in lines[2] and lines[-1] == "(2 rows)"
    assert lines[3].split()[:2] == ["longer", "NULL"]
    out = io.StringIO()
    JsonOutput(out=out).render(r)
    doc = json.loads(out.getvalue())
    assert doc["columns"] == ["topic", "n", "at", "parts"] and doc["rows"][0]["n"] == 12 and doc["rows"][1]["n"] is None
    out = io.StringIO()
    CsvOutput(out=out).render(r)
    assert out.getvalue().splitlines() == ["topic,n,at,parts", 't,12,2026-11-23 12:00:00,"[0, 1]"', "longer,,,[]"]


def test_status_rendering():
    rep = _report(Thresholds(max_lag=50))
    out = io.StringIO()
    TextOutput(out=out).render(StatusResult(rep))
    text = out.getvalue()
    assert "job 'j': UNHEALTHY (1 problem(s)); 3 partition(s), lag 107 record(s), 0 orphan object(s)" in text
    assert "  t-1: lag 100 > --max-lag 50" in text
    out = io.StringIO()
    CsvOutput(out=out).render(StatusResult(rep))
    assert out.getvalue().splitlines()[0] == ("topic,partition,committed_offset,end_offset,lag,last_commit_at,"
                                              "last_commit_age_s,orphans,problems")
    out = io.StringIO()
    JsonOutput(out=out).render(StatusResult(rep))
    doc = json.loads(out.getvalue())
    assert doc["healthy"] is False and doc["total_lag"] == 107 and len(doc["partitions"]) == 3
    assert doc["partitions"][0]["last_commit_at"] == "2026-11-23T11:00:00Z"
