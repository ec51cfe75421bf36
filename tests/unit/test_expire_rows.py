"""Pure parts of retention (``lakesink expire``): tombstone rows, the live-object rule in Python and SQL, the
``gaps`` and ``erasures`` views on DuckDB over a real (local) delta-rs manifest, the age parser."""
from __future__ import annotations

import datetime as dt

import pytest

from lakesink.driver.expire import due_objects, note_for, parse_age
from lakesink.errors import InvalidArgumentError
from lakesink.manifest.deltars import DeltaRsManifest
from lakesink.manifest.duck import DuckViews
from lakesink.manifest.rows import EXPIRED, SideFile, expired_row, live_objects, object_row, to_ms

OLD = dt.datetime(2024, 1, 1)
NEW = dt.datetime(2026, 11, 1)


def obj(part: int, first: int, last: int, newest: dt.datetime):
    key = f"topics/t/partition={part}/t+{part}+{first:010d}.json"
    return object_row("t", part, first, last, first_offset=first, last_offset=last, record_count=last - first + 1,
                      encoded_partition=f"partition={part}", object_key=key, object_uri=f"s3://b/{key}",
                      side_files=(SideFile("keys", key.replace(".json", ".keys.json"), "k", None, 5),),
                      format="json", compression=None, size_bytes=100, etag='"e"', version_id="v1",
                      min_timestamp_ms=to_ms(newest) - 1000, max_timestamp_ms=to_ms(newest))


@pytest.fixture
def manifest(tmp_path):
    m = DeltaRsManifest(str(tmp_path / "manifest"))
    m.ensure()
    m.commit("j", 0, "r1", [obj(0, 0, 9, OLD), obj(0, 10, 19, NEW), obj(1, 0, 9, OLD)])
    m.commit("other", 0, "r2", [obj(0, 0, 9, OLD)])  # another job's object at the same key: never superseded
    return m


def test_due_objects_are_the_live_objects_older_than_the_cutoff(manifest):
    rows = manifest.arrow(job="j").to_pylist()
    due, untimed = due_objects(rows, dt.datetime(2025, 1, 1))
    assert [(r["kafka_partition"], r["first_offset"]) for r in due] == [(0, 0), (1, 0)] and untimed == 0
    tomb = expired_row(due[0], note_for("400d", dt.datetime(2025, 1, 1)))
    assert (tomb.kind, tomb.range_start, tomb.range_end, tomb.record_count, tomb.etag) == (EXPIRED, 0, 9, 10, '"e"')
    assert tomb.side_files[0].key.endswith(".keys.json") and tomb.max_timestamp.tzinfo is None
    after = rows + [dict(tomb.stamped("j", 0, "x", NEW).to_json(), kind=EXPIRED)]
    assert [r["first_offset"] for r in live_objects(after) if r["kafka_partition"] == 0] == [10]
    assert due_objects(after, dt.datetime(2025, 1, 1))[0][0]["kafka_partition"] == 1  # the expired one is not due


def test_an_expire_commit_leaves_the_sinks_offsets_and_batch_ids_alone_and_the_views_show_it(manifest):
    before = manifest.snapshot("j")
    rows = manifest.arrow(job="j").to_pylist()
    note = note_for("400d", dt.datetime(2025, 1, 1))
    due, _ = due_objects(rows, dt.datetime(2025, 1, 1))
    committed = manifest.commit_notes("j", "run-x", "expire", lambda: [expired_row(r, note) for r in due])
    assert len(committed) == 2 and {r.batch_id for r in committed} == {0}
    fresh = DeltaRsManifest(manifest.location)  # a new reader: the sink's next run
    after = fresh.snapshot("j")
    assert after.partitions == before.partitions and after.next_batch_id == before.next_batch_id == 1
    assert fresh._table().transaction_version("j") == 0  # the sink's own counter: untouched
    with DuckViews({"manifest": fresh.arrow()}) as db:
        cols, objs, _ = db.query("SELECT job, kafka_partition, first_offset FROM objects ORDER BY ALL")
        assert objs == [("j", 0, 10), ("other", 0, 0)]
        cols, gaps, _ = db.query("SELECT kafka_partition, start_offset, end_offset, offsets, kind, reason FROM gaps "
                                 "WHERE job = 'j' ORDER BY ALL")
        assert [g[:5] for g in gaps] == [(0, 0, 9, 10, "expired"), (1, 0, 9, 10, "expired")]
        assert all(g[5] == note and g[5].startswith("expired: newest record older than 400d") for g in gaps)
        cols, er, _ = db.query("SELECT * FROM erasures")
        (e,) = [dict(zip(cols, r)) for r in er]
        assert (e["job"], e["action"], e["run_id"], e["objects"], e["records"], e["topics"]) == (
            "j", "expired", "run-x", 2, 20, ["t"])
        assert e["predicate"] == "newest record older than 400d (before 2025-01-01T00:00:00Z)"
    # a second expire finds nothing due and commits nothing
    assert manifest.commit_notes("j", "run-y", "expire", lambda: []) == []


@pytest.mark.parametrize("text,seconds", [("400d", 400 * 86400), ("2w", 14 * 86400), ("12h", 43200), ("90m", 5400)])
def test_ages(text, seconds):
    assert parse_age(text) == seconds


@pytest.mark.parametrize("text", ["400 days", "-1d", "0d", "soon"])
def test_a_bad_age_is_one_line(text):
    with pytest.raises(InvalidArgumentError, match="--older-than"):
        parse_age(text)


BASE = {"name": "job", "topics": "a", "flush.size": "3", "s3.bucket.name": "bkt",
        "manifest.location": "s3a://bkt/manifest", "kafka.bootstrap.servers": "localhost:9092"}


def test_the_config_key_archive_retention_ms_is_the_default_limit():
    from lakesink.cli.expire import retention_of
    from lakesink.config import SinkConfig
    from lakesink.errors import ConfigError

    cfg = SinkConfig.from_dict({**BASE, "archive.retention.ms": str(400 * 86400 * 1000)})
    assert retention_of(cfg) == (400 * 86400, f"archive.retention.ms={400 * 86400 * 1000}")
    with pytest.raises(InvalidArgumentError, match="pass --older-than AGE or set archive.retention.ms"):
        retention_of(SinkConfig.from_dict(BASE))
    with pytest.raises(ConfigError, match="archive.retention.ms"):
        SinkConfig.from_dict({**BASE, "archive.retention.ms": "-5"})
