"""DeltaRsManifest at scale (issue #30 item 5), on a local path manifest (delta-rs only, no services): the commit
path writes a checkpoint every ``CHECKPOINT_INTERVAL`` commits and cleans expired log entries; a reader after a
checkpoint (and after the cleanup) gets the same snapshot and fencing; a snapshot reads only the data files the
log's statistics cannot rule out. The timings are in bench/manifest_scale.py, not here."""
from __future__ import annotations

import os
import time

import pytest
from deltalake import DeltaTable

from lakesink.errors import FencedError
from lakesink.manifest import deltars
from lakesink.manifest.deltars import DeltaRsManifest
from lakesink.manifest.rows import advance_row

N = 5  # the checkpoint interval of these tests' tables


@pytest.fixture
def manifest(tmp_path, monkeypatch):
    monkeypatch.setattr(deltars, "CHECKPOINT_INTERVAL", N)
    m = DeltaRsManifest(str(tmp_path / "m"))
    m.ensure()
    return m


def commit(m: DeltaRsManifest, batch: int, job: str = "j") -> None:
    m.commit(job, batch, f"run-{batch}", [advance_row("t", p, 10 * batch, 10 * batch + 9) for p in (0, 1)])


def log_files(m: DeltaRsManifest, suffix: str) -> list[str]:
    return sorted(f for f in os.listdir(os.path.join(m.uri, "_delta_log")) if f.endswith(suffix))


def state(m: DeltaRsManifest, job: str = "j") -> tuple[dict, int, int | None]:
    snap = DeltaRsManifest(m.location).snapshot(job)  # a fresh reader
    return ({k: s.next_offset for k, s in snap.partitions.items()}, snap.last_batch_id,
            DeltaTable(m.uri).transaction_version(job))


def test_the_commit_path_writes_a_checkpoint_every_interval(manifest):
    for b in range(N - 2):  # versions 1 .. N-2 (the creation is version 0)
        commit(manifest, b)
    assert log_files(manifest, ".checkpoint.parquet") == []
    commit(manifest, N - 2)  # version N-1: the table's N-th commit
    assert log_files(manifest, ".checkpoint.parquet") == [f"{N - 1:020d}.checkpoint.parquet"]
    for b in range(N - 1, 2 * N - 1):  # versions N .. 2N-1
        commit(manifest, b)
    assert log_files(manifest, ".checkpoint.parquet") == [f"{N - 1:020d}.checkpoint.parquet",
                                                          f"{2 * N - 1:020d}.checkpoint.parquet"]
    assert DeltaTable(manifest.uri).metadata().configuration["delta.checkpointInterval"] == str(N)


def test_a_reader_after_a_checkpoint_gets_the_same_snapshot_and_fencing(manifest):
    for b in range(N - 2):
        commit(manifest, b)
    before = state(manifest)
    assert before == ({("t", 0): 10 * (N - 2), ("t", 1): 10 * (N - 2)}, N - 3, N - 3)
    commit(manifest, N - 2)  # crosses the checkpoint
    commit(manifest, N - 1)
    assert log_files(manifest, ".checkpoint.parquet")
    after = state(manifest)
    assert after == ({("t", 0): 10 * N, ("t", 1): 10 * N}, N - 1, N - 1)
    # without the JSON commits the checkpoint replaces, a reader still has every row and transaction version
    cp = int(log_files(manifest, ".checkpoint.parquet")[-1].split(".")[0])
    for f in log_files(manifest, ".json"):
        if int(f.split(".")[0]) <= cp:
            os.remove(os.path.join(manifest.uri, "_delta_log", f))
    assert state(manifest) == after
    with pytest.raises(FencedError, match="already committed"):  # a zombie run's commit of an old batch
        commit(DeltaRsManifest(manifest.location), N - 2)
    with pytest.raises(FencedError):
        commit(DeltaRsManifest(manifest.location), N - 1)
    commit(DeltaRsManifest(manifest.location), N)  # the next batch commits
    assert state(manifest)[1:] == (N, N)


def test_log_cleanup_keeps_what_time_travel_within_the_retention_needs(manifest):
    for b in range(2 * N):  # versions 1 .. 2N, checkpoints at N-1 and 2N-1
        commit(manifest, b)
    log_dir = os.path.join(manifest.uri, "_delta_log")
    old = time.time() - 40 * 86400  # older than the default delta.logRetentionDuration (30 days)
    expired = range(0, N + 2)
    for f in os.listdir(log_dir):
        if f[:20].isdigit() and int(f[:20]) in expired:
            os.utime(os.path.join(log_dir, f), (old, old))
    for b in range(2 * N, 3 * N):  # up to the next checkpoint (3N-1), which cleans up
        commit(manifest, b)
    left = {int(f[:20]) for f in log_files(manifest, ".json")}
    assert not left & set(range(0, N - 1))  # expired and not needed: deleted
    assert set(range(N - 1, 3 * N + 1)) <= left  # the checkpoint N-1 onwards: versions N..N+1 still need it
    for v in range(N, 3 * N + 1):  # every version within the retention (and the expired ones after a kept
        DeltaTable(manifest.uri, version=v)  # checkpoint) can still be read
    assert state(manifest)[1:] == (3 * N - 1, 3 * N - 1)


def test_a_cold_snapshot_reads_only_the_files_the_statistics_cannot_rule_out(manifest):
    for b in range(6):
        commit(manifest, b)
    manifest.commit("other", 0, "o", [advance_row("t", 0, 0, 999)])  # another job's file: ruled out by job
    newest = {p for p in DeltaTable(manifest.uri).file_uris()}
    commit(manifest, 6)
    newest = set(DeltaTable(manifest.uri).file_uris()) - newest
    want = ({("t", 0): 70, ("t", 1): 70}, 6)
    for uri in set(DeltaTable(manifest.uri).file_uris()) - newest:
        os.remove(uri)  # every older file is covered by the newest one: a reader that opened any would fail
    snap = DeltaRsManifest(manifest.location).snapshot("j")
    assert ({k: s.next_offset for k, s in snap.partitions.items()}, snap.last_batch_id) == want


def test_a_snapshot_still_reads_files_its_statistics_do_not_settle(manifest):
    # batch 1 only advances partition 1: partition 0's offset must come from batch 0's file, which is read
    commit(manifest, 0)
    manifest.commit("j", 1, "r", [advance_row("t", 1, 10, 19), advance_row("t", 3, 0, 4)])
    manifest.commit("other", 0, "o", [advance_row("t", 0, 0, 999)])
    manifest.commit("j", 2, "r", [advance_row("u", 0, 0, 4)])
    snap = DeltaRsManifest(manifest.location).snapshot("j")
    assert {k: s.next_offset for k, s in snap.partitions.items()} == {("t", 0): 10, ("t", 1): 20, ("t", 3): 5,
                                                                       ("u", 0): 5}
    assert snap.last_batch_id == 2


def test_a_plan_and_commit_load_the_table_once_and_still_see_other_writers(manifest, monkeypatch):
    a, b = DeltaRsManifest(manifest.location), DeltaRsManifest(manifest.location)
    loads = []
    real = DeltaRsManifest._table
    monkeypatch.setattr(DeltaRsManifest, "_table", lambda self: loads.append(self) or real(self))
    for batch in range(3):  # a sink's loop: plan, commit
        assert a.snapshot("j").next_batch_id == batch
        commit(a, batch)
    assert loads.count(a) == 1  # later plans and commits read only the new log entries
    commit(b, 3)  # another run's commit, after a loaded the table
    with pytest.raises(FencedError, match="manifest holds batch 3"):
        commit(a, 3)  # a zombie of batch 3 on the loaded table: refused
    assert a.snapshot("j").next_batch_id == 4
    commit(a, 4)
    assert state(manifest)[1:] == (4, 4)
