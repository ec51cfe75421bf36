"""The live-object rule (an object row no ``expired``/``erased`` tombstone of the same job, topic, partition, key and
ETag supersedes) is one anti join in SQL (:data:`lakesink.manifest.views.LIVE_OBJECTS`); the ``objects`` view and
read_archive's object query use it. Spark and DuckDB must both read it as :func:`lakesink.manifest.rows.live_objects`
does: the same rows on both engines, over one small delta-rs manifest (no sink run, no broker: one cheap Spark job).
"""
from __future__ import annotations

import pytest

from lakesink.manifest.deltars import DeltaRsManifest
from lakesink.manifest.duck import DuckViews
from lakesink.manifest.rows import SideFile, erased_row, expired_row, live_objects, object_row, rewritten_row
from lakesink.manifest.views import VIEWS


def obj(job_part: int, first: int, last: int, etag: str = "e"):
    key = f"topics/t/partition={job_part}/t+{job_part}+{first:010d}.json"
    return object_row("t", job_part, first, last, first_offset=first, last_offset=last, record_count=last - first + 1,
                      encoded_partition=f"partition={job_part}", object_key=key, object_uri=f"s3://b/{key}",
                      side_files=(SideFile("keys", key.replace(".json", ".keys.json"), "k", None, 5),),
                      format="json", compression=None, size_bytes=100, etag=etag, version_id="v1",
                      min_timestamp_ms=1_700_000_000_000, max_timestamp_ms=1_700_000_001_000)


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    m = DeltaRsManifest(str(tmp_path_factory.mktemp("live") / "manifest"))
    m.ensure()
    m.commit("j", 0, "r1", [obj(0, 0, 9), obj(0, 10, 19), obj(1, 0, 9), obj(2, 0, 9, etag=None)])
    m.commit("other", 0, "r2", [obj(0, 0, 9)])  # another job's object at the same key: never superseded
    rows = {(r["kafka_partition"], r["first_offset"]): r for r in m.arrow(job="j").to_pylist()}
    # partition 0's first object expired; partition 1's rewritten by an erase (its old ETag's row superseded, the
    # new one live); partition 2's object has no ETag and its tombstone none either (coalesce: superseded)
    m.commit_notes("j", "x", "expire", lambda: [expired_row(rows[(0, 0)], "expired: test"),
                                                expired_row(rows[(2, 0)], "expired: test")])
    m.commit_notes("j", "e", "erase", lambda: [
        erased_row(rows[(1, 0)], [3], "x = 1"),
        rewritten_row(rows[(1, 0)], etag="e2", version_id="v2", size_bytes=90, record_count=9, side_files=(),
                      min_timestamp_ms=None, max_timestamp_ms=None, note="rewritten (run e)")])
    return m


def test_the_objects_view_keeps_the_live_objects_on_spark_and_duckdb(spark, manifest):
    table = manifest.arrow()
    expected = sorted((r["job"], r["kafka_partition"], r["first_offset"], r["etag"]) for r in live_objects(
        table.to_pylist()))
    assert expected == [("j", 0, 10, "e"), ("j", 1, 0, "e2"), ("other", 0, 0, "e")]
    query = "SELECT job, kafka_partition, first_offset, etag FROM objects"  # unqualified: the manifest row's columns
    spark.createDataFrame(table).createOrReplaceTempView("manifest")
    spark.sql(VIEWS["objects"]).createOrReplaceTempView("objects")
    on_spark = sorted(tuple(r) for r in spark.sql(query).collect())
    with DuckViews({"manifest": table}, views=["objects"]) as db:
        on_duckdb = sorted(db.query(query)[1])
    assert on_spark == on_duckdb == expected
