"""The routed restore's pure parts (issue #29 item 2): names of its progress groups and transactional ids, the
plan without the one-source-per-partition refusal, the routers built from the destination's partition count, and
how the report shows the routing."""
from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from lakesink.driver.restore import PartitionRestore, RestoreReport, build_routers, plan_partitions
from lakesink.errors import InvalidArgumentError, RestoreRefusedError
from lakesink.executor.partitioning import Router
from lakesink.executor.readback import ArchivedObject, Cut
from lakesink.executor.restore import produced_key_bytes, routed_transactional_id, transactional_id
from lakesink.executor.restore_progress import progress_group, routed_group


def obj(partition: int, first: int = 0, last: int = 9) -> ArchivedObject:
    return ArchivedObject.from_row({
        "topic": "orders", "kafka_partition": partition, "object_key": f"k{partition}-{first}", "etag": "e",
        "version_id": None, "first_offset": first, "last_offset": last, "record_count": last - first + 1,
        "size_bytes": 100, "min_timestamp": 0, "max_timestamp": 0, "side_files": []})


class FakeAdmin:
    """list_topics only: the destination cluster's partition counts."""

    def __init__(self, counts: dict[str, int]):
        self.counts = counts

    def list_topics(self, timeout=None):
        return SimpleNamespace(topics={t: SimpleNamespace(error=None, partitions={i: None for i in range(n)})
                                       for t, n in self.counts.items()})


def parts(n_sources: int = 4, topic: str = "dest") -> list[PartitionRestore]:
    return [PartitionRestore("orders", s, topic, -1, 1, 10, 100) for s in range(n_sources)]


def test_routed_names_are_per_source_and_routing():
    g = routed_group(None, "orders", 2, "default/6")
    assert g == "lakesink-restore:orders:2:default/6" and g.startswith(progress_group() + ":")
    assert routed_group("dr", "orders", 2, "default/6") == "lakesink-restore-dr:orders:2:default/6"
    # another routing of the same source is another restore's progress
    assert routed_group(None, "orders", 2, "map:0=1,1=1,2=0/2") != g
    assert routed_group(None, "orders", 2, "default/8") != g
    tid = routed_transactional_id(None, "dest", "orders", 2)
    assert tid == "lakesink-restore:dest:from:orders:2"
    assert routed_transactional_id("dr", "dest", "orders", 2) == "lakesink-restore-dr-dest-from-orders-2"
    # never a plain restore's id (which is keyed by the destination partition)
    assert tid not in {transactional_id(None, "dest", p) for p in range(8)}


def test_plan_lets_sources_meet_only_when_routed():
    other = ArchivedObject.from_row({**_row(obj(0)), "topic": "other", "object_key": "o0"})
    with pytest.raises(RestoreRefusedError, match="orders-0 and other-0 would both be restored to dest-0"):
        plan_partitions([obj(0), other], "dest", None, Cut())
    planned = plan_partitions([obj(0), other, obj(1), obj(2, 5, 9)], "dest", None, Cut(), routed=True)
    assert [(p.source_topic, p.source_partition, p.topic, p.partition, p.records) for p, _o in planned] == [
        ("orders", 0, "dest", -1, 10), ("orders", 1, "dest", -1, 10), ("orders", 2, "dest", -1, 5),
        ("other", 0, "dest", -1, 10)]


def _row(o: ArchivedObject) -> dict:
    return {"topic": o.topic, "kafka_partition": o.kafka_partition, "object_key": o.object_key, "etag": o.etag,
            "version_id": None, "first_offset": o.first_offset, "last_offset": o.last_offset,
            "record_count": o.record_count, "size_bytes": o.size_bytes, "min_timestamp": 0, "max_timestamp": 0,
            "side_files": []}


def test_build_routers_by_key_and_by_map():
    ps = parts()
    routers = build_routers(FakeAdmin({"dest": 6}), ps, "default", None, 1.0)
    assert routers == {"dest": Router.default(6)}
    assert [p.destination for p in ps] == [f"dest-0..5 by key (keyless: dest-{s})" for s in range(4)]
    ps = parts()
    routers = build_routers(FakeAdmin({"dest": 2}), ps, None, Router.mapped("0=1,1=1,2=0,3=0", 2).partition_map, 1.0)
    assert routers["dest"].spec == "map:0=1,1=1,2=0,3=0/2"
    assert [p.destination for p in ps] == ["dest-1", "dest-1", "dest-0", "dest-0"]
    ps = parts(6)  # keyless records of source 5 into 4 partitions: 5 % 4
    build_routers(FakeAdmin({"dest": 4}), ps, "default", None, 1.0)
    assert ps[5].destination == "dest-0..3 by key (keyless: dest-1)"


def test_build_routers_bad_flags_are_usage_errors():
    from lakesink.executor.partitioning import PartitionMap

    with pytest.raises(InvalidArgumentError, match=r"does not map source partition\(s\) 3, which the restore "
                                                   r"reads.*\(destination topic 'dest'\)"):
        build_routers(FakeAdmin({"dest": 2}), parts(), None, PartitionMap.parse("0=0,1=0,2=1"), 1.0)
    with pytest.raises(InvalidArgumentError, match=r"--partition-map 3=2: the destination has 2 partition\(s\) "
                                                   r"\(0-1\), so partition 2 does not exist"):
        build_routers(FakeAdmin({"dest": 2}), parts(), None, PartitionMap.parse("0=0,1=0,2=1,3=2"), 1.0)
    with pytest.raises(RestoreRefusedError, match="destination topic 'dest' does not exist: create it first"):
        build_routers(FakeAdmin({}), parts(), "default", None, 1.0)


def test_restore_api_refuses_bad_flags_before_reading_anything():
    from lakesink.driver.restore import restore

    for kwargs, match in (({"partitioner": "default", "partition_map": "0=1"}, "exclude each other"),
                          ({"partitioner": "sticky"}, "--partitioner 'sticky' is not known"),
                          ({"partition_map": "0=1,,2=0"}, "item 2 is empty")):
        with pytest.raises(InvalidArgumentError, match=match):
            restore(None, {"name": "x"}, to_topic="dest", **kwargs)


def test_keys_are_routed_as_the_bytes_produced():
    assert produced_key_bytes("é") == "é".encode() and produced_key_bytes(b"\x00") == b"\x00"
    assert produced_key_bytes(None) is None


def test_text_report_shows_each_sources_destinations_and_the_routing():
    from lakesink.cli.output import TextOutput, restore_dict
    from lakesink.cli.results import RestoreResult

    ps = parts(2)
    build_routers(FakeAdmin({"dest": 6}), ps, "default", None, 1.0)
    rep = RestoreReport(name=None, group="g", dry_run=True, partitions=ps, routing=["dest (6 partitions): x"])
    buf = io.StringIO()
    TextOutput(out=buf).restore(RestoreResult(report=rep))
    text = buf.getvalue()
    assert "orders-1  dest-0..5 by key (keyless: dest-1)" in text
    assert "  routing: dest (6 partitions): x" in text and "from 2 source partition(s)" in text
    doc = restore_dict(RestoreResult(report=rep))
    assert doc["routing"] == ["dest (6 partitions): x"] and doc["partitions"][1]["route"].startswith("dest-0..5")
