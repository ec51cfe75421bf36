"""The ``ObjectStore`` contract: one suite of tests every store implementation must pass.

Mixed into each implementation's test module the way fsspec mixes its abstract suites
(``fsspec/tests/abstract``) into each file system's tests::

    from support.store_contract import StoreContract

    class TestLocalStore(StoreContract):
        @pytest.fixture
        def store(self, tmp_path):
            return LocalStore(...)

The base class has no ``Test`` prefix and this module is not a ``test_*.py`` file, so pytest
collects the contract only through the subclasses (once per implementation).

Fixtures a subclass provides:

``store``
    A fresh, empty ``ObjectStore``. S3 stores must use ``part_size=MIN_PART_SIZE`` so the
    multipart tests (objects of more than one ``MIN_PART_SIZE``) really send several parts.

Everything else goes through the store API itself: an object "changes out of band" because
another writer finishes its own pending write, or deletes and recreates the key.
"""
from __future__ import annotations

import hashlib
import os

import pytest

from lakesink.errors import ObjectChangedError, StoreError
from lakesink.store import MIN_PART_SIZE, ObjectStore, PendingWrite, WrittenObject, upload_metadata

# Sizes that take the single-PUT path and the multipart path of a streaming (S3) store.
SMALL = 100
MULTIPART = MIN_PART_SIZE + 1
SIZES = pytest.mark.parametrize("size", [SMALL, MULTIPART], ids=["single-put", "multipart"])


def _data(size: int, fill: bytes) -> bytes:
    """``size`` bytes that differ between fills (and from run to run) but are cheap to make."""
    return (fill * (size // len(fill) + 1))[:size]


def _stream(store: ObjectStore, key: str, data: bytes, metadata=None, chunk: int = 1 << 20):
    w = store.open_writer(key, metadata)
    try:
        for i in range(0, len(data), chunk):
            w.write(data[i:i + chunk])
        return w.commit()
    except BaseException:
        w.abort()
        raise


def _keys(store: ObjectStore, prefix: str = "") -> list[str]:
    return sorted(o.key for o in store.list(prefix))


def _only(store: ObjectStore, *keys: str) -> None:
    """Exactly ``keys`` are listed and no staged bytes are left: no temp file, no open upload."""
    assert _keys(store) == sorted(keys)
    assert list(store.list_uploads()) == []


class StoreContract:
    """Behaviour every ``ObjectStore`` shares; needs a ``store`` fixture (a fresh, empty store)."""

    # ------------------------------------------------------------ create, read

    def test_create_read_and_etag(self, store):
        key = "topics/t/partition=0/t+0+0000000000.json"
        w = store.open_writer(key)
        for _ in range(3):
            w.write(b"abc\n")
        res = w.commit()
        assert isinstance(res, WrittenObject)
        assert res.key == key and res.size == 12
        assert res.etag == hashlib.md5(b"abc\n" * 3).hexdigest()  # a single-part object's ETag is its MD5
        assert res.uri == store.uri(key) and key in res.uri
        assert store.read(key) == b"abc\n" * 3
        assert store.read(key, etag=res.etag) == b"abc\n" * 3
        assert store.read(key, etag=f'"{res.etag}"') == b"abc\n" * 3  # quoted ETags are accepted too
        info = store.head(key)
        assert info.key == key and info.size == 12 and info.etag == res.etag

    def test_ranged_read(self, store):
        data = bytes(range(256))
        store.put_bytes("r/a.bin", data)
        assert store.read("r/a.bin", byte_range=(4, 7)) == data[4:8]  # inclusive
        assert store.read("r/a.bin", byte_range=(0, 0)) == data[:1]
        assert store.read("r/a.bin", byte_range=(250, 255)) == data[250:]
        w = store.head("r/a.bin")
        assert store.read("r/a.bin", etag=w.etag, byte_range=(10, 19)) == data[10:20]

    def test_read_with_a_wrong_etag_raises(self, store):
        store.put_bytes("k/a.bin", b"x")
        with pytest.raises(ObjectChangedError, match="k/a.bin"):
            store.read("k/a.bin", etag="0" * 32)

    def test_read_with_a_stale_etag_raises(self, store):
        old = store.put_bytes("k/a.bin", b"x")
        store.delete("k/a.bin")
        store.put_bytes("k/a.bin", b"y")
        with pytest.raises(ObjectChangedError, match="k/a.bin"):
            store.read("k/a.bin", etag=old.etag)
        with pytest.raises(ObjectChangedError, match="k/a.bin"):
            store.read("k/a.bin", etag=old.etag, byte_range=(0, 0))

    def test_read_of_a_missing_key_names_it(self, store):
        with pytest.raises(StoreError, match="nope.bin"):
            store.read("nope.bin")

    def test_head_of_a_missing_key_is_none(self, store):
        assert store.head("nope.bin") is None
        store.put_bytes("k/a.bin", b"x")
        assert store.head("k/a") is None

    def test_a_key_prefix_is_not_an_object(self, store):
        """``k`` is a missing key even when ``k/a.bin`` exists: head None, read a StoreError, delete a no-op;
        and so is ``k/a.bin/x`` (a key "under" an object)."""
        store.put_bytes("k/a.bin", b"x")
        assert store.head("k") is None
        assert store.head("k/a.bin/x") is None
        with pytest.raises(StoreError, match="k"):
            store.read("k")
        store.delete("k")
        assert store.read("k/a.bin") == b"x"

    def test_streamed_multipart_object(self, store):
        data = os.urandom(MIN_PART_SIZE * 2 + 12345)  # three parts at part_size=MIN_PART_SIZE
        key = "topics/t/partition=0/t+0+0000000000.bin"
        res = _stream(store, key, data, upload_metadata("job-a", "run-1", 7))
        assert isinstance(res, WrittenObject) and res.size == len(data)
        assert store.read(key, etag=res.etag) == data
        a, b = MIN_PART_SIZE - 10, MIN_PART_SIZE + 10  # across a part boundary
        assert store.read(key, byte_range=(a, b)) == data[a:b + 1]
        info = store.head(key)
        assert info.size == len(data) and info.etag == res.etag and info.owner == "job-a"
        _only(store, key)

    # ------------------------------------------------------------ conditional create

    @SIZES
    def test_existing_key_is_never_replaced_silently(self, store, size):
        committed, zombie = _data(size, b"committed"), _data(size, b"zombie")
        first = store.put_bytes("k/a.bin", committed)
        second = store.put_bytes("k/a.bin", zombie)
        assert isinstance(second, PendingWrite)
        assert second.key == "k/a.bin" and second.size == size
        assert second.existing_etag == first.etag and not second.same_content
        assert store.read("k/a.bin", etag=first.etag) == committed
        assert store.head("k/a.bin").etag == first.etag
        store.abort_pending(second)
        assert store.read("k/a.bin", etag=first.etag) == committed
        _only(store, "k/a.bin")  # the staged copy is gone

    @SIZES
    def test_finish_pending_replaces_exactly_the_orphan_it_saw(self, store, size):
        orphan, fresh = _data(size, b"orphan"), _data(size, b"fresh")
        seen = store.put_bytes("k/a.bin", orphan)
        p = store.put_bytes("k/a.bin", fresh)
        assert isinstance(p, PendingWrite) and p.existing_etag == seen.etag
        w = store.finish_pending(p)
        assert isinstance(w, WrittenObject) and w.key == "k/a.bin" and w.size == size
        assert store.read("k/a.bin", etag=w.etag) == fresh
        assert store.head("k/a.bin").etag == w.etag != seen.etag
        _only(store, "k/a.bin")

    def test_finish_pending_refuses_when_another_writer_replaced_it(self, store):
        store.put_bytes("k/a.bin", b"orphan")
        ours = store.put_bytes("k/a.bin", b"ours")
        theirs = store.put_bytes("k/a.bin", b"theirs")
        won = store.finish_pending(theirs)  # the object changes after we saw the conflict
        with pytest.raises(ObjectChangedError, match="k/a.bin"):
            store.finish_pending(ours)
        assert store.read("k/a.bin", etag=won.etag) == b"theirs"
        _only(store, "k/a.bin")  # the refused write's staged bytes are dropped

    def test_finish_pending_refuses_when_the_key_was_deleted_and_recreated(self, store):
        store.put_bytes("k/a.bin", b"orphan")
        pending = store.put_bytes("k/a.bin", b"ours")
        store.delete("k/a.bin")
        store.put_bytes("k/a.bin", b"someone else")
        with pytest.raises(ObjectChangedError, match="k/a.bin"):
            store.finish_pending(pending)
        assert store.read("k/a.bin") == b"someone else"
        _only(store, "k/a.bin")

    def test_finish_pending_refuses_when_the_orphan_is_gone(self, store):
        store.put_bytes("k/a.bin", b"orphan")
        pending = store.put_bytes("k/a.bin", b"ours")
        store.delete("k/a.bin")
        with pytest.raises(ObjectChangedError, match="k/a.bin"):
            store.finish_pending(pending)
        assert store.head("k/a.bin") is None  # nothing is created behind a vanished orphan
        _only(store)

    @SIZES
    def test_adopt_pending_with_identical_bytes_keeps_the_existing_object(self, store, size):
        data = os.urandom(size)
        first = store.put_bytes("k/same.bin", data, upload_metadata("job-a", "run-1", 0))
        before = store.head("k/same.bin")
        pending = store.put_bytes("k/same.bin", data, upload_metadata("job-a", "run-2", 5))
        assert isinstance(pending, PendingWrite) and pending.same_content
        kept = store.adopt_pending(pending)
        assert isinstance(kept, WrittenObject) and kept.key == "k/same.bin"
        assert kept.etag == first.etag and kept.size == size
        after = store.head("k/same.bin")
        assert after.etag == before.etag and after.last_modified == before.last_modified
        assert after.metadata == before.metadata  # the existing object, not our copy of it
        assert store.read("k/same.bin", etag=first.etag) == data
        _only(store, "k/same.bin")
        other = store.put_bytes("k/same.bin", data[:-1] + bytes([data[-1] ^ 1]))
        assert isinstance(other, PendingWrite) and not other.same_content
        store.abort_pending(other)

    def test_adopt_pending_refuses_when_the_object_changed(self, store):
        store.put_bytes("k/a.bin", b"same")
        pending = store.put_bytes("k/a.bin", b"same")
        assert pending.same_content
        store.delete("k/a.bin")
        store.put_bytes("k/a.bin", b"different")
        with pytest.raises(ObjectChangedError, match="k/a.bin"):
            store.adopt_pending(pending)
        assert store.read("k/a.bin") == b"different"
        _only(store, "k/a.bin")

    def test_head_many_agrees_with_head(self, store):
        """Several keys of a directory (some missing, one object between them not asked for, a key of a
        sub-directory), a key alone in its directory, one at the top level, one in no directory at all: the same
        size and ETag as head() gives, or None."""
        d = "topics/t/partition=0/"
        present = [f"{d}t+0+{o:010d}{ext}" for o in (0, 50, 100) for ext in (".json", ".keys.avro")]
        for k in present:
            store.put_bytes(k, k.encode())
        others = {f"{d}t+0+0000000070.json": b"not asked", f"{d}sub/t+0+0000000080.json": b"deeper",
                  "topics/t/partition=1/t+1+0000000000.json": b"alone", "top.json": b"top level"}
        for k, data in others.items():
            store.put_bytes(k, data)
        asked = [*present, f"{d}sub/t+0+0000000080.json", "topics/t/partition=1/t+1+0000000000.json", "top.json",
                 f"{d}t+0+0000000060.json", f"{d}t+0+0000000200.json", "topics/t/partition=9/x.json", present[0]]
        got = store.head_many(asked)
        assert sorted(got) == sorted(set(asked))

        def seen(info):
            return None if info is None else (info.key, info.size, info.etag)

        assert {k: seen(got[k]) for k in asked} == {k: seen(store.head(k)) for k in asked}
        assert [k for k in sorted(got) if got[k] is None] == [f"{d}t+0+0000000060.json", f"{d}t+0+0000000200.json",
                                                             "topics/t/partition=9/x.json"]
        assert store.head_many([]) == {}

    def test_confirmed_heads_names_what_is_gone_or_changed(self, store):
        """Each key with the ETag expected (None: any): what is stored, None where nothing is; the same as head()."""
        for k in ("d/a.bin", "d/b.bin", "d/c.bin"):
            store.put_bytes(k, k.encode())
        a = store.head("d/a.bin").etag
        got = store.confirmed_heads({"d/a.bin": a, "d/b.bin": "0" * 32, "d/c.bin": None, "d/gone.bin": a})
        assert got["d/a.bin"].etag == a and got["d/b.bin"].etag == store.head("d/b.bin").etag != "0" * 32
        assert got["d/c.bin"].size == len(b"d/c.bin") and got["d/gone.bin"] is None

    # ------------------------------------------------------------ list, delete

    def test_list_by_prefix(self, store):
        sizes = {"a/1.bin": 1, "a/2.bin": 2, "a/sub/3.bin": 3, "ab/4.bin": 4, "b/5.bin": 5}
        for k, n in sizes.items():
            store.put_bytes(k, b"x" * n)
        assert _keys(store) == sorted(sizes)
        assert _keys(store, "") == sorted(sizes)
        assert _keys(store, "a/") == ["a/1.bin", "a/2.bin", "a/sub/3.bin"]
        assert _keys(store, "a") == ["a/1.bin", "a/2.bin", "a/sub/3.bin", "ab/4.bin"]  # a string prefix
        assert _keys(store, "a/sub/") == ["a/sub/3.bin"]
        assert _keys(store, "c/") == []
        assert {o.key: o.size for o in store.list("")} == sizes

    def test_list_of_an_empty_store(self, store):
        assert _keys(store) == [] and _keys(store, "a/") == []

    def test_delete(self, store):
        store.put_bytes("k/a.bin", b"x")
        store.put_bytes("k/b.bin", b"y")
        store.delete("k/a.bin")
        assert store.head("k/a.bin") is None
        assert _keys(store, "k/") == ["k/b.bin"]
        store.delete("k/a.bin")  # deleting a missing key is not an error
        store.delete("never/there.bin")
        assert store.read("k/b.bin") == b"y"
        again = store.put_bytes("k/a.bin", b"new")  # the key is free again: a plain create
        assert isinstance(again, WrittenObject) and store.read("k/a.bin", etag=again.etag) == b"new"

    # ------------------------------------------------------------ upload metadata

    def test_upload_metadata_round_trip_and_owner(self, store):
        store.put_bytes("k/a.bin", b"theirs", upload_metadata("job-b", "run-1", 0))
        info = store.head("k/a.bin")
        assert info.metadata == {"lakesink-job": "job-b", "lakesink-run-id": "run-1", "lakesink-batch-id": "0"}
        assert info.owner == "job-b"

    @SIZES
    def test_finish_pending_carries_the_new_writers_metadata(self, store, size):
        store.put_bytes("k/a.bin", _data(size, b"theirs"), upload_metadata("job-b", "run-1", 0))
        p = store.put_bytes("k/a.bin", _data(size, b"ours"), upload_metadata("job-a", "run-2", 3))
        assert store.head("k/a.bin").owner == "job-b"  # pending: nothing visible changed yet
        store.finish_pending(p)
        info = store.head("k/a.bin")
        assert info.owner == "job-a"
        assert info.metadata == {"lakesink-job": "job-a", "lakesink-run-id": "run-2", "lakesink-batch-id": "3"}
        assert store.read("k/a.bin") == _data(size, b"ours")

    def test_put_bytes_without_metadata_has_no_owner(self, store):
        store.put_bytes("k/plain.bin", b"x")
        info = store.head("k/plain.bin")
        assert info.owner is None and info.metadata == {}
        store.put_bytes("k/empty-meta.bin", b"x", {})
        assert store.head("k/empty-meta.bin").owner is None
