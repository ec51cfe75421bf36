"""restore --latest-per-key: the pure selection (lakesink.executor.latest) and the side-file pass that feeds it
(lakesink.executor.readback.read_key_positions)."""
from __future__ import annotations

import random

import pytest

from lakesink.errors import RestoreRefusedError
from lakesink.executor.latest import KEEP, SUPERSEDED, TOMBSTONE, LatestPerKey, latest_per_key


def reference(records, drop_tombstones=False):
    """The obvious definition: for each key the record with the highest position, in offset order."""
    last = {}
    for i, (_off, key, _val) in enumerate(records):
        last[key] = i
    keep = sorted(last.values())
    out = [records[i] for i in keep]
    return [r for r in out if not (drop_tombstones and r[2] is None)]


def test_last_value_per_key_in_offset_order():
    recs = [(0, b"a", b"a0"), (1, b"b", b"b0"), (2, b"a", b"a1"), (5, b"c", b"c0"), (7, b"b", b"b1"),
            (9, b"a", b"a2")]
    assert latest_per_key(recs) == [(5, b"c", b"c0"), (7, b"b", b"b1"), (9, b"a", b"a2")]


def test_tombstones_kept_by_default_dropped_on_request():
    recs = [(0, b"a", b"a0"), (1, b"b", b"b0"), (2, b"a", None), (3, b"c", None), (4, b"c", b"c1")]
    assert latest_per_key(recs) == [(1, b"b", b"b0"), (2, b"a", None), (4, b"c", b"c1")]
    # a key whose last record is a tombstone produces nothing; an older tombstone never counts
    assert latest_per_key(recs, drop_tombstones=True) == [(1, b"b", b"b0"), (4, b"c", b"c1")]


def test_verdicts_name_why_a_record_is_left_out():
    sel = LatestPerKey("t-0", drop_tombstones=True)
    sel.scan([0, 1, 2], [b"a", b"a", b"b"])
    assert [sel.verdict(0, b"a", b"x"), sel.verdict(1, b"a", b"y"), sel.verdict(2, b"b", None)] == \
           [SUPERSEDED, KEEP, TOMBSTONE]
    assert len(sel) == 2 and sel.scanned == 3 and sel.kept_offsets() == [1, 2]


def test_keys_compare_as_bytes():
    # the empty key is a key (the sink archives it); equal text in other bytes is another key
    recs = [(0, b"", b"e0"), (1, "é".encode(), b"u0"), (2, "é".encode("latin-1"), b"l0"), (3, b"", b"e1")]
    assert latest_per_key(recs) == [(1, "é".encode(), b"u0"), (2, b"\xe9", b"l0"), (3, b"", b"e1")]


def test_a_keyless_record_is_refused_naming_it():
    with pytest.raises(RestoreRefusedError, match=r"record orders-3@7 has no key: --latest-per-key"):
        latest_per_key([(6, b"a", b"x"), (7, None, b"y")], where="orders-3")
    sel = LatestPerKey("orders-3")
    sel.scan([1], [b"a"])
    with pytest.raises(RestoreRefusedError, match="orders-3@2 has no key"):
        sel.verdict(2, None, b"v")


def test_records_sharing_an_offset_keep_the_last_of_them():
    # a transform made three records of offset 4, two with key a: the second one is a's last record
    recs = [(3, b"a", b"a3"), (4, b"a", b"a4-first"), (4, b"b", b"b4"), (4, b"a", b"a4-second"), (5, b"c", b"c5")]
    assert latest_per_key(recs) == [(4, b"b", b"b4"), (4, b"a", b"a4-second"), (5, b"c", b"c5")]
    recs2 = recs + [(6, b"a", b"a6")]
    assert latest_per_key(recs2) == [(4, b"b", b"b4"), (5, b"c", b"c5"), (6, b"a", b"a6")]


def test_scan_in_pieces_equals_one_scan():
    rng = random.Random(7)
    recs = [(i, b"k%d" % rng.randrange(20), None if rng.random() < 0.2 else b"v%d" % i) for i in range(500)]
    one, pieces = LatestPerKey(), LatestPerKey()
    one.scan([r[0] for r in recs], [r[1] for r in recs])
    for a in range(0, 500, 37):
        pieces.scan([r[0] for r in recs[a:a + 37]], [r[1] for r in recs[a:a + 37]])
    assert one.last == pieces.last and pieces.scanned == 500


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("drop", [False, True])
def test_matches_the_reference_on_random_partitions(seed, drop):
    rng = random.Random(seed)
    offs, off = [], 0
    for _ in range(rng.randrange(0, 300)):
        off += rng.choice([1, 1, 1, 2, 5])  # compaction and markers leave gaps
        offs.append(off)
    recs = [(o, bytes([rng.randrange(8)]) * rng.randrange(0, 3), None if rng.random() < 0.15 else b"%d" % o)
            for o in offs]
    assert latest_per_key(recs, drop_tombstones=drop) == reference(recs, drop)


@pytest.mark.parametrize("seed", range(10))
def test_a_resumed_run_keeps_what_the_full_run_keeps_after_its_progress(seed):
    """A resumed restore scans only from the first record it has not covered (its covered prefix is skipped
    unread): the records it then keeps are exactly those the uninterrupted run would keep after that point,
    because only later records can supersede a record."""
    rng = random.Random(seed)
    recs = [(i, b"k%d" % rng.randrange(15), b"v%d" % i) for i in range(200)]
    full = latest_per_key(recs)
    cut = rng.randrange(0, 200)
    resumed = latest_per_key(recs[cut:])
    assert [r for r in resumed] == [r for r in full if r[0] >= cut]


# ---------------------------------------------------- the first pass reads what the second pass will read


@pytest.mark.parametrize("fmt,extra", [("json", {}), ("bytearray", {"store_kafka_metadata": "false"}),
                                       ("avro", {"keys_format_class": "json"})])
def test_key_positions_are_those_of_read_records_under_every_cut(tmp_path, fmt, extra):
    from support.archive_helpers import BASE_TS, archive, batch, config, value_bytes

    from lakesink import wiring
    from lakesink.executor.readback import ArchivedObject, Cut, read_key_positions, read_records
    from lakesink.store import open_store

    cfg = config(tmp_path, fmt, store_kafka_keys="true", **extra)
    n = 11
    gap = "store_kafka_metadata" not in extra  # without metadata only contiguous offsets are readable
    offsets = [10 + i + (3 if gap and i >= 5 else 0) for i in range(n)]
    tss = [BASE_TS + 1000 * i - (50_000 if i == 2 else 0) for i in range(n)]
    keys = [b"k\x00%d" % (i % 4) if i != 6 else b"" for i in range(n)]
    rows = archive(cfg, [batch([value_bytes(fmt, i) for i in range(n)], offsets, tss, keys=keys)],
                   10, offsets[-1] + 1)
    store = open_store(wiring.store_settings(cfg))
    vfmt, kfmt = wiring.value_format(cfg), wiring.keys_format(cfg)
    cuts = [Cut(), Cut(from_offset=12, to_offset=20), Cut(from_offset=10_000)]
    if gap:
        cuts += [Cut(from_ts=BASE_TS + 1000, to_ts=BASE_TS + 6000), Cut(from_offset=11, to_ts=BASE_TS + 3000)]
    for cut in cuts:
        for row in rows:
            obj = ArchivedObject.from_row(row)
            recs = read_records(store, vfmt, obj, keys_format=kfmt, cut=cut, key_decoder=cfg.key_decoder)
            got = read_key_positions(store, obj, keys_format=kfmt, cut=cut, key_decoder=cfg.key_decoder)
            assert got == ([r.offset for r in recs], [r.key for r in recs]), (cut, obj.object_key)


def test_key_positions_need_a_keys_side_file(tmp_path):
    from support.archive_helpers import BASE_TS, archive, batch, config

    from lakesink import wiring
    from lakesink.errors import MissingSideFileError
    from lakesink.executor.readback import ArchivedObject, read_key_positions
    from lakesink.store import open_store

    cfg = config(tmp_path, "json")
    rows = archive(cfg, [batch([b'{"a":1}'], [0], [BASE_TS])], 0, 1)
    with pytest.raises(MissingSideFileError, match=r"no keys side file .*store.kafka.keys=true"):
        read_key_positions(open_store(wiring.store_settings(cfg)), ArchivedObject.from_row(rows[0]),
                           keys_format=wiring.keys_format(cfg))


def test_a_workers_refusal_stays_a_refusal_without_rerun_advice():
    from lakesink.driver.restore import run_failure

    e = run_failure("RestoreRefusedError: record orders-3@7 has no key: --latest-per-key keeps ...", None)
    assert isinstance(e, RestoreRefusedError)
    assert str(e) == "restore refused: record orders-3@7 has no key: --latest-per-key keeps ..."
    assert "run the same restore again" in str(run_failure("RestoreProduceError: copy-0: refused", None))


def test_drop_tombstones_alone_is_a_usage_error_before_anything_is_read():
    from lakesink.driver.restore import restore
    from lakesink.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=r"--drop-tombstones \(drop_tombstones\) needs --latest-per-key"):
        restore(lambda: pytest.fail("no session"), "never-read.properties", to_topic="t", drop_tombstones=True)
    assert InvalidArgumentError.exit_code == 2


def test_objects_without_keys_are_refused_naming_one():
    from lakesink.driver.restore import check_keys_stored
    from lakesink.errors import InvalidArgumentError
    from lakesink.executor.readback import ArchivedObject

    def obj(first, sides):
        return ArchivedObject("orders", 1, f"topics/orders/partition=1/orders+1+{first:010d}.json", "e", None, first,
                              first + 9, 10, tuple({"view": v, "key": f"k.{v}"} for v in sides))

    check_keys_stored([obj(0, ["keys", "metadata"])])
    with pytest.raises(InvalidArgumentError, match=r"and 1 selected object\(s\) were archived without a keys side "
                                                   r"file \(store.kafka.keys=false\), e.g. topics/orders/partition=1/"
                                                   r"orders\+1\+0000000010.json \(orders-1@10..19\)"):
        check_keys_stored([obj(0, ["keys"]), obj(10, ["metadata"])])


def test_adopted_objects_are_refused_as_adopted_not_as_archived_without_keys():
    """An object `manifest import` adopted from Aiven's sink has no keys side file (its keys, if any, are in its
    lines): the refusal says so, rather than blaming store.kafka.keys."""
    from lakesink.driver.restore import check_keys_stored
    from lakesink.errors import InvalidArgumentError
    from lakesink.executor.readback import ArchivedObject

    aiven = ArchivedObject("orders", 0, "orders-0-00000000000000000000.gz", "e", None, 0, 9, 10, format="aiven_jsonl")
    with pytest.raises(InvalidArgumentError) as e:
        check_keys_stored([aiven])
    msg = str(e.value)
    assert ("1 selected object(s) were adopted from another archiver by `lakesink manifest import` (format "
            "aiven_jsonl: any keys are inside its own lines") in msg, msg
    assert "orders-0-00000000000000000000.gz (orders-0@0..9)" in msg and "store.kafka.keys=false" not in msg, msg
    lines = ArchivedObject("orders", 0, "zooz/orders-0-0.gz", "e", None, 0, 9, 10, format="lines")
    with pytest.raises(InvalidArgumentError, match=r"\(format lines: it holds values only\)"):
        check_keys_stored([lines])
    mine = ArchivedObject("orders", 1, "topics/orders/partition=1/orders+1+0000000000.json", "e", None, 0, 9, 10,
                          format="json")
    with pytest.raises(InvalidArgumentError, match=r"archived without a keys side file \(store.kafka.keys=false\)"):
        check_keys_stored([mine])


def test_latest_reads_skip_the_covered_prefix_only():
    from lakesink.driver.restore import latest_reads
    from lakesink.executor.coverage import SourceCoverage
    from lakesink.executor.readback import ArchivedObject, Cut

    objs = [ArchivedObject("t", 0, f"o{a}", "e", None, a, b, b - a + 1) for a, b in
            [(0, 9), (10, 19), (20, 29), (30, 39)]]
    done = SourceCoverage([(0, 19, None, None), (30, 39, None, None)])
    # 0-19 covered and nothing before it: unread; 20-29 not covered; 30-39 covered but may supersede 20-29
    assert [o.object_key for o in latest_reads(objs, Cut(), done)] == ["o20", "o30"]
    assert latest_reads(objs, Cut(), SourceCoverage([(0, 39, None, None)])) == []
    assert [o.object_key for o in latest_reads(objs, Cut(from_offset=15), SourceCoverage())] == \
           ["o10", "o20", "o30"]
