"""The pure checks of `lakesink validate` (lakesink.driver.validate) and the built-in suite run by Great
Expectations over given manifest rows (no services: sample=0 reads no object)."""
from __future__ import annotations

import json

import pytest

from lakesink.config import SinkConfig
from lakesink.driver.validate import (load_suite, object_frame, range_frame, sample_objects, schema_frame,
                                      validate)
from lakesink.errors import InvalidArgumentError


def obj(start, end, first=None, last=None, n=None, part=0, version=None, enc="partition=0", topic="t"):
    first = start if first is None else first
    last = end if last is None else last
    return {"topic": topic, "kafka_partition": part, "kind": "object", "range_start": start, "range_end": end,
            "first_offset": first, "last_offset": last, "record_count": last - first + 1 if n is None else n,
            "encoded_partition": enc, "object_key": f"k{part}-{first}", "schema_version": version}


def adv(start, end, part=0, topic="t"):
    return {"topic": topic, "kafka_partition": part, "kind": "advance", "range_start": start, "range_end": end}


def test_ranges_chain_gap_and_overlap():
    rows = [obj(0, 9), obj(0, 9, 5, 9, enc="x"), adv(10, 12), obj(13, 20), obj(25, 30), obj(28, 40),
            obj(0, 4, part=1), obj(5, 9, part=1)]
    frame = range_frame(rows)
    assert [(f["where"], f["chain_gap"]) for f in frame] == [
        ("t-0@0..9", None), ("t-0@10..12", 0), ("t-0@13..20", 0), ("t-0@25..30", 4), ("t-0@28..40", -3),
        ("t-1@0..4", None), ("t-1@5..9", 0)]
    assert all(f["span"] >= 0 for f in frame)
    assert [f["chain_gap"] for f in range_frame([obj(0, 9), obj(0, 19)])] == [None, -10]


def test_objects_within_range_and_counts():
    frame = object_frame([obj(0, 9), obj(10, 19, 10, 25), obj(20, 29, n=11), obj(30, 39, n=3), adv(40, 41)])
    assert [(f["offsets_in_range"], f["count_fits"]) for f in frame] == [
        (True, True), (False, True), (True, False), (True, True)]


def test_schema_versions_per_encoded_partition():
    rows = [obj(0, 9, version=1), obj(10, 19, version=2), obj(20, 29, version=1, enc="other"),
            obj(30, 39, version=1), obj(40, 49, version=None)]
    assert [(f["where"].split()[0], f["version_step"]) for f in schema_frame(rows)] == [
        ("t-0@20..29", None), ("t-0@0..9", None), ("t-0@10..19", 1), ("t-0@30..39", -1)]


def test_sample_is_even_deterministic_and_keeps_the_newest():
    rows = [obj(i * 10, i * 10 + 9) for i in range(10)] + [adv(100, 101)]
    assert sample_objects(rows, 0) == []
    assert [r["range_start"] for r in sample_objects(rows, 3)] == [0, 50, 90]
    assert [r["range_start"] for r in sample_objects(rows, 1)] == [90]
    assert len(sample_objects(rows, 50)) == 10


def test_load_suite_forms_and_errors(tmp_path):
    s = {"name": "mine", "expectations": [{"type": "expect_column_to_exist", "kwargs": {"column": "id"}}]}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(s))
    assert load_suite(str(p)) == s == load_suite(json.dumps(s)) == load_suite(s)
    with pytest.raises(InvalidArgumentError, match="suite file .*nope.json: cannot be read"):
        load_suite(str(tmp_path / "nope.json"))
    p.write_text("{not json")
    with pytest.raises(InvalidArgumentError, match="not valid JSON"):
        load_suite(str(p))
    with pytest.raises(InvalidArgumentError, match="not an expectation suite"):
        load_suite({"name": "x", "expectations": [{"kwargs": {}}]})


def _cfg(mode="BACKWARD") -> SinkConfig:
    return SinkConfig.from_dict({"name": "j", "topics": "t", "flush.size": "10", "format.class": "avro",
                                 "s3.bucket.name": "bucket-j", "s3.region": "us-east-1",
                                 "manifest.location": "s3a://bucket-j/_lakesink/manifest",
                                 "kafka.bootstrap.servers": "127.0.0.1:9", "schema.compatibility": mode})


def test_validate_passes_a_chained_manifest_and_fails_an_overlap():
    good = [obj(0, 9, version=1), adv(10, 11), obj(12, 20, version=2)]
    rep = validate(_cfg(), rows=good, sample=0)
    assert rep.success and rep.exit_code == 0
    assert {(o.check, o.column) for o in rep.outcomes} == {
        ("ranges chain per partition", "chain_gap"), ("ranges chain per partition", "span"),
        ("objects within their range", "offsets_in_range"), ("objects within their range", "count_fits"),
        ("schema versions non-decreasing (BACKWARD)", "version_step")}
    bad = good + [obj(15, 30, version=1)]
    rep = validate(_cfg(), rows=bad, sample=0)
    assert not rep.success and rep.exit_code == 1
    failed = {(o.check, o.column): o for o in rep.outcomes if not o.success}
    assert set(failed) == {("ranges chain per partition", "chain_gap"),
                           ("schema versions non-decreasing (BACKWARD)", "version_step")}
    assert failed[("ranges chain per partition", "chain_gap")].examples == ["t-0@15..30"]
    assert failed[("ranges chain per partition", "chain_gap")].unexpected == 1


def test_validate_skips_versions_outside_projecting_modes():
    rep = validate(_cfg("NONE"), rows=[obj(0, 9, version=2), obj(10, 19, version=1)], sample=0)
    assert rep.success and not any("schema" in o.check for o in rep.outcomes)
    assert any("schema.compatibility is NONE" in n for n in rep.notes)
