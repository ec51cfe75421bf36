"""The local (file://) object store: the shared store contract plus what only a directory store does."""
import pytest

from lakesink.errors import StoreError
from lakesink.store import TEMP_MARKER, LocalStore, S3Settings, StoreSettings
from support.store_contract import StoreContract


@pytest.fixture
def store(tmp_path):
    return LocalStore(StoreSettings(bucket="bkt", s3=S3Settings(f"file://{tmp_path}")))


class TestLocalStore(StoreContract):
    """``StoreContract`` against a directory store (module ``store`` fixture, on ``tmp_path``)."""


def test_keys_cannot_escape_the_root(store):
    with pytest.raises(StoreError, match="escapes"):
        store.open_writer("../outside.bin")


def test_objects_are_files_under_root_bucket_key(store, tmp_path):
    w = store.put_bytes("a/b.bin", b"x")
    assert (tmp_path / "bkt" / "a" / "b.bin").read_bytes() == b"x"
    assert w.uri == f"file://{tmp_path}/bkt/a/b.bin"


def test_a_pending_write_is_a_temp_file_until_finished(store, tmp_path):
    store.put_bytes("a/b.bin", b"orphan")
    p = store.put_bytes("a/b.bin", b"ours")
    staged = [f.name for f in (tmp_path / "bkt" / "a").iterdir() if TEMP_MARKER in f.name]
    assert len(staged) == 1 and p.token.endswith(staged[0])
    store.finish_pending(p)
    assert [f.name for f in (tmp_path / "bkt" / "a").iterdir()] == ["b.bin"]
