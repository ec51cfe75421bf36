"""Pure parts of erasure (``lakesink erase``): the erased / rewritten / intent rows, the live-object rule, and the
``objects``, ``gaps``, ``erasures`` views and the offset proof on DuckDB over a real (local) delta-rs manifest."""
from __future__ import annotations

import dataclasses
import datetime as dt

from lakesink.driver.erase import unfinished_intents
from lakesink.driver.validate import object_frame
from lakesink.driver.verify import chain_faults, erased_runs
from lakesink.executor.readback import ArchivedObject
from lakesink.manifest.deltars import DeltaRsManifest
from lakesink.manifest.duck import DuckViews
from lakesink.manifest.rows import (ERASED, ERASING, REWRITTEN_NOTE, SideFile, erase_note, erased_offsets, erased_row,
                                    erasing_row, live_objects, object_row, rewritten_row, to_ms)

NEW = dt.datetime(2026, 11, 1)
WHERE = "key = 'c-42' OR value.customer = 'c-42'"
PROOF = """WITH spans AS (
    SELECT job, topic, kafka_partition, first_offset AS s, last_offset AS e FROM objects
    UNION ALL SELECT job, topic, kafka_partition, start_offset, end_offset FROM gaps
    WHERE kind NOT IN ('filtered', 'erased'))
  SELECT c.kafka_partition, c.next_offset - min(spans.s), sum(spans.e - spans.s + 1)
  FROM committed_offsets c JOIN spans ON spans.job = c.job AND spans.topic = c.topic
    AND spans.kafka_partition = c.kafka_partition
  GROUP BY c.kafka_partition, c.next_offset ORDER BY 1"""


def obj(part: int, first: int, last: int):
    key = f"topics/t/partition={part}/t+{part}+{first:010d}.json"
    return object_row("t", part, first, last, first_offset=first, last_offset=last, record_count=last - first + 1,
                      encoded_partition=f"partition={part}", object_key=key, object_uri=f"s3://b/{key}",
                      side_files=(SideFile("keys", key.replace(".json", ".keys.json"), "k", "kv1", 5),),
                      format="json", compression=None, size_bytes=100, etag="e", version_id="v1",
                      min_timestamp_ms=to_ms(NEW) - 1000, max_timestamp_ms=to_ms(NEW))


def test_the_note_names_offsets_and_predicate_and_reads_back():
    note = erase_note([5, 3, 4, 9, 4], WHERE)
    assert note == f"erased 4 records at offsets 3-5, 9 where {WHERE}"
    assert erased_offsets(note) == [(3, 5), (9, 9)]
    assert erased_offsets("erased 1 record at offsets 7 where x where y") == [(7, 7)]


def test_an_erase_commit_supersedes_the_old_row_and_the_views_show_it(tmp_path):
    m = DeltaRsManifest(str(tmp_path / "manifest"))
    m.ensure()
    m.commit("j", 0, "r1", [obj(0, 0, 9), obj(0, 10, 19), obj(1, 0, 9)])
    before = m.snapshot("j")
    rows = m.arrow(job="j").to_pylist()
    first = next(r for r in rows if r["kafka_partition"] == 0 and r["first_offset"] == 0)
    other = next(r for r in rows if r["kafka_partition"] == 1)
    intent = erasing_row(first, '{"files": []}')
    assert (intent.kind, intent.object_key, intent.etag) == (ERASING, first["object_key"], "e")
    m.commit_notes("j", "run-e", "erase", lambda: [intent])
    assert [r["object_key"] for r in unfinished_intents(m.arrow(job="j").to_pylist())] == [first["object_key"]]

    def rows_for(old, offsets, count):
        new_sides = (SideFile("keys", old["side_files"][0]["key"], "k2", "kv2", 4),)
        return [erased_row(old, offsets, WHERE),
                rewritten_row(old, etag="e2", version_id="v2", size_bytes=90, record_count=count,
                              side_files=new_sides, min_timestamp_ms=None, max_timestamp_ms=None,
                              note=f"{REWRITTEN_NOTE} (run run-e)")]

    # partition 0's first object loses offsets 0 (its first record), 4 and 5; partition 1's loses every record
    m.commit_notes("j", "run-e", "erase", lambda: rows_for(first, [0, 4, 5], 7) + rows_for(
        other, list(range(10)), 0))
    after_rows = m.arrow(job="j").to_pylist()
    assert unfinished_intents(after_rows) == []  # the intent is finished
    fresh = DeltaRsManifest(m.location)
    assert fresh.snapshot("j").partitions == before.partitions  # the sink's offsets are untouched
    live = live_objects(after_rows)
    assert sorted((r["kafka_partition"], r["first_offset"], r["etag"], r["record_count"]) for r in live) == [
        (0, 0, "e2", 7), (0, 10, "e", 10), (1, 0, "e2", 0)]
    # the rewritten object keeps its span and commit range: the chain has no fault, an empty object fits
    faults, evidence = chain_faults(after_rows)
    assert faults == [] and [e.records for e in evidence] == [17, 0]
    assert all(o["count_fits"] for o in object_frame(after_rows))
    rewritten = ArchivedObject.from_row(next(r for r in live if r["etag"] == "e2" and r["kafka_partition"] == 0))
    assert rewritten.rewritten and not ArchivedObject.from_row(first).rewritten
    assert erased_runs(after_rows) == {first["object_key"]: [(0, 0), (4, 5)], other["object_key"]: [(0, 9)]}
    with DuckViews({"manifest": fresh.arrow()}) as db:
        _, objs, _ = db.query("SELECT kafka_partition, first_offset, last_offset, record_count, etag FROM objects "
                              "ORDER BY ALL")
        assert objs == [(0, 0, 9, 7, "e2"), (0, 10, 19, 10, "e"), (1, 0, 9, 0, "e2")]
        _, gaps, _ = db.query("SELECT kafka_partition, start_offset, end_offset, offsets, kind FROM gaps ORDER BY ALL")
        assert gaps == [(0, 0, 5, 3, "erased"), (1, 0, 9, 10, "erased")]  # no intent, no unarchived hole
        cols, er, _ = db.query("SELECT * FROM erasures")
        (e,) = [dict(zip(cols, r)) for r in er]
        assert (e["action"], e["predicate"], e["run_id"], e["objects"], e["records"], e["min_offset"],
                e["max_offset"]) == ("erased", WHERE, "run-e", 2, 13, 0, 9)
        _, proof, _ = db.query(PROOF)
        assert proof == [(0, 20, 20), (1, 10, 10)]
        _, committed, _ = db.query("SELECT kafka_partition, next_offset FROM committed_offsets ORDER BY 1")
        assert committed == [(0, 20), (1, 10)]


def test_an_erased_row_is_a_tombstone_of_its_object_only():
    a, b = (dataclasses.asdict(dataclasses.replace(obj(0, f, f + 9), job="j")) for f in (0, 10))
    tomb = dataclasses.replace(erased_row(a, [3], WHERE), job="j")
    assert (tomb.kind, tomb.range_start, tomb.range_end, tomb.record_count) == (ERASED, 3, 3, 1)
    assert [r["first_offset"] for r in live_objects([a, b, tomb.to_json()])] == [10]
    other_etag = dataclasses.replace(tomb, etag="else").to_json()
    assert len(live_objects([a, b, other_etag])) == 2  # another ETag: another object


def test_the_cli_refuses_a_predicate_reaching_past_the_records_before_reading_the_config(tmp_path, capsys):
    from lakesink.cli.main import main

    missing = str(tmp_path / "no-such-config.properties")  # never read: the predicate fails first
    assert main(["erase", "--config", missing, "--where", "key IN (SELECT key FROM manifest)"]) == 2
    err = capsys.readouterr()
    line = (err.err + err.out).strip().splitlines()[-1]
    assert line.startswith("lakesink: error: --where ") and "a subquery is not allowed" in line
    assert "over the records' columns: topic, partition, offset" in line and "Traceback" not in err.err
