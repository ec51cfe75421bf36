"""The S3 object store against a real S3-compatible HTTP endpoint (moto server): the shared store
contract plus what only S3 does (multipart ETags and uploads, retries and errors, streaming a large object in bounded memory)."""
import contextlib
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


@contextlib.contextmanager
def s3_calls(store, *ops, refuse=()):
    """The S3 calls ``store`` makes in the block (their request parameters), per operation name; an operation of
    ``refuse`` is answered
    with AccessDenied (403) before it is sent: the store's client is shared, so the hooks go once the block ends."""
    from botocore.awsrequest import AWSResponse

    calls = {op: [] for op in (*ops, *refuse)}
    hooks = []
    for op in calls:
        def record(op=op, params=None, **_kw):  # the call's API parameters, before botocore serialises them
            calls[op].append(dict(params or {}))

        hooks.append((f"before-parameter-build.s3.{op}", record))
        if op in refuse:
            def deny(**_kw):
                return AWSResponse("http://refused", 403, {}, None), {
                    "Error": {"Code": "AccessDenied", "Message": "Access Denied"},
                    "ResponseMetadata": {"HTTPStatusCode": 403}}

            hooks.append((f"before-call.s3.{op}", deny))
    for event, hook in hooks:
        store.client.meta.events.register(event, hook)
    try:
        yield {op: calls[op] for op in calls}
    finally:
        for event, hook in hooks:
            store.client.meta.events.unregister(event, hook)


def test_head_many_lists_each_directory_once_instead_of_a_head_per_key(store):
    d1 = [f"topics/t/partition=0/t+0+{o:010d}{ext}" for o in range(0, 40, 10) for ext in (".json", ".keys.avro")]
    d2 = [f"topics/t/partition=1/t+1+{o:010d}.json" for o in range(3)]
    for k in d1 + d2:
        store.put_bytes(k, b"x")
    with s3_calls(store, "HeadObject", "ListObjectsV2") as calls:
        got = store.head_many([*d1, *d2, "topics/t/partition=0/t+0+0000000005.json"])
    assert all(got[k] is not None and got[k].etag == store.head(k).etag for k in d1 + d2)
    assert got["topics/t/partition=0/t+0+0000000005.json"] is None
    assert (len(calls["HeadObject"]), len(calls["ListObjectsV2"])) == (0, 2)
    # each listing starts just before its directory's first key asked for, in pages sized to the keys (at least 100)
    assert sorted((c["Prefix"], c["StartAfter"], c["MaxKeys"]) for c in calls["ListObjectsV2"]) == [
        ("topics/t/partition=0/", "topics/t/partition=0/t+0+0000000000.jso", 100),
        ("topics/t/partition=1/", "topics/t/partition=1/t+1+0000000000.jso", 100)]


def test_head_many_lists_a_parent_once_for_many_partition_directories(store):
    """A restore's objects in PARENT_DIRS or more partition directories: one listing of their parent answers all,
    absent keys included."""
    from lakesink.store.s3 import PARENT_DIRS

    dirs = [f"topics/w/partition={p}/" for p in range(PARENT_DIRS + 2)]
    keys = [f"{d}w+{p}+0000000000{ext}" for p, d in enumerate(dirs) for ext in (".json", ".keys.avro")]
    for k in keys:
        store.put_bytes(k, k.encode())
    gone = f"{dirs[3]}w+3+0000000042.json"
    with s3_calls(store, "HeadObject", "ListObjectsV2") as calls:
        got = store.head_many([*keys, gone])
    assert {k: (v.size, v.etag) for k, v in got.items() if k != gone} == {
        k: (store.head(k).size, store.head(k).etag) for k in keys}
    assert got[gone] is None
    assert (len(calls["HeadObject"]), len(calls["ListObjectsV2"])) == (0, 1)
    assert calls["ListObjectsV2"][0]["Prefix"] == "topics/w/"


def test_head_many_lists_each_directory_when_the_parent_is_crowded(store, monkeypatch):
    """A sink batch's newest objects behind older ones in every partition directory: the parent's bounded
    listing reaches the first directories only, the rest are listed directory by directory (never the parent
    to its end), and every answer agrees with HEAD."""
    import lakesink.store.s3 as s3mod

    monkeypatch.setattr(s3mod, "PARENT_DIRS", 3)
    monkeypatch.setattr(s3mod, "LIST_PAGE", 2)
    old = [f"topics/c/partition={p}/c+{p}+{o:010d}.json" for p in range(4) for o in range(0, 60, 10)]
    new = [f"topics/c/partition={p}/c+{p}+{o:010d}{ext}" for p in range(4) for o in (90,) for ext in (".json", ".keys.avro")]
    for k in old + new:
        store.put_bytes(k, k.encode())
    asked = [*new, "topics/c/partition=2/c+2+0000000095.json"]
    with s3_calls(store, "HeadObject", "ListObjectsV2") as calls:
        got = store.head_many(asked)
    assert {k: (v.size, v.etag) if v else None for k, v in got.items()} == {
        k: ((store.head(k).size, store.head(k).etag) if store.head(k) else None) for k in asked}
    prefixes = [c["Prefix"] for c in calls["ListObjectsV2"]]
    assert prefixes.count("topics/c/") <= 1 + len(asked) // 2  # the parent's bound: 1 + keys // page pages
    assert {p for p in prefixes if p != "topics/c/"} <= {f"topics/c/partition={p}/" for p in range(4)}


def test_head_many_heads_what_a_crowded_directory_listing_would_not_reach(store, monkeypatch):
    """Objects not asked for between the asked keys: the listing stops after a page per LIST_PAGE keys, and the
    keys past it are HEADed (never a listing as long as the directory)."""
    import lakesink.store.s3 as s3mod

    monkeypatch.setattr(s3mod, "LIST_PAGE", 2)
    d = "topics/t/partition=0/"
    crowd = [f"{d}t+0+{o:010d}.json" for o in range(1, 11)]
    asked = [f"{d}t+0+0000000000.json", f"{d}t+0+0000000099.json"]
    for k in crowd + asked:
        store.put_bytes(k, k.encode())
    with s3_calls(store, "HeadObject", "ListObjectsV2") as calls:
        got = store.head_many(asked)
    assert {k: (v.size, v.etag) for k, v in got.items()} == {k: (store.head(k).size, store.head(k).etag)
                                                           for k in asked}
    assert len(calls["ListObjectsV2"]) == 3  # 2 + len(asked) // LIST_PAGE pages
    assert len(calls["HeadObject"]) == 1  # the key the three pages did not reach


def test_head_many_heads_each_key_where_listing_is_refused(store):
    keys = [f"topics/t/partition=0/t+0+{o:010d}.json" for o in range(3)]
    for k in keys[:2]:
        store.put_bytes(k, b"x")
    with s3_calls(store, "HeadObject", refuse=("ListObjectsV2",)) as calls:
        got = store.head_many(keys)
    assert [got[k] is not None for k in keys] == [True, True, False]
    assert (len(calls["ListObjectsV2"]), len(calls["HeadObject"])) == (1, 3)


def test_listing_and_head_dates_parsed_without_dateutil_at_the_same_instants(store, monkeypatch):
    """The store's client parses S3's dates (ISO 8601 in a listing, the HTTP date of HeadObject) with
    ``lakesink.credentials.parse_timestamp``, never botocore's ``dateutil`` path, and gets the instants botocore's own
    parser gives for the same strings."""
    import botocore.parsers
    import botocore.utils
    import dateutil.parser

    store.put_bytes("dates/a.json", b"x")
    raw: list = []
    import lakesink.credentials as creds
    mine = creds.parse_timestamp
    monkeypatch.setattr(creds, "parse_timestamp", lambda v: raw.append(v) or mine(v))
    used = []
    real = dateutil.parser.parse
    monkeypatch.setattr(dateutil.parser, "parse", lambda *a, **k: used.append(a) or real(*a, **k))
    # a new client of a new Session: what a worker's first store gets
    monkeypatch.setattr(creds, "_SESSIONS", {})
    monkeypatch.setattr(creds, "_CLIENTS", {})
    fresh = S3Store(store.settings)
    listed = list(fresh.list("dates/"))
    head = fresh.head("dates/a.json")
    assert used == [] and len(raw) == 2, (used, raw)
    assert raw[0].endswith("Z") and raw[1].endswith(" GMT")
    assert listed[0].last_modified == botocore.utils.parse_timestamp(raw[0]).timestamp()
    assert head.last_modified == botocore.utils.parse_timestamp(raw[1]).timestamp()
    assert botocore.parsers.DEFAULT_TIMESTAMP_PARSER is botocore.utils.parse_timestamp  # botocore's own left as it is
