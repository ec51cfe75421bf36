"""The local (file://) object store: conditional create, pending replace, reads with etag checks."""
import hashlib

import pytest

from lakesink.store import LocalStore, PendingWrite, StoreSettings, WrittenObject
from lakesink.errors import ObjectChangedError, StoreError


@pytest.fixture
def store(tmp_path):
    return LocalStore(StoreSettings(bucket="bkt", endpoint_url=f"file://{tmp_path}"))


def test_create_then_read(store):
    w = store.open_writer("topics/t/partition=0/t+0+0000000000.json")
    for _ in range(3):
        w.write(b"abc\n")
    res = w.commit()
    assert isinstance(res, WrittenObject)
    assert res.etag == hashlib.md5(b"abc\n" * 3).hexdigest() and res.size == 12
    assert store.read(res.key, etag=res.etag) == b"abc\n" * 3
    assert store.read(res.key, byte_range=(4, 7)) == b"abc\n"
    assert [o.key for o in store.list("topics/t/")] == [res.key]


def test_existing_key_is_never_replaced_silently(store):
    first = store.put_bytes("k/a.bin", b"committed")
    second = store.put_bytes("k/a.bin", b"zombie")
    assert isinstance(second, PendingWrite) and second.existing_etag == first.etag
    assert store.read("k/a.bin") == b"committed"
    store.abort_pending(second)
    assert [o.key for o in store.list("k/")] == ["k/a.bin"]  # staged temp file gone


def test_pending_replaces_exactly_the_orphan_it_saw(store):
    store.put_bytes("k/a.bin", b"orphan")
    p = store.put_bytes("k/a.bin", b"fresh")
    w = store.finish_pending(p)
    assert store.read("k/a.bin", etag=w.etag) == b"fresh"
    # an object that changed after the conflict was seen is not replaced
    p2 = store.put_bytes("k/a.bin", b"third")
    store.delete("k/a.bin")
    store.put_bytes("k/a.bin", b"someone else")
    with pytest.raises(ObjectChangedError, match="k/a.bin"):
        store.finish_pending(p2)
    assert store.read("k/a.bin") == b"someone else"


def test_etag_mismatch_on_read_names_the_object(store):
    store.put_bytes("k/a.bin", b"x")
    with pytest.raises(ObjectChangedError, match="k/a.bin"):
        store.read("k/a.bin", etag="0" * 32)


def test_keys_cannot_escape_the_root(store):
    with pytest.raises(StoreError, match="escapes"):
        store.open_writer("../outside.bin")


def test_missing_object_names_it(store):
    with pytest.raises(StoreError, match="nope.bin"):
        store.read("nope.bin")


def test_same_content_is_adopted_not_replaced(store):
    first = store.put_bytes("k/a.bin", b"same bytes")
    mtime = store.head("k/a.bin").last_modified
    p = store.put_bytes("k/a.bin", b"same bytes")
    assert p.same_content
    kept = store.adopt_pending(p)
    assert kept.etag == first.etag and store.head("k/a.bin").last_modified == mtime
    assert [o.key for o in store.list("k/")] == ["k/a.bin"]  # our staged copy is gone
    assert not store.put_bytes("k/a.bin", b"other bytes").same_content


def test_upload_metadata_names_the_owner_and_survives_a_pending_replace(store):
    from lakesink.store import upload_metadata

    store.put_bytes("k/a.bin", b"theirs", upload_metadata("job-b", "run-1", 0))
    assert store.head("k/a.bin").owner == "job-b"
    assert store.head("k/a.bin").metadata == {"lakesink-job": "job-b", "lakesink-run-id": "run-1",
                                              "lakesink-batch-id": "0"}
    p = store.put_bytes("k/a.bin", b"ours", upload_metadata("job-a", "run-2", 3))
    store.finish_pending(p)
    assert store.head("k/a.bin").owner == "job-a" and store.read("k/a.bin") == b"ours"
    store.put_bytes("k/plain.bin", b"x")
    assert store.head("k/plain.bin").owner is None
