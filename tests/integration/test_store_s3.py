"""The S3 object store against a real S3-compatible HTTP endpoint (moto server): the shared store
contract plus what only S3 does (multipart ETags and uploads, retries and errors, streaming a large object in bounded memory)."""
import os

import pytest

from lakesink.store import MIN_PART_SIZE, PendingWrite, S3Settings, S3Store, StoreSettings, WrittenObject
from lakesink.errors import StoreError
from support.store_contract import StoreContract


@pytest.fixture
def store(s3, bucket):
    """An S3Store on a fresh bucket, with the smallest part size S3 allows (so > 5 MiB is multipart)."""
    return S3Store(StoreSettings(bucket=bucket, s3=S3Settings(s3.endpoint_url, "testing", "testing"),
                                 part_size=MIN_PART_SIZE))


class TestS3Store(StoreContract):
    """``StoreContract`` against S3 (module ``store`` fixture: moto server, fresh bucket)."""


def test_multipart_etag_counts_the_parts(store):
    data = os.urandom(MIN_PART_SIZE * 2 + 12345)
    w = store.open_writer("k/three-parts.bin")
    w.write(data)
    res = w.commit()
    assert isinstance(res, WrittenObject) and res.etag.endswith("-3") and len(w.parts) == 3


def test_pending_write_is_an_open_multipart_upload_until_finished(store):
    store.put_bytes("k/a.bin", b"orphan")
    p = store.put_bytes("k/a.bin", b"ours")
    assert isinstance(p, PendingWrite)
    assert [(k, u) for k, u, _t in store.list_uploads("k/")] == [("k/a.bin", p.token)]
    assert [o.key for o in store.list("k/")] == ["k/a.bin"]  # staged bytes are not an object
    store.finish_pending(p)
    assert list(store.list_uploads("k/")) == []


def test_abort_upload_drops_an_open_upload_and_never_an_object(store):
    store.put_bytes("k/a.bin", b"orphan")
    p = store.put_bytes("k/a.bin", b"ours")
    (key, upload_id, initiated), = store.list_uploads("")
    assert key == "k/a.bin" and upload_id == p.token and initiated > 0
    store.abort_upload(key, upload_id)
    assert list(store.list_uploads("")) == []
    assert store.read("k/a.bin") == b"orphan"


def test_missing_bucket_is_a_clear_error(s3):
    st = S3Store(StoreSettings(bucket="no-such-bucket-here", s3=S3Settings(s3.endpoint_url, "testing", "testing"),
                               part_retries=0))
    with pytest.raises(StoreError, match=r"no-such-bucket-here.*NoSuchBucket.*does not exist"):
        st.put_bytes("k", b"x")


def test_unreachable_endpoint_is_a_clear_error():
    st = S3Store(StoreSettings(bucket="b", s3=S3Settings("http://127.0.0.1:9", "testing", "testing"),
                               part_retries=1, retry_backoff_ms=10))
    with pytest.raises(StoreError, match=r"s3://b/k"):
        st.put_bytes("k", b"x")


def test_large_object_streams_with_bounded_memory(store):
    """256 MiB (51 parts) through multipart: the writer never buffers more than one part, however large the
    object (the bound is per part, so a larger object shows nothing more and costs minutes on moto)."""
    size = 256 << 20
    chunk = os.urandom(1 << 20)
    w = store.open_writer("big/large.bin")
    max_buffered = 0
    for _ in range(size >> 20):
        w.write(chunk)
        max_buffered = max(max_buffered, len(w.buf))
    res = w.commit()
    assert res.size == size
    assert max_buffered < MIN_PART_SIZE
    assert len(w.parts) == size // MIN_PART_SIZE + 1
    assert store.head("big/large.bin").size == size
    assert store.read("big/large.bin", byte_range=(size - 5, size - 1)) == chunk[-5:]
    store.delete("big/large.bin")
