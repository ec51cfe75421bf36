"""A path manifest of 100,000 object rows on delta-rs: how long the sink's plan and commit of one batch take.

    .venv/bin/python bench/manifest_scale.py [--rows 100000] [--commits 1000] [--s3-commits 200] [--batch-rows 10]
                                             [--repeat 5] [--no-s3] [--work DIR] [--out bench/results/manifest.md]

Builds the table once per destination the way a long-running job does: ``--rows`` object rows in ``--commits``
real ``DeltaRsManifest.commit`` calls (``--s3-commits`` on S3, where moto takes ~1 s a commit) (one job, 8 topics x 4 partitions,
every row with a metadata side file), into a temp dir on the local filesystem and into a bucket of a moto S3
endpoint in its own process (``lakesink.devstack.s3``; ``--no-s3`` skips it). Then, ``--repeat`` times each
(median printed), on that table:

* **plan, cold**: a fresh ``DeltaRsManifest`` (as a ``sink --once`` process has) and its ``snapshot(job)``:
  next offsets and next batch id;
* **plan, warm**: ``snapshot(job)`` again on the same object after one more commit (``--continuous``);
* **owners**: ``committed_owners(keys)`` of ``--batch-rows`` keys (what the sink asks when an upload met an
  existing object);
* **commit**: ``commit(job, next_batch, ...)`` of ``--batch-rows`` rows (txn check, write, log entry);
* **plan + commit**: cold plan and commit, the whole manifest cost of a ``sink --once`` batch.

Also prints the ``_delta_log`` shape (JSON commits, checkpoints) the reader faces. Target (issue #30 item 5):
plan and commit each < 1 s. Runs no Spark and no broker.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

JOB = "bench"
TOPICS, PARTITIONS = 8, 4
TARGET_S = 1.0


def rows_for(batch: int, n: int, next_offset: dict[tuple[str, int], int], base_ms: int) -> list:
    from lakesink.manifest.rows import SideFile, object_row

    out = []
    for i in range(n):
        k = batch * n + i
        topic, part = f"orders-{k % TOPICS}", (k // TOPICS) % PARTITIONS
        first = next_offset.get((topic, part), 0)
        last = first + 999
        next_offset[(topic, part)] = last + 1
        key = f"topics/{topic}/partition={part}/{topic}+{part}+{first:010d}.json"
        out.append(object_row(topic, part, first, last, first_offset=first, last_offset=last, record_count=1000,
                              encoded_partition=f"partition={part}", object_key=key, object_uri=f"s3://b/{key}",
                              side_files=(SideFile("metadata", key[:-5] + ".metadata.avro", None, None, 900),),
                              format="json", compression=None, size_bytes=200_000 + k % 5000, etag=f"{k:032x}",
                              version_id=None, min_timestamp_ms=base_ms + k * 800,
                              max_timestamp_ms=base_ms + k * 800 + 700, kafka_cluster_id="bench-cluster",
                              topic_id=f"tid-{k % TOPICS}"))
    return out


def build(location: str, s3, commits: int, per_commit: int) -> tuple[float, dict]:
    from lakesink.manifest.deltars import DeltaRsManifest

    m = DeltaRsManifest(location, s3)
    m.ensure()
    offsets: dict[tuple[str, int], int] = {}
    base_ms = int(time.time() * 1000) - 86_400_000
    t0 = time.perf_counter()
    for b in range(commits):
        m.commit(JOB, b, f"build-{b}", rows_for(b, per_commit, offsets, base_ms))
        if b and b % 100 == 0:
            log(f"  {b} commits, {time.perf_counter() - t0:.0f}s")
    return time.perf_counter() - t0, offsets


def log_shape(m) -> str:
    from deltalake import DeltaTable

    t = DeltaTable(m.uri, storage_options=m.storage_options or None)
    fs, base = _fs(m)
    names = [os.path.basename(p) for p in fs(base)]
    js = sum(n.endswith(".json") for n in names)
    cps = sum(".checkpoint" in n and n.endswith(".parquet") for n in names)
    return f"version {t.version()}, {js} JSON commits and {cps} checkpoints in _delta_log"


def _fs(m):
    import pyarrow.fs as pafs

    if m.uri.startswith("s3://"):
        o = m.storage_options
        fs = pafs.S3FileSystem(access_key=o.get("aws_access_key_id") or o.get("AWS_ACCESS_KEY_ID"),
                               secret_key=o.get("aws_secret_access_key") or o.get("AWS_SECRET_ACCESS_KEY"),
                               endpoint_override=o.get("aws_endpoint_url") or o.get("AWS_ENDPOINT_URL"),
                               region="us-east-1")
        base = m.uri[len("s3://"):] + "/_delta_log"
    else:
        fs, base = pafs.LocalFileSystem(), m.uri + "/_delta_log"
    return (lambda b: [i.path for i in fs.get_file_info(pafs.FileSelector(b))]), base


def measure(location: str, s3, offsets: dict, repeat: int, batch_rows: int) -> dict[str, list[float]]:
    from lakesink.manifest.deltars import DeltaRsManifest

    out: dict[str, list[float]] = {"plan, cold": [], "plan, warm": [], "owners": [], "commit": [],
                                   "plan + commit": []}
    base_ms = int(time.time() * 1000)
    m = DeltaRsManifest(location, s3)
    m.snapshot(JOB)
    for r in range(repeat):
        t0 = time.perf_counter()
        cold = DeltaRsManifest(location, s3)
        snap = cold.snapshot(JOB)
        t1 = time.perf_counter()
        rows = rows_for(10_000 + r, batch_rows, offsets, base_ms)
        t2 = time.perf_counter()
        cold.commit(JOB, snap.next_batch_id, f"measure-{r}", rows)
        t3 = time.perf_counter()
        out["plan, cold"].append(t1 - t0)
        out["commit"].append(t3 - t2)
        out["plan + commit"].append((t1 - t0) + (t3 - t2))
        t0 = time.perf_counter()
        warm = m.snapshot(JOB)
        out["plan, warm"].append(time.perf_counter() - t0)
        assert warm.next_batch_id == snap.next_batch_id + 1, (warm.next_batch_id, snap.next_batch_id)
        keys = {row.object_key for row in rows}
        t0 = time.perf_counter()
        owners = cold.committed_owners(keys)
        out["owners"].append(time.perf_counter() - t0)
        assert set(owners) == keys, owners
    return out


def log(msg: str) -> None:
    print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--s3-commits", type=int, default=200)
    ap.add_argument("--work", type=Path, default=None, help="build the tables here and keep them")
    ap.add_argument("--batch-rows", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-s3", action="store_true")
    ap.add_argument("--out", type=Path, default=None, help="append the results table (markdown) to this file")
    a = ap.parse_args(argv)

    work = a.work or Path(tempfile.mkdtemp(prefix="lakesink-manifest-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    dests: list[tuple[str, str, object, int]] = [("local", str(work / "manifest"), None, a.commits)]
    s3ep = None
    if not a.no_s3:
        from lakesink.devstack.s3 import S3Endpoint

        s3ep = S3Endpoint()
        s3ep.spawn(work / "s3.log")  # moto in its own process
        s3ep.create_bucket("bench")
        dests.append(("S3 (moto)", "s3a://bench/manifest", s3ep.s3_settings(), a.s3_commits))
    results = []
    try:
        for name, location, s3, commits in dests:
            per_commit = a.rows // commits
            log(f"{name}: {commits} commits of {per_commit} rows to {location}")
            t_build, offsets = build(location, s3, commits, per_commit)
            from lakesink.manifest.deltars import DeltaRsManifest

            shape = log_shape(DeltaRsManifest(location, s3))
            log(f"{name}: built in {t_build:.0f}s ({t_build / commits * 1000:.0f} ms/commit); {shape}")
            times = measure(location, s3, offsets, a.repeat, a.batch_rows)
            results.append((name, commits, per_commit, t_build, shape,
                            {k: statistics.median(v) for k, v in times.items()}))
    finally:
        if s3ep is not None:
            s3ep.stop()
    load1 = os.getloadavg()

    cols = ["plan, cold", "plan, warm", "owners", "commit", "plan + commit"]
    lines = [f"{a.rows:,} object rows (8 topics x 4 partitions, one job); "
             f"a batch of {a.batch_rows} rows; median of {a.repeat}, seconds (target < {TARGET_S:.0f} s each). "
             f"load average {load0[0]:.1f} -> {load1[0]:.1f}; {platform.python_version()}, "
             f"deltalake {__import__('deltalake').__version__}",
             "", "| table | built as | build s/commit | log | " + " | ".join(cols) + " |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in cols) + " |"]
    for name, commits, per_commit, t_build, shape, med in results:
        lines.append(f"| {name} | {commits} commits of {per_commit} | {t_build / commits:.3f} | {shape} | "
                     + " | ".join(f"{med[c]:.3f}" for c in cols) + " |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        with a.out.open("a") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
