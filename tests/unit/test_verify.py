"""``lakesink verify``'s pure parts: the offset-chain faults of a manifest, and one object's checks against a real
file store (lakesink.driver.verify, lakesink.executor.verify)."""
from __future__ import annotations

import json

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.driver.verify import VerifyReport, chain_faults
from lakesink.executor.archive_tasks import ObjectReader
from lakesink.executor.readback import ArchivedObject
from lakesink.executor.verify import check_object


def obj(start: int, end: int, first: int, last: int, count: int, key: str = "k", kind: str = "object",
        part: int = 0) -> dict:
    return {"topic": "t", "kafka_partition": part, "kind": kind, "range_start": start, "range_end": end,
            "first_offset": first, "last_offset": last, "record_count": count, "object_key": key}


def test_a_chained_manifest_has_no_fault_and_gives_each_partitions_evidence():
    rows = [obj(0, 9, 0, 4, 5, "a"), obj(0, 9, 5, 9, 5, "b"), obj(10, 19, 10, 19, 8, "c"),  # 2 offsets: markers
            {"topic": "t", "kafka_partition": 0, "kind": "advance", "range_start": 20, "range_end": 29},
            {"topic": "t", "kafka_partition": 0, "kind": "deadletter", "range_start": 12, "range_end": 12},
            obj(5, 7, 5, 7, 3, "d", part=1)]
    faults, evidence = chain_faults(rows)
    assert faults == []
    assert [(e.kafka_partition, e.first_offset, e.next_offset, e.objects, e.records) for e in evidence] == [
        (0, 0, 30, 3, 18), (1, 5, 8, 1, 3)]


def test_gaps_overlaps_and_objects_outside_their_range_are_named():
    rows = [obj(0, 9, 0, 9, 10, "a"), obj(15, 19, 15, 19, 5, "b"), obj(18, 25, 18, 25, 8, "c"),
            obj(26, 30, 24, 30, 7, "d"), obj(31, 33, 31, 32, 3, "e")]
    faults, _ = chain_faults(rows)
    got = [(f.kind, f.object_key) for f in faults]
    assert ("offset-gap", None) in got and ("offset-overlap", None) in got
    assert ("object-outside-range", "d") in got  # starts before its range
    assert ("object-outside-range", "e") in got  # 3 records in 2 offsets
    gap = next(f for f in faults if f.kind == "offset-gap")
    assert "offsets 10..14 are in no committed range" in gap.detail


def test_an_object_is_checked_for_presence_etag_size_and_its_record_count(tmp_path):
    cfg = SinkConfig.from_dict({"name": "j", "topics": "t", "flush.size": "3", "s3.bucket.name": "bkt",
                                "store.url": f"file://{tmp_path}", "manifest.location": str(tmp_path / "m"),
                                "kafka.bootstrap.servers": "k:9092", "format.class": "json"})
    reader = ObjectReader(wiring.task_parts(cfg))
    written = reader.store.put_bytes("topics/t/partition=0/t+0+0000000000.json", b'{"a":1}\n{"a":2}\n{"a":3}\n')
    base = dict(topic="t", kafka_partition=0, object_key=written.key, etag=written.etag, version_id=None,
                first_offset=0, last_offset=2, record_count=3, format="json", size_bytes=written.size)
    good = check_object(reader, ArchivedObject(**base), deep=True)
    assert (good["faults"], good["records"]) == ([], 3)
    assert check_object(reader, ArchivedObject(**base), deep=False)["records"] is None  # shallow: nothing read
    wrong_count = check_object(reader, ArchivedObject(**{**base, "etag": None, "record_count": 5, "last_offset": 4}),
                               deep=True)
    assert [f[0] for f in wrong_count["faults"]] == ["unreadable"] and "holds 3 records" in wrong_count["faults"][0][1]
    changed = check_object(reader, ArchivedObject(**{**base, "etag": "0123", "size_bytes": 99}), deep=True)
    assert [f[0] for f in changed["faults"]] == ["object-etag-mismatch", "object-size-mismatch"]
    assert changed["records"] is None  # a replaced object is named, not read
    side = {"view": "keys", "key": "topics/t/partition=0/t+0+0000000000.keys.json", "etag": "e", "size_bytes": 4}
    missing = check_object(reader, ArchivedObject(**{**base, "object_key": "gone.json", "side_files": (side,)}),
                           deep=True)
    assert [f[0] for f in missing["faults"]] == ["missing-object", "missing-side-file"]


def test_the_report_is_json_evidence_with_an_exit_code():
    rep = VerifyReport(job="j", manifest="/m", manifest_version=3, started_at="s", finished_at="f", deep=True,
                       runner="local", objects=0, side_files=0, records_counted=0)
    assert rep.exit_code == 0 and json.loads(rep.to_json())["ok"] is True
    faults, _ = chain_faults([obj(0, 9, 0, 9, 10), obj(20, 29, 20, 29, 10)])
    rep.faults = faults
    data = json.loads(rep.to_json())
    assert rep.exit_code == 1 and data["ok"] is False and data["faults"][0]["kind"] == "offset-gap"
    assert data["manifest_version"] == 3
