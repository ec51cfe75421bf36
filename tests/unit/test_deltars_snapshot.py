"""DeltaRsManifest.snapshot on a local path manifest (delta-rs only, no services): incremental over the table's
data files, and the same answer as a fresh reader after other writers' commits, other jobs' rows and a compaction."""
from __future__ import annotations

import os

from deltalake import DeltaTable

from lakesink.manifest.deltars import DeltaRsManifest
from lakesink.manifest.rows import advance_row


def rows(start: int, n: int = 10, parts=(0, 1), topic: str = "t"):
    return [advance_row(topic, p, start, start + n - 1) for p in parts]


def offsets(m: DeltaRsManifest, job: str = "j") -> tuple[dict, int]:
    snap = m.snapshot(job)
    return {k: s.next_offset for k, s in snap.partitions.items()}, snap.last_batch_id


def test_snapshot_follows_its_own_and_other_writers_commits(tmp_path):
    loc = str(tmp_path / "m")
    a, b = DeltaRsManifest(loc), DeltaRsManifest(loc)
    a.ensure()
    assert offsets(a) == ({}, -1)
    a.commit("j", 0, "r1", rows(0))
    assert offsets(a) == ({("t", 0): 10, ("t", 1): 10}, 0)
    b.commit("j", 1, "r2", rows(10, parts=(0,)))          # another run's commit, seen by a's next snapshot
    b.commit("other", 0, "r3", rows(0, n=500))             # another job's rows never count
    a.commit("j", 2, "r1", [advance_row("u", 0, 0, 4)])
    want = ({("t", 0): 20, ("t", 1): 10, ("u", 0): 5}, 2)
    assert offsets(a) == want
    assert offsets(DeltaRsManifest(loc)) == want           # a fresh reader agrees
    assert offsets(a, "other") == ({("t", 0): 500, ("t", 1): 500}, 0)


def test_snapshot_reads_each_data_file_once(tmp_path):
    loc = str(tmp_path / "m")
    m = DeltaRsManifest(loc)
    m.ensure()
    for i in range(5):
        m.commit("j", i, "r", rows(10 * i))
        offsets(m)
    # every data file so far was folded in: removing them from disk must not matter to this reader, which
    # proves a snapshot does not rescan them (a fresh reader, which must read them, fails)
    seen = DeltaTable(m.uri).file_uris()
    m.commit("j", 5, "r", rows(50))
    for uri in seen:
        os.remove(uri)
    assert offsets(m) == ({("t", 0): 60, ("t", 1): 60}, 5)


def test_snapshot_after_a_compaction_is_unchanged(tmp_path):
    loc = str(tmp_path / "m")
    m = DeltaRsManifest(loc)
    m.ensure()
    for i in range(4):
        m.commit("j", i, "r", rows(10 * i))
    before = offsets(m)
    DeltaTable(m.uri).optimize.compact()                   # rewrites the files (same rows, new paths)
    m.commit("j", 4, "r", rows(40, parts=(1,)))
    after = ({("t", 0): 40, ("t", 1): 50}, 4)
    assert before == ({("t", 0): 40, ("t", 1): 40}, 3)
    assert offsets(m) == after and offsets(DeltaRsManifest(loc)) == after
