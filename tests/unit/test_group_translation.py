"""Consumer-group offset translation across a restore (lakesink.executor.groups): the pure parts."""
from __future__ import annotations

import pytest

from lakesink.executor.groups import GroupCommitter, GroupOffset, GroupTargets, Pending, translate


def pairs(src_from: int, n: int, dest_from: int = 0, step: int = 1):
    return [(src_from + i * step, dest_from + i) for i in range(n)]


def test_group_resumes_at_the_first_restored_record_at_or_after_its_offset():
    # the case: a group at 125,000, restored from 50,000: the record 125,000 lands at 75,000
    assert translate(125_000, pairs(50_000, 100_000), None) == 75_000


def test_group_below_the_selection_resumes_at_the_first_restored_record():
    # records before --from-time were not selected: not in the destination, nothing to consume there
    assert translate(10, pairs(50_000, 5, dest_from=7), None) == 7


def test_group_offset_inside_a_gap_resumes_at_the_next_restored_record():
    # compaction / transaction markers / aborted records leave source gaps: 103 is missing, 104 comes next
    ps = [(100, 0), (101, 1), (102, 2), (104, 3), (108, 4)]
    assert translate(103, ps, None) == 3
    assert translate(105, ps, None) == 4
    assert translate(104, ps, None) == 3


def test_destination_offsets_are_taken_not_counted():
    # destination offsets with holes (transaction markers between the restore's transactions)
    ps = [(0, 0), (1, 1), (2, 3), (3, 4), (4, 6)]
    assert translate(2, ps, 8) == 3
    assert translate(4, ps, 8) == 6


def test_group_past_every_restored_record_resumes_after_the_last_one():
    ps = pairs(0, 10, dest_from=0)
    assert translate(10, ps, 11) == 11  # the next offset the broker reported (a commit marker at 10)
    assert translate(1_000_000, ps, 11) == 11
    assert translate(5, [], 42) == 42   # nothing restored: the partition's end
    assert translate(5, [], None) is None


def test_group_at_zero_consumed_nothing():
    assert translate(0, pairs(0, 3, dest_from=5), 8) == 5


def test_translate_refuses_nonsense():
    with pytest.raises(ValueError):
        translate(-1, pairs(0, 3), None)
    with pytest.raises(ValueError):
        translate(1, [(5, 0), (3, 1)], None)


def test_pending_claims_each_group_once_with_the_first_record_at_or_after_it():
    p = Pending({"a": 5, "b": 5, "c": 9, "d": 0})
    assert p.claim(0) == ("d",)
    assert p.claim(3) == ()
    assert sorted(p.claim(7)) == ["a", "b"]  # 5 and 6 were not restored: 7 is the first at or after 5
    assert p.claim(8) == ()
    assert p.claim(20) == ("c",)
    assert p.claim(21) == () and p.low is None


class _Msg:
    def __init__(self, offset):
        self._o = offset

    def offset(self):
        return self._o


class _Consumer:
    def __init__(self, group):
        self.group, self.closed = group, False

    def consumer_group_metadata(self):
        return f"md:{self.group}"

    def close(self):
        self.closed = True


def committer(wanted, placed=None):
    placed = placed or {}
    return GroupCommitter(wanted, "dst", 0, {w.group: _Consumer(w.group) for w in wanted if w.group not in placed},
                          placed)


def produce(c, src, dest, seen):
    cb = c.callback(src, lambda err, msg: seen.append(msg.offset()))
    return lambda: cb(None, _Msg(dest))


def test_committer_places_a_group_in_the_transaction_of_its_record_only():
    c = committer([GroupOffset("g", "src", 0, 3, "meta")])
    seen: list[int] = []
    # transaction 1: source 0..1 -> destination 0..1: the group is not due yet
    for s, d in ((0, 0), (1, 1)):
        produce(c, s, d, seen)()
    assert not c.due(False)
    assert c.offsets(False, lambda: 99) == []
    c.committed()
    # transaction 2: source 3 (the group's record) -> destination 3 (a marker at 2)
    deliver = produce(c, 3, 3, seen)
    assert not c.due(False)  # not delivered yet
    deliver()
    assert c.due(False)
    [(md, tps)] = c.offsets(False, lambda: 99)
    assert md == "md:g" and [(t.topic, t.partition, t.offset, t.metadata) for t in tps] == [("dst", 0, 3, "meta")]
    c.committed()
    assert not c.active and not c.due(True)
    assert c.report() == [{"group": "g", "source_offset": 3, "offset": 3, "state": "committed"}]
    assert seen == [0, 1, 3]  # the worker's own callback still sees every delivery


def test_committer_places_a_group_past_everything_after_the_last_delivered_record():
    c = committer([GroupOffset("g", "src", 0, 50)])
    seen: list[int] = []
    for s, d in ((10, 0), (11, 1), (12, 2)):
        produce(c, s, d, seen)()
    assert not c.due(False) and c.due(True)
    [(_md, tps)] = c.offsets(True, lambda: pytest.fail("the delivery reports give the offset"))
    assert tps[0].offset == 3
    c.committed()
    assert c.report()[0]["state"] == "committed"


def test_committer_with_nothing_produced_takes_the_partitions_end():
    c = committer([GroupOffset("g", "src", 0, 50)])
    [(_md, tps)] = c.offsets(True, lambda: 17)
    assert tps[0].offset == 17


def test_committer_leaves_a_placed_group_alone():
    c = committer([GroupOffset("g", "src", 0, 1), GroupOffset("h", "src", 0, 1)], placed={"g": 40})
    seen: list[int] = []
    produce(c, 1, 7, seen)()
    [(md, tps)] = c.offsets(False, lambda: 0)
    assert md == "md:h" and tps[0].offset == 7
    c.committed()
    states = {r["group"]: (r["state"], r["offset"]) for r in c.report()}
    assert states == {"g": ("already", 40), "h": ("committed", 7)}


def test_committer_refuses_to_guess_without_a_delivery_report():
    from lakesink.errors import RestoreProduceError

    c = committer([GroupOffset("g", "src", 0, 1)])
    produce(c, 1, 7, [])  # produced, never delivered
    with pytest.raises(RestoreProduceError, match="no delivery report"):
        c.offsets(True, lambda: 0)


def test_an_aborted_transaction_places_nothing():
    c = committer([GroupOffset("g", "src", 0, 1)])
    produce(c, 1, 7, [])()
    c.offsets(False, lambda: 0)
    c.aborted()
    assert c.report()[0]["state"] == "not placed"


def test_targets_pick_the_source_partition():
    t = GroupTargets({("src", 0): (GroupOffset("g", "src", 0, 5),), ("src", 1): (GroupOffset("g", "src", 1, 9),)})
    assert [w.offset for w in t.for_source("src", 1)] == [9]
    assert t.for_source("src", 2) == ()
    assert t.committers("src", 2, "dst", [2], {}, None, 1.0) is None
