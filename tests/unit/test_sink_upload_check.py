"""The sink's check of its uploads just before the manifest commit (issue 26 item 6a), on a directory store and a
local delta-rs manifest (no services): an upload replaced by another object is a lost race (FencedError, exit 4);
an upload that is gone (``lakesink vacuum --execute`` with a short retention, another deleter) is
UploadMissingError (exit 5) naming the object -- unless another run committed the batch meanwhile (exit 4)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from lakesink.driver.sink import SinkJob
from lakesink.errors import EXIT_FENCED, EXIT_UNREACHABLE, FencedError, UploadMissingError
from lakesink.manifest.deltars import DeltaRsManifest
from lakesink.manifest.rows import SideFile, advance_row, object_row
from lakesink.store import LocalStore, S3Settings, StoreSettings


@pytest.fixture
def job(tmp_path) -> SinkJob:
    """A SinkJob with only what the check uses: a store, a manifest, the job's name and the run id."""
    j = SinkJob.__new__(SinkJob)  # no Kafka or Spark: the check needs neither
    j.cfg = SimpleNamespace(name="j")
    j.run_id = "run-1"
    j.store = LocalStore(StoreSettings(bucket="bkt", s3=S3Settings(f"file://{tmp_path}")))
    j.manifest = DeltaRsManifest(str(tmp_path / "manifest"))
    j.manifest.ensure()
    return j


def uploaded(job: SinkJob, key: str, side: str | None = None):
    """The manifest row of an object this run uploaded (and, with ``side``, its keys side file)."""
    w = job.store.put_bytes(key, b'{"i": 1}\n')
    sides = ()
    if side is not None:
        s = job.store.put_bytes(side, b"k\n")
        sides = (SideFile("keys", side, s.etag, None, s.size),)
    return object_row("t", 0, 0, 0, first_offset=0, last_offset=0, record_count=1, encoded_partition="partition=0",
                      object_key=key, object_uri=job.store.uri(key), side_files=sides, format="json",
                      compression=None, size_bytes=w.size, etag=w.etag, version_id=None, min_timestamp_ms=None,
                      max_timestamp_ms=None)


def test_uploads_that_are_all_there_pass(job):
    job.verify_uploads([uploaded(job, "t/a.json", side="t/a.keys"), advance_row("t", 1, 0, 9)], 0)


def test_a_deleted_upload_is_upload_missing_exit_5_naming_it(job):
    rows = [uploaded(job, "t/a.json"), uploaded(job, "t/b.json", side="t/b.keys")]
    job.store.delete("t/b.json")
    job.store.delete("t/b.keys")
    with pytest.raises(UploadMissingError) as e:
        job.verify_uploads(rows, 0)
    msg = str(e.value)
    assert e.value.exit_code == EXIT_UNREACHABLE == 5
    assert msg.startswith(f"{job.store.uri('t/b.json')} (and 1 more of its 3 objects), uploaded by job 'j' batch 0 "
                          f"(run run-1), is gone before the commit"), msg
    assert "`lakesink vacuum --execute` with a --retention shorter than this batch" in msg, msg
    assert "another deleter" in msg and "nothing was committed" in msg and "next run archives" in msg, msg
    assert "replaced by another run" not in msg and "\n" not in msg, msg


def test_an_upload_replaced_by_other_bytes_stays_a_lost_race_exit_4(job):
    rows = [uploaded(job, "t/a.json"), uploaded(job, "t/b.json")]
    job.store.delete("t/a.json")  # one gone and one replaced: the replacement says another run is at work
    job.store.delete("t/b.json")
    job.store.put_bytes("t/b.json", b'{"i": 2}\n')  # another run's bytes in its place
    with pytest.raises(FencedError) as e:
        job.verify_uploads(rows, 0)
    assert e.value.exit_code == EXIT_FENCED == 4
    assert "t/b.json was replaced by another run of job 'j'" in str(e.value), str(e.value)


def test_a_deleted_upload_of_a_batch_another_run_committed_stays_a_lost_race_exit_4(job):
    rows = [uploaded(job, "t/a.json")]
    job.store.delete("t/a.json")
    job.manifest.commit("j", 0, "run-other", [advance_row("t", 0, 0, 0)])  # another run took batch 0
    with pytest.raises(FencedError) as e:
        job.verify_uploads(rows, 0)
    assert "job 'j' batch 0 was committed by another run" in str(e.value), str(e.value)
    # a later batch of the same job (the manifest holds batch 0 only): the deletion is the fault again
    job.store.put_bytes("t/a.json", b'{"i": 1}\n')
    job.store.delete("t/a.json")
    with pytest.raises(UploadMissingError):
        job.verify_uploads(rows, 1)


class LaggingListings(LocalStore):
    """A store whose batched lookup (a listing, on S3) lags behind its writes: it misses one key and shows another
    with the ETag it had before; head() tells the truth."""

    def __init__(self, settings, stale: dict):
        super().__init__(settings)
        self.stale, self.batched = stale, []

    def head_many(self, keys):
        keys = list(keys)
        self.batched.append(keys)
        got = super().head_many(keys)
        for key, etag in self.stale.items():
            got[key] = None if etag is None else SimpleNamespace(key=key, etag=etag)
        return got


def test_the_check_reads_the_uploads_in_one_batched_lookup_and_confirms_what_it_doubts(job, tmp_path):
    """verify_uploads asks the store once for every file (S3: a listing per directory), and a listing that lags
    (a key it misses, an ETag from before) is confirmed with head() before anything fails."""
    job.store = LaggingListings(job.store.settings, {"t/a.json": None, "t/b.keys": "0" * 32})
    rows = [uploaded(job, "t/a.json", side="t/a.keys"), uploaded(job, "t/b.json", side="t/b.keys")]
    job.verify_uploads(rows, 0)
    assert [sorted(k) for k in job.store.batched] == [["t/a.json", "t/a.keys", "t/b.json", "t/b.keys"]]
    job.store.delete("t/a.json")  # gone for real: head() confirms the listing, and the check fails
    with pytest.raises(UploadMissingError, match="t/a.json"):
        job.verify_uploads(rows, 0)
