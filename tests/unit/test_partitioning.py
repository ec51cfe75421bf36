"""lakesink.executor.partitioning: Kafka's murmur2 and default partitioner, byte-compatible with the Java client
(checked against tests/unit/fixtures/murmur2_java.json, which the real kafka-clients jar printed:
tests/unit/fixtures/Murmur2Java.java says how), --partition-map, and the Router a restore routes records with."""
from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lakesink.errors import EXIT_USAGE, InvalidArgumentError, RestoreRefusedError
from lakesink.executor import partitioning
from lakesink.executor.partitioning import (PartitionMap, Router, default_partition, default_partitions, murmur2,
                                            murmur2_array, to_positive)

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "murmur2_java.json").read_text())
JAVA = [(bytes.fromhex(k["hex"]), k["murmur2"], k["partitions"]) for k in FIXTURE["keys"]]
KEYS = [k for k, _h, _p in JAVA]
COUNTS = range(1, FIXTURE["max_partitions"] + 1)


def test_the_fixture_holds_what_the_java_check_needs():
    kinds = {k["kind"] for k in FIXTURE["keys"]}
    assert {"empty", "ascii", "utf8", "binary", "edge"} <= kinds
    assert b"" in KEYS
    multibyte = [k for k in KEYS if any(b >= 0x80 for b in k) and _utf8(k) and len(_utf8(k)) < len(k)]
    assert len(multibyte) >= 8  # UTF-8 text with 2-, 3- and 4-byte characters
    assert {len(k) for k in KEYS if k} >= set(range(1, 65))  # every tail length and block count up to 64 bytes
    assert all(len(p) == 100 for _k, _h, p in JAVA) and FIXTURE["max_partitions"] == 100
    assert any(h < 0 for _k, h, _p in JAVA) and any(h > 0 for _k, h, _p in JAVA)
    assert int(FIXTURE["kafka_clients"].split(".")[0]) >= 3


def _utf8(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_murmur2_is_the_java_clients_hash_for_every_fixture_key():
    wrong = [(k.hex(), murmur2(k), h) for k, h, _p in JAVA if murmur2(k) != h]
    assert not wrong
    assert murmur2(bytearray(KEYS[5])) == JAVA[5][1] and murmur2(memoryview(KEYS[5])) == JAVA[5][1]


def test_to_positive_is_javas_including_integer_min_value():
    for h, expected in FIXTURE["to_positive"]:
        assert to_positive(h) == expected
    assert to_positive(-(2 ** 31)) == 0  # abs() would give 2**31, outside the partition arithmetic


def test_default_partition_is_the_java_producers_for_every_key_and_count_1_to_100():
    wrong = [(k.hex(), n, default_partition(k, n), p[n - 1]) for k, _h, p in JAVA for n in COUNTS
             if default_partition(k, n) != p[n - 1]]
    assert not wrong
    assert sum(len(p) for _k, _h, p in JAVA) >= 30_000


@pytest.mark.parametrize("form", ["list", "tuple", "generator", "binary", "large_binary", "chunked", "sliced"])
def test_many_keys_at_once_give_the_java_clients_hashes_and_partitions(form):
    lo = 3 if form == "sliced" else 0
    expected_h = [h for _k, h, _p in JAVA][lo:]
    if form == "list":
        keys = list(KEYS)
    elif form == "tuple":
        keys = tuple(KEYS)
    elif form == "generator":
        keys = (k for k in KEYS)
    elif form == "binary":
        keys = pa.array(KEYS, pa.binary())
    elif form == "large_binary":
        keys = pa.array(KEYS, pa.large_binary())
    elif form == "chunked":
        keys = pa.chunked_array([pa.array(KEYS[:100], pa.binary()), pa.array(KEYS[100:], pa.binary())])
    else:
        keys = pa.array(KEYS, pa.binary()).slice(lo)
    hashes = murmur2_array(keys)
    assert hashes.dtype == np.int32 and hashes.tolist() == expected_h
    for n in (1, 2, 3, 7, 12, 64, 100):
        keys2 = keys if form != "generator" else list(KEYS)
        assert default_partitions(keys2, n).tolist() == [p[n - 1] for _k, _h, p in JAVA][lo:]


def test_many_keys_across_chunk_boundaries_and_in_any_order(monkeypatch):
    expected = [h for _k, h, _p in JAVA]
    for chunk in (1, 2, 3, 5, 64):
        monkeypatch.setattr(partitioning, "CHUNK_KEYS", chunk)
        assert murmur2_array(KEYS).tolist() == expected
        assert murmur2_array(KEYS[::-1]).tolist() == expected[::-1]
    assert murmur2_array([]).tolist() == [] and default_partitions([], 3).tolist() == []
    assert murmur2_array([b"", b""]).tolist() == [murmur2(b"")] * 2


def test_string_arrays_hash_their_utf8_bytes():
    texts = [t for t in (_utf8(k) for k in KEYS) if t is not None]
    assert murmur2_array(pa.array(texts, pa.string())).tolist() == [murmur2(t.encode()) for t in texts]


def test_null_keys_have_no_hash_and_no_default_partition():
    keys = [KEYS[1], None, b"", None]
    with pytest.raises(InvalidArgumentError, match="key 1 is null"):
        murmur2_array(keys)
    assert default_partitions(keys, 10).tolist() == [default_partition(KEYS[1], 10), -1, default_partition(b"", 10), -1]
    arrow = pa.array(keys, pa.binary())
    assert default_partitions(arrow, 10).tolist() == default_partitions(keys, 10).tolist()
    with pytest.raises(InvalidArgumentError, match="key 1 is str, not bytes"):
        murmur2_array([b"a", "b"])
    with pytest.raises(InvalidArgumentError, match="binary or string"):
        murmur2_array(pa.array([1, 2]))


@pytest.mark.parametrize("n", [0, -1, 1.5, True, None])
def test_a_partition_count_is_an_integer_of_at_least_one(n):
    with pytest.raises(InvalidArgumentError, match="partition count"):
        default_partition(b"k", n)
    with pytest.raises(InvalidArgumentError, match="partition count"):
        Router.default(n)


# --- --partition-map ---------------------------------------------------------------------------------------------

def test_partition_map_parses_pairs_and_prints_them_back_canonically():
    m = PartitionMap.parse(" 2=0, 0 = 3,1=3 ")
    assert m.pairs == ((0, 3), (1, 3), (2, 0))
    assert str(m) == "0=3,1=3,2=0" and PartitionMap.parse(str(m)) == m
    assert m.get(1) == 3 and m.get(7) is None
    assert m.sources == {0, 1, 2} and m.destinations == {0, 3}
    assert PartitionMap.of({2: 0, 0: 3, 1: 3}) == m == PartitionMap.of("0=3,1=3,2=0") == PartitionMap.of(m)


@pytest.mark.parametrize("text,named", [
    ("", "is empty"),
    ("   ", "is empty"),
    ("0=3,,1=2", "item 2 is empty"),
    ("0=3,", "item 2 is empty"),
    ("03", "item '03' is not SOURCE=DEST"),
    ("0:3", "item '0:3' is not SOURCE=DEST"),
    ("a=3", "item 'a=3': source partition 'a' is not a partition number"),
    ("0=b", "item '0=b': destination partition 'b' is not a partition number"),
    ("-1=2", "item '-1=2': source partition '-1'"),
    ("0=-2", "item '0=-2': destination partition '-2'"),
    ("+1=2", "source partition '+1'"),
    ("1_0=2", "source partition '1_0'"),
    ("1.5=2", "source partition '1.5'"),
    ("0=3=4", "destination partition '3=4'"),
    ("=3", "source partition ''"),
    ("\u0661=2", "source partition '\u0661'"),  # an Arabic-Indic digit: int() would take it
    ("0=1,0=2", "maps source partition 0 twice ('0=1' and '0=2')"),
    ("0=1,0=1", "maps source partition 0 twice"),
])
def test_a_bad_partition_map_is_one_usage_line_naming_the_item(text, named):
    with pytest.raises(InvalidArgumentError) as e:
        PartitionMap.parse(text)
    msg = str(e.value)
    assert named in msg and msg.startswith("--partition-map") and "\n" not in msg
    assert e.value.exit_code == EXIT_USAGE


def test_a_partition_map_from_python_is_checked_too():
    with pytest.raises(InvalidArgumentError, match="maps source partition 1 twice"):
        PartitionMap(((1, 2), (1, 3)))
    with pytest.raises(InvalidArgumentError, match="integers >= 0"):
        PartitionMap.of({0: -1})
    with pytest.raises(InvalidArgumentError, match="names no partition"):
        PartitionMap.of({})


# --- Router ------------------------------------------------------------------------------------------------------

def test_default_router_places_keyed_records_as_the_java_producer_does():
    for n in (1, 5, 12, 100):
        r = Router.default(n)
        for source in (0, 3):  # the source partition does not matter for a keyed record
            assert [r.route(source, k) for k in KEYS] == [p[n - 1] for _k, _h, p in JAVA]


def test_an_empty_key_is_a_key_and_a_null_key_follows_the_keyless_rule():
    r = Router.default(5)
    empty = next(p for k, _h, p in JAVA if k == b"")
    assert r.route(7, b"") == empty[4]  # Java hashes an empty byte array like any other key
    assert [r.route(s, None) for s in range(12)] == [s % 5 for s in range(12)]
    assert "source partition number modulo" in partitioning.KEYLESS_RULE


def test_keyless_records_stay_where_they_were_when_the_counts_are_equal():
    r = Router.default(6)
    assert all(r.route(s, None) == s for s in range(6))


def test_map_router_sends_every_record_of_a_source_partition_to_its_mapped_partition():
    r = Router.mapped("0=3,1=3,2=0", 4)
    assert [r.route(0, k) for k in (None, b"a", b"zz")] == [3, 3, 3]
    assert r.route(2, b"a") == 0 and r.destinations(1) == (3,)
    r.check_sources([0, 1, 2])


def test_a_map_that_leaves_out_a_source_partition_is_refused_naming_them():
    r = Router.mapped("0=1,1=0", 2)
    with pytest.raises(RestoreRefusedError) as e:
        r.check_sources([0, 1, 2, 3, 4, 7])
    msg = str(e.value)
    assert "does not map source partition(s) 2-4,7" in msg and "2=DEST" in msg and "\n" not in msg
    with pytest.raises(RestoreRefusedError, match="source partition\\(s\\) 5"):
        r.route(5, b"k")
    with pytest.raises(RestoreRefusedError, match="source partition\\(s\\) 5"):
        r.route_many(5, [b"k"])


def test_a_map_to_a_partition_the_destination_lacks_is_refused_naming_the_items():
    with pytest.raises(RestoreRefusedError) as e:
        Router.mapped("0=3,1=5,2=0", 4)
    msg = str(e.value)
    assert msg.startswith("--partition-map 1=5:")  # only the item at fault: 0=3 exists in a 4-partition topic
    assert "4 partition(s) (0-3)" in msg and "partition 5 does not" in msg
    assert Router.mapped("0=3", 4).route(0, None) == 3


def test_the_same_number_router_is_todays_restore_and_refuses_missing_partitions():
    r = Router.from_options(3)
    assert r == Router.same(3) and r.kind == "same" and not r.keyed
    assert [r.route(p, b"k") for p in range(3)] == [0, 1, 2]
    with pytest.raises(RestoreRefusedError, match="reads source partition\\(s\\) 3-4.*--partitioner default"):
        r.check_sources([0, 3, 4])
    with pytest.raises(RestoreRefusedError):
        r.route(3, None)


def test_options_pick_one_router():
    assert Router.from_options(4, partitioner="default") == Router.default(4)
    assert Router.from_options(4, partition_map="0=1") == Router.mapped({0: 1}, 4)
    with pytest.raises(InvalidArgumentError, match="exclude each other"):
        Router.from_options(4, partitioner="default", partition_map="0=1")
    with pytest.raises(InvalidArgumentError, match="--partitioner 'murmur3' is not known; it takes default"):
        Router.from_options(4, partitioner="murmur3")
    with pytest.raises(InvalidArgumentError, match="kind 'map' takes a partition_map"):
        Router(4, "map")
    with pytest.raises(InvalidArgumentError, match="unknown router kind"):
        Router(4, "sticky")


@pytest.mark.parametrize("router", [Router.default(7), Router.mapped("2=0,0=3,1=3", 4), Router.same(9)])
def test_a_router_is_a_frozen_picklable_value_that_routes_the_same_after_the_trip(router):
    back = pickle.loads(pickle.dumps(router))
    assert back == router and hash(back) == hash(router) and back.spec == router.spec
    keys = KEYS[:60] + [None] * 3
    for source in (0, 1, 2):
        assert back.route_many(source, keys).tolist() == router.route_many(source, keys).tolist()
    with pytest.raises(dataclasses.FrozenInstanceError):
        router.num_partitions = 3  # type: ignore[misc]


def test_spec_names_a_router_canonically():
    assert Router.default(12).spec == "default/12"
    assert Router.same(4).spec == "same/4"
    assert Router.mapped("2=0, 0=3,1=3", 4).spec == Router.mapped({0: 3, 1: 3, 2: 0}, 4).spec == "map:0=3,1=3,2=0/4"
    assert Router.mapped("0=3", 4).spec != Router.mapped("0=3", 5).spec


@pytest.mark.parametrize("router", [Router.default(7), Router.default(1), Router.mapped("0=2,1=2,2=0", 3),
                                    Router.same(3)])
def test_route_many_is_route_on_each_record(router):
    keys = KEYS + [None, b"", None]
    for source in (0, 1, 2):
        got = router.route_many(source, keys)
        assert got.dtype == np.int32
        assert got.tolist() == [router.route(source, k) for k in keys]
        assert router.route_many(source, pa.array(keys, pa.binary())).tolist() == got.tolist()


def test_split_keeps_source_order_per_destination_and_every_key_in_one_partition():
    rng = np.random.default_rng(29)
    pool = KEYS[:40] + [None]
    keys = [pool[i] for i in rng.integers(0, len(pool), 2_000)]
    parts = Router.default(6).split(4, keys)
    assert sorted(np.concatenate(list(parts.values())).tolist()) == list(range(len(keys)))
    seen: dict[bytes | None, int] = {}
    for dest, idx in parts.items():
        assert np.all(np.diff(idx) > 0)  # in source order: what one destination's producer sends
        for i in idx:
            assert seen.setdefault(keys[i], dest) == dest  # a key's records share one destination
    assert seen[None] == 4 % 6
    assert Router.default(6).split(0, []) == {}
    assert {d: i.tolist() for d, i in Router.mapped("4=1", 2).split(4, keys[:3]).items()} == {1: [0, 1, 2]}
