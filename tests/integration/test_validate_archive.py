"""`lakesink validate` and `lakesink.validate` on a real archive (moto S3, delta-rs manifest, lakesink's own format
writers; no Spark): a consistent archive passes, a user suite runs over sampled records, and a manifest with an
overlapping range, an object whose record count disagrees, or a schema version going back under BACKWARD fails
with exit 1 naming the rows."""
from __future__ import annotations

import dataclasses
import json
import re

import pytest

from lakesink.config import SinkConfig
from lakesink.manifest.deltars import DeltaRsManifest
from test_schema_check import V1, V2, archive, cli, config, write


@pytest.fixture
def archived(s3, bucket, topic_name, tmp_path):
    """v1, v1 (Avro) then v2 (Parquet), 10 records each at offsets 0..29: (config path, config dict)."""
    cfg = config(s3, bucket, topic_name)
    archive(s3, cfg, [("avro", V1, 1, 1), ("avro", V1, 1, 1), ("parquet", V2, 2, 2)])
    return write(tmp_path, "sink.json", cfg), cfg


def _commit(s3, cfg_dict: dict, rows: list) -> None:
    cfg = SinkConfig.from_dict(cfg_dict)
    m = DeltaRsManifest(cfg.manifest_location, s3.s3_settings())
    m.commit(cfg.name, 1, "test-run-2", rows)


def _object_rows(s3, cfg_dict: dict) -> list:
    from lakesink.manifest import ManifestRow
    from lakesink.manifest.queries import row_dicts

    cfg = SinkConfig.from_dict(cfg_dict)
    m = DeltaRsManifest(cfg.manifest_location, s3.s3_settings())
    rows = sorted(row_dicts(m.arrow(None, job=cfg.name)), key=lambda r: r["range_start"])
    fields = {f.name for f in dataclasses.fields(ManifestRow)}
    out = []
    for r in rows:
        r = {k: v for k, v in r.items() if k in fields}
        r["side_files"] = tuple(r.get("side_files") or ())
        out.append(r)
    return out


def test_consistent_archive_passes_text_json_and_a_user_suite(archived, tmp_path):
    path, _ = archived
    r = cli("validate", "--config", path)
    assert r.returncode == 0, r.stderr
    head = r.stdout.splitlines()[0].split()
    assert head == ["check", "expectation", "column", "success", "evaluated", "unexpected", "examples"]
    assert "3 manifest rows, 3 objects and 30 records sampled: all expectations met" in r.stdout
    r = cli("--format", "json", "validate", "--config", path, "--sample", "2")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    checks = {(row["check"], row["column"]): row for row in doc["rows"]}
    assert all(row["success"] for row in doc["rows"])
    assert checks[("ranges chain per partition", "chain_gap")]["evaluated"] == 3
    assert checks[("record counts of sampled objects", "read_count_matches")]["evaluated"] == 2
    assert checks[("schema versions non-decreasing (BACKWARD)", "version_step")]["evaluated"] == 3
    suite = write(tmp_path, "suite.json", {"name": "orders", "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "id", "min_value": 0, "max_value": 29}},
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "id"}}]})
    r = cli("--format", "json", "validate", "--config", path, "--suite", suite)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [row for row in json.loads(r.stdout)["rows"] if row["check"] == "suite orders"]
    assert [(row["expectation"], row["success"], row["evaluated"]) for row in rows] == [
        ("expect_column_values_to_be_between", True, 30), ("expect_column_values_to_be_unique", True, 30)]
    failing = write(tmp_path, "failing.json", {"name": "small", "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "id", "max_value": 4}}]})
    r = cli("validate", "--config", path, "--suite", failing)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 expectation(s) FAILED" in r.stdout
    # what failed: the failing value, the record's topic-partition@offset and its object (issue #31 item 6)
    r = cli("--format", "json", "validate", "--config", path, "--suite", failing)
    (row,) = [row for row in json.loads(r.stdout)["rows"] if row["check"] == "suite small"]
    examples = row["examples"] if isinstance(row["examples"], list) else row["examples"].split("; ")
    found = [re.fullmatch(r"id = (\d+) at (\S+)-(\d+)@(\d+) in (topics/\S+)", e) for e in examples]
    assert len(found) == 5 and all(found), examples
    assert len({m.group(1) for m in found}) == 5 and all(int(m.group(1)) > 4 for m in found), examples
    assert all(f"+{m.group(3)}+" in m.group(5) for m in found), examples  # the record's partition names its object


def test_overlap_count_mismatch_and_version_regression_fail(s3, archived):
    import lakesink
    from lakesink.manifest import ManifestRow

    path, cfg = archived
    rows = _object_rows(s3, cfg)
    # a second commit re-covering offsets 25..29 (an overlap), with the v1 object (a version going back after v2 at
    # offset 20) whose row claims 12 records where it holds 10
    extra = ManifestRow(**{**rows[0], "range_start": 25, "range_end": 39, "first_offset": 28, "last_offset": 39,
                           "record_count": 12, "batch_id": None, "job": None, "run_id": None,
                           "committed_at": None})
    _commit(s3, cfg, [extra])
    r = cli("--format", "json", "validate", "--config", path)
    assert r.returncode == 1, r.stdout + r.stderr
    failed = {(row["check"], row["column"]): row for row in json.loads(r.stdout)["rows"] if not row["success"]}
    assert set(failed) == {("ranges chain per partition", "chain_gap"),
                           ("record counts of sampled objects", "read_count_matches"),
                           ("schema versions non-decreasing (BACKWARD)", "version_step")}
    topic = cfg["topics"]
    assert failed[("ranges chain per partition", "chain_gap")]["examples"] == f"{topic}-0@25..39"
    assert "holds 10 records, the manifest says 12" in failed[("record counts of sampled objects",
                                                               "read_count_matches")]["examples"]
    rep = lakesink.validate(path, sample=0)
    assert isinstance(rep, lakesink.ValidationReport) and not rep.success and rep.exit_code == 1
    assert rep.objects_sampled == 0 and rep.rows == 4


def test_bad_suite_is_one_line_exit_2(archived, tmp_path):
    path, _ = archived
    r = cli("validate", "--config", path, "--suite", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
    assert r.stderr.startswith("lakesink: error: suite file ") and len(r.stderr.splitlines()) == 1, r.stderr
