"""A restore's progress as coverage: which source offsets are already in a destination partition (pure)."""
from __future__ import annotations

import pytest

from lakesink.executor.coverage import MAX_METADATA, PREFIX, Coverage, SourceCoverage, intersect, merge, subtract


def test_interval_algebra():
    assert merge([(5, 9), (0, 3), (4, 4), (20, 30), (25, 26)]) == [(0, 9), (20, 30)]
    assert subtract([(0, 99)], [(10, 19), (50, 200)]) == [(0, 9), (20, 49)]
    assert subtract([(0, 9)], []) == [(0, 9)]
    assert intersect([(0, 9), (20, 29)], [(5, 24)]) == [(5, 9), (20, 24)]


def test_a_whole_run_covers_every_record_of_its_range():
    cov = SourceCoverage().add(0, 99)
    assert cov.exact == [(0, 99, None, None)] and cov.dirty == []
    assert cov.covers(0, None) and cov.covers(99, 5) and not cov.covers(100, None)
    assert cov.touches(90, 120) and not cov.touches(100, 120)


def test_a_time_window_covers_only_records_inside_it():
    cov = SourceCoverage().add(0, 99, (1000, 2000))
    assert cov.covers(10, 1500) and not cov.covers(10, 2500) and not cov.covers(10, None)
    # a later unbounded run over the same offsets says more: the windowed entry folds into it
    wider = cov.add(0, 99)
    assert wider.exact == [(0, 99, None, None)]
    # a time window inside an earlier unbounded run: everything already covered
    assert all(SourceCoverage().add(0, 99).covers(o, 1500) for o in range(100))


def test_objects_a_where_left_out_are_never_claimed():
    # the run selected objects spanning 0-49 and 60-99; the object 50-59 (a hole) was left out
    cov = SourceCoverage().add(0, 99, holes=[(50, 59)], selected=[(0, 49), (60, 99)])
    assert cov.exact == [(0, 49, None, None), (60, 99, None, None)] and cov.dirty == []
    assert not cov.covers(55, None)
    # interleaved objects: the hole 0-99 overlaps the selected span 0-99: some records there were produced
    cov = SourceCoverage().add(0, 99, holes=[(0, 99)], selected=[(0, 99)])
    assert cov.exact == [] and cov.dirty == [(0, 99)]
    assert cov.conflicts([(90, 120)]) == [(90, 99)]
    # a later run that selects every object covers the range: nothing is left dirty
    assert cov.add(0, 99).dirty == []


def test_conflicts_of_another_groups_progress_include_its_exact_entries():
    cov = SourceCoverage().add(10, 19)
    assert cov.conflicts([(0, 99)]) == []
    assert cov.conflicts([(0, 99)], foreign=True) == [(10, 19)]


def test_encode_decode_round_trip_and_several_sources():
    cov = Coverage().with_source("orders", 0, SourceCoverage().add(0, 9).add(20, 29, (5, 6)))
    cov = cov.with_source("eu-orders.v2", 3, SourceCoverage().add(100, 199, holes=[(150, 160)], selected=[(100, 199)]))
    offset, md = cov.encode()
    assert md.startswith(PREFIX) and offset == 200
    back = Coverage.decode(offset, md)
    assert back == cov
    assert back.source("orders", 0).covers(25, 5) and not back.source("orders", 0).covers(25, 7)
    assert back.source("nope", 0) == SourceCoverage()
    assert Coverage.decode(None, None) == Coverage() and Coverage.decode(-1, "") == Coverage()


def test_progress_of_an_earlier_lakesink_reads_as_dirty_up_to_its_offset():
    cov = Coverage.decode(42, "lakesink-restore source=eu-orders-3")
    assert cov.source("eu-orders", 3) == SourceCoverage([], [(0, 41)])
    with pytest.raises(ValueError, match="not written by lakesink"):
        Coverage.decode(5, "a consumer's own note")


def test_encode_squeezes_by_claiming_less_never_more():
    src = SourceCoverage()
    for i in range(400):  # 400 separate windowed and unbounded entries: far more than the metadata holds
        src = src.add(i * 10, i * 10 + 4, (i, i + 1) if i % 2 else (None, None))
    offset, md = Coverage({("orders", 0): src}).encode()
    assert len(md) <= MAX_METADATA and offset == 3995
    squeezed = Coverage.decode(offset, md).source("orders", 0)
    # every record the squeezed coverage still calls done was done before: skipping can never lose one
    for o in range(4000):
        for ts in (None, 3, 200):
            if squeezed.covers(o, ts):
                assert src.covers(o, ts)
    # and every offset the original covered is at least dirty (a later restore refuses rather than duplicates)
    lost = [(a, b) for a, b, _f, _t in src.exact]
    assert subtract(lost, [(a, b) for a, b, _f, _t in squeezed.exact] + squeezed.dirty) == []


def test_an_object_already_there_is_held_whole_and_need_not_be_read():
    cov = SourceCoverage().add(0, 99).add(200, 299, (1000, 2000))
    assert cov.holds(10, 20) and cov.holds(0, 99) and not cov.holds(90, 110)
    # a windowed entry holds an object only when the object's time range lies inside the window
    assert cov.holds(210, 220, 1000, 1500) and not cov.holds(210, 220, 900, 1500)
    assert not cov.holds(210, 220)  # time range unknown: read it


def test_unrestored_leaves_out_objects_held_whole_inside_the_cut():
    from lakesink.driver.restore import unrestored
    from lakesink.executor.readback import ArchivedObject, Cut

    def obj(first, last):
        return ArchivedObject.from_row({"topic": "t", "kafka_partition": 0, "object_key": f"k{first}", "etag": "e",
                                        "version_id": None, "first_offset": first, "last_offset": last,
                                        "record_count": last - first + 1, "size_bytes": 1, "side_files": []})

    objs = [obj(0, 9), obj(10, 19), obj(20, 29)]
    done = SourceCoverage().add(0, 19)
    assert [o.object_key for o in unrestored(objs, Cut(), done)] == ["k20"]
    # a cut inside an object: that object is read (its records inside the cut are checked one by one)
    assert [o.object_key for o in unrestored(objs, Cut(from_offset=5), done)] == ["k0", "k20"]
