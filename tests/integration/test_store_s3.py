"""The S3 object store against a real S3-compatible HTTP endpoint (moto server)."""
import os
import uuid

import pytest

from lakesink.store import MIN_PART_SIZE, PendingWrite, S3Store, StoreSettings, WrittenObject
from lakesink.errors import ObjectChangedError, StoreError


@pytest.fixture
def store(s3):
    bucket = f"store-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(bucket)
    return S3Store(StoreSettings(bucket=bucket, endpoint_url=s3.endpoint_url, region="us-east-1",
                                 access_key="testing", secret_key="testing", part_size=MIN_PART_SIZE))


def test_multipart_stream_and_ranged_read(store):
    data = os.urandom(MIN_PART_SIZE * 2 + 12345)
    w = store.open_writer("topics/t/partition=0/t+0+0000000000.bin", {"lakesink-job": "j"})
    for i in range(0, len(data), 1 << 20):
        w.write(data[i:i + (1 << 20)])
    res = w.commit()
    assert isinstance(res, WrittenObject) and res.size == len(data)
    assert res.etag.endswith("-3")  # three parts
    assert store.read(res.key, etag=res.etag) == data
    a, b = MIN_PART_SIZE - 10, MIN_PART_SIZE + 10  # across a part boundary
    assert store.read(res.key, byte_range=(a, b)) == data[a:b + 1]
    assert store.head(res.key).size == len(data)


@pytest.mark.parametrize("size", [100, MIN_PART_SIZE + 1], ids=["single-put", "multipart"])
def test_second_create_is_pending_and_never_replaces(store, size):
    first = store.put_bytes("k/a.bin", b"1" * size)
    second = store.put_bytes("k/a.bin", b"2" * size)
    assert isinstance(second, PendingWrite) and second.existing_etag == first.etag
    assert store.read("k/a.bin") == b"1" * size
    replaced = store.finish_pending(second)
    assert store.read("k/a.bin", etag=replaced.etag) == b"2" * size


@pytest.mark.parametrize("size", [100, MIN_PART_SIZE * 2 + 7], ids=["single-put", "multipart"])
def test_second_create_with_the_same_bytes_is_adopted(store, size):
    data = os.urandom(size)
    first = store.put_bytes("k/same.bin", data)
    pending = store.put_bytes("k/same.bin", data)
    assert isinstance(pending, PendingWrite) and pending.same_content
    kept = store.adopt_pending(pending)
    assert kept.etag == first.etag and store.read("k/same.bin", etag=first.etag) == data
    assert not store.put_bytes("k/same.bin", data[:-1] + b"!").same_content


def test_pending_does_not_replace_an_object_that_changed(store):
    store.put_bytes("k/a.bin", b"orphan")
    pending = store.put_bytes("k/a.bin", b"ours")
    store.delete("k/a.bin")
    store.put_bytes("k/a.bin", b"someone else")
    with pytest.raises(ObjectChangedError, match="k/a.bin"):
        store.finish_pending(pending)
    assert store.read("k/a.bin") == b"someone else"


def test_read_with_stale_etag_fails_naming_the_object(store):
    w = store.put_bytes("k/a.bin", b"x")
    store.delete("k/a.bin")
    store.put_bytes("k/a.bin", b"y")
    with pytest.raises(ObjectChangedError, match="k/a.bin"):
        store.read("k/a.bin", etag=w.etag)


def test_missing_bucket_is_a_clear_error(s3):
    st = S3Store(StoreSettings(bucket="no-such-bucket-here", endpoint_url=s3.endpoint_url, region="us-east-1",
                               access_key="testing", secret_key="testing", part_retries=0))
    with pytest.raises(StoreError, match=r"no-such-bucket-here.*NoSuchBucket.*does not exist"):
        st.put_bytes("k", b"x")


def test_unreachable_endpoint_is_a_clear_error():
    st = S3Store(StoreSettings(bucket="b", endpoint_url="http://127.0.0.1:9", region="us-east-1",
                               access_key="testing", secret_key="testing", part_retries=1, retry_backoff_ms=10))
    with pytest.raises(StoreError, match=r"s3://b/k"):
        st.put_bytes("k", b"x")


def test_one_gib_object_streams_with_bounded_memory(store):
    """1 GiB through multipart: the writer never buffers more than one part."""
    chunk = os.urandom(1 << 20)
    w = store.open_writer("big/one-gib.bin")
    max_buffered = 0
    for _ in range(1024):
        w.write(chunk)
        max_buffered = max(max_buffered, len(w.buf))
    res = w.commit()
    assert res.size == 1 << 30
    assert max_buffered < MIN_PART_SIZE
    assert len(w.parts) == (1 << 30) // MIN_PART_SIZE + 1
    assert store.head("big/one-gib.bin").size == 1 << 30
    assert store.read("big/one-gib.bin", byte_range=((1 << 30) - 5, (1 << 30) - 1)) == chunk[-5:]
    store.delete("big/one-gib.bin")
