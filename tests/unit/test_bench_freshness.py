"""The maths of ``bench/freshness.py`` (percentiles, per-minute rows, the per-record breakdown, the target line,
the exactly-once check, commit times from a Delta history): pure functions, no broker, no timing."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "freshness.py"


@pytest.fixture(scope="module")
def fr():
    spec = importlib.util.spec_from_file_location("bench_freshness", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


def test_percentile_is_nearest_rank_a_value_that_occurred(fr):
    values = list(range(1, 101))  # 1..100
    assert fr.percentile(values, 50) == 50
    assert fr.percentile(values, 99) == 99
    assert fr.percentile(values, 100) == 100
    assert fr.percentile([10, 20], 50) == 10  # not interpolated to 15
    assert fr.percentile([10, 20], 51) == 20
    assert math.isnan(fr.percentile([], 99))


def test_summary_of_values(fr):
    s = fr.summary([3.0, 1.0, 2.0, 100.0])
    assert s == {"n": 4, "p50": 2.0, "p99": 100.0, "max": 100.0, "mean": 26.5}
    assert fr.summary([])["n"] == 0


def test_per_minute_buckets_by_record_time_from_the_window_start(fr):
    t0 = 1_000_000
    ts = [t0, t0 + 59_999, t0 + 60_000, t0 + 130_000]
    fresh = [1000, 3000, 5000, 7000]
    rows = fr.per_minute(ts, fresh, t0)
    assert [r["minute"] for r in rows] == [0, 1, 2]
    assert [r["n"] for r in rows] == [2, 1, 1]
    assert rows[0]["max"] == 3000 and rows[0]["p50"] == 1000
    assert rows[2]["p99"] == 7000


def test_batch_times_start_is_the_metrics_row_minus_the_batch_seconds(fr):
    b = fr.batch_times(10_500.0, 10_600.0, {"plan": 0.1, "session": 0.2, "archive": 2.0, "commit": 0.4,
                                            "total": 2.7})
    assert b.commit_ms == 10_500.0
    assert b.start_ms == pytest.approx(7_900.0)
    assert b.plan_ms == pytest.approx(300.0)  # session counts with the plan
    assert b.archive_ms == pytest.approx(2000.0)
    none = fr.batch_times(5.0, 5.0, {"plan": None, "session": None, "archive": None, "total": 0.0})
    assert (none.plan_ms, none.archive_ms, none.start_ms) == (0.0, 0.0, 5.0)


def test_components_add_up_to_each_records_freshness(fr):
    b = fr.BatchTimes(commit_ms=20_000.0, start_ms=16_000.0, plan_ms=100.0, archive_ms=3_000.0)
    ts = np.array([1_000, 5_000, 11_000])
    parts = fr.components(ts, 11_000, b)
    assert list(parts) == list(fr.PARTS)
    assert parts["rotation"].tolist() == [10_000, 6_000, 0]
    assert parts["poll_wait"].tolist() == [5_000] * 3  # the object's last record to the batch's start
    assert parts["plan"].tolist() == [100] * 3 and parts["archive"].tolist() == [3_000] * 3
    assert parts["commit"].tolist() == [900] * 3  # the rest of the batch, to the Delta commit
    total = sum(parts.values())
    assert total.tolist() == (b.commit_ms - ts).tolist()


def test_breakdown_means_over_all_and_over_the_p99_tail(fr):
    fresh = np.arange(1, 201, dtype=float)  # p99 = 198: the tail is 198, 199, 200
    parts = {"rotation": fresh - 1, "poll_wait": np.ones(200), "plan": np.zeros(200), "archive": np.zeros(200),
             "commit": np.zeros(200)}
    out = fr.breakdown(parts, fresh)
    assert out["all"]["freshness"] == pytest.approx(100.5)
    assert out["all"]["rotation"] == pytest.approx(99.5)
    assert out["p99 tail"]["freshness"] == pytest.approx(199.0)
    assert out["p99 tail"]["rotation"] == pytest.approx(198.0)
    for row in out.values():  # the parts add up to the row's freshness
        assert sum(row[k] for k in fr.PARTS) == pytest.approx(row["freshness"])
    assert fr.breakdown(parts, []) == {}


def test_target_line_says_met_or_missed_with_the_figures(fr):
    assert fr.target_line(17_400, 5, 10_000).endswith("p99 17.40 s, met (-0.60 s)")
    assert "target p99 <= 18 s (interval 5 + rotation 10 + 3)" in fr.target_line(17_400, 5, 10_000)
    assert fr.target_line(18_000, 5, 10_000).endswith("met (+0.00 s)")  # at the target: met
    assert fr.target_line(18_010, 5, 10_000).endswith("MISSED (+0.01 s)")
    assert fr.target_line(float("nan"), 5, 10_000).endswith("no records measured")


def test_exactly_once_names_duplicates_gaps_and_strays(fr):
    assert fr.exactly_once({0: [[2, 3], [0, 1]], 1: [[0]]}, {0: 4, 1: 1}) == []
    problems = fr.exactly_once({0: [[0, 1], [1, 2]], 1: [[0, 2]], 2: [[0, 5]]}, {0: 3, 1: 3, 2: 1})
    assert problems == ["partition 0: 1 duplicated, 0 missing, 0 outside [0, 3)",
                        "partition 1: 0 duplicated, 1 missing, 0 outside [0, 3)",
                        "partition 2: 0 duplicated, 0 missing, 1 outside [0, 1)"]
    assert fr.exactly_once({}, {0: 2}) == ["partition 0: 0 duplicated, 2 missing, 0 outside [0, 2)"]


def test_commit_times_match_the_jobs_batches_by_their_commit_tag(fr):
    from lakesink.manifest.table import commit_tag

    history = [
        {"version": 3, "timestamp": 3000, "userMetadata": commit_tag("job", 2, "run")},
        {"version": 2, "timestamp": 2000, "userMetadata": commit_tag("other", 1, "run")},
        {"version": 1, "timestamp": 1000, "userMetadata": commit_tag("job", 0, "run")},
        {"version": 0, "timestamp": 500},  # the table's creation: no tag
        {"version": 4, "timestamp": 4000, "userMetadata": json.dumps({"erase": 1})},
        {"version": 5, "timestamp": 5000, "userMetadata": "not json"},
    ]
    assert fr.commit_times(history, "job") == {2: 3000, 0: 1000}


def test_cpu_per_minute_splits_the_machine_into_ours_other_and_steal(fr):
    t0 = 1000.0
    samples = [
        {"t": t0, "busy": 0.0, "steal": 0.0, "ours": {"sink": 0.0, "producer": 0.0}},
        {"t": t0 + 30, "busy": 30.0, "steal": 3.0, "ours": {"sink": 15.0, "producer": 6.0}},
        {"t": t0 + 60, "busy": 60.0, "steal": 3.0, "ours": {"sink": 30.0, "producer": 12.0}},
        {"t": t0 + 90, "busy": 75.0, "steal": 3.0, "ours": {"sink": 33.0}},  # the producer ended: not counted
    ]
    out = fr.cpu_per_minute(samples, t0)
    assert list(out) == [0, 1]  # the sample at +60 s closes a span of minute 1 (by the span's end)
    assert out[0] == pytest.approx({"sink": 50.0, "producer": 20.0, "other": 30.0, "steal": 10.0})
    # minute 1: +30..+60 (sink 15, producer 6, busy 30) and +60..+90 (sink 3, busy 15) over 60 s
    assert out[1] == pytest.approx({"sink": 30.0, "producer": 10.0, "other": 35.0, "steal": 0.0})
