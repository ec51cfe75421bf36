"""``lakesink erase`` cost: an erase touching 1% of the objects of a 1M-record archive, against rewriting those
objects with the format writers alone.

    .venv/bin/python bench/erase.py [--records 1000000] [--per-object 1000] [--touch 0.01] [--partitions 1]
                                    [--predicate key|partition] [--workers 2]

No broker, no Spark: the archive (JSON values, keys and headers side files, record metadata; ``--partitions``
partitions) is written straight with the format writers to a local directory (``store.url=file://``) and committed
to a local delta-rs manifest, as the sink would, so the numbers are compute-bound. Then:

* **erase**: ``erase(cfg, where, execute=True)`` (the plan on the driver) with one record in each of ``touch`` x
  objects: ``--predicate key``: ``key IN (...)`` (the manifest can rule nothing out: the keys side files of every
  object are read); ``--predicate partition``: ``partition = 0 AND key IN (...)``, the touched objects all in
  partition 0 (the manifest rules the other partitions out); then the staging, the two manifest commits, the
  replacements;
* **dry run**: the same erase without ``--execute`` (the plan alone; after one untimed warm-up dry run), on the
  driver and on ``--workers`` local worker processes (the CLI's engine);
* **writers alone** (the baseline): the touched objects' files read and written again without those records by
  the format writers (:func:`lakesink.executor.rewrite.rewrite_file`), and put back: no plan, no manifest.

Ratios = seconds / writers-alone seconds. Each path runs once. The dry run's objects and counts are checked
against the plan that reads every object (no pruning).
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TOPIC = "orders"


def build_archive(work: str, records: int, per_object: int, partitions: int = 1) -> dict:
    from lakesink import wiring
    from lakesink.config import SinkConfig
    from lakesink.objects import formats
    from lakesink.objects.formats.base import RecordView
    from lakesink.objects.formats.metadata import MetadataFormat
    from lakesink.objects.records import SinkRecord
    from lakesink.manifest.rows import SideFile, object_row
    from lakesink.store import open_store

    raw = {"name": "bench-erase", "topics": TOPIC, "format.class": "json", "flush.size": str(per_object),
           "s3.bucket.name": "bench", "store.url": f"file://{work}/store", "manifest.location": f"{work}/manifest",
           "kafka.bootstrap.servers": "localhost:9", "store.kafka.keys": "true", "store.kafka.headers": "true",
           "keys.format.class": "json", "headers.format.class": "json"}
    cfg = SinkConfig.from_dict(raw)
    store = open_store(wiring.store_settings(cfg))
    fmt = formats.create("json")
    views = {"value": (fmt, RecordView.VALUE, ".json"), "keys": (fmt, RecordView.KEYS, ".keys.json"),
             "headers": (fmt, RecordView.HEADERS, ".headers.json"),
             "metadata": (MetadataFormat(), RecordView.METADATA, ".metadata.avro")}
    rows = []
    base_ts = int(time.time() * 1000) - 86_400_000
    per_partition = records // partitions
    for p, first in ((p, f) for p in range(partitions) for f in range(0, per_partition, per_object)):
        last = min(per_partition, first + per_object) - 1
        g = p * per_partition  # keys k<g + offset>: unique over the archive
        recs = [SinkRecord(TOPIC, p, o, base_ts + o, f"k{g + o}".encode(),
                           {"order_id": g + o, "customer": f"c{(g + o) % 9973}", "note": "x" * 120},
                           headers=(("src", b"bench"),))
                for o in range(first, last + 1)]
        stem = f"topics/{TOPIC}/partition={p}/{TOPIC}+{p}+{first:010d}"
        written = {}
        for view, (f, rv, ext) in views.items():
            out = io.BytesIO()
            w = f.open_writer(out, rv)
            w.write_many(recs)
            w.close()
            written[view] = (stem + ext, store.put_bytes(stem + ext, out.getvalue()))
        sides = tuple(SideFile(v, k, r.etag, r.version_id, r.size) for v, (k, r) in written.items() if v != "value")
        key, value = written["value"]
        rows.append(object_row(TOPIC, p, first, last, first_offset=first, last_offset=last,
                               record_count=last - first + 1, encoded_partition=f"partition={p}", object_key=key,
                               object_uri=store.uri(key), side_files=sides, format="json", compression="none",
                               size_bytes=value.size, etag=value.etag, version_id=value.version_id,
                               min_timestamp_ms=base_ts + first, max_timestamp_ms=base_ts + last))
    manifest = wiring.manifest(cfg)
    manifest.ensure()
    manifest.commit(cfg.name, 0, uuid.uuid4().hex, rows)
    return {"cfg": cfg, "raw": raw, "rows": rows}


def writers_alone(cfg, rows, offsets: set[tuple[int, int]]) -> float:
    """Seconds to rewrite the touched objects' files without ``offsets`` ((partition, offset)) with the format
    writers, and put them."""
    from lakesink import wiring
    from lakesink.executor.rewrite import rewrite_file
    from lakesink.objects import formats
    from lakesink.objects.formats.base import RecordView
    from lakesink.objects.formats.metadata import MetadataFormat
    from lakesink.store import open_store

    store = open_store(wiring.store_settings(cfg))
    fmt = formats.create("json")
    t0 = time.perf_counter()
    for r in rows:
        span = range(r.first_offset, r.last_offset + 1)
        keep = [i for i, o in enumerate(span) if (r.kafka_partition, o) not in offsets]
        for key, view, f in [(r.object_key, RecordView.VALUE, fmt)] + [
                (s.key, RecordView(s.view), MetadataFormat() if s.view == "metadata" else fmt) for s in r.side_files]:
            new, _ = rewrite_file(f, view, store.read(key), keep, list(span), TOPIC, r.kafka_partition)
            store.put_bytes(key + ".baseline", new)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--per-object", type=int, default=1000)
    ap.add_argument("--touch", type=float, default=0.01, help="fraction of the objects the erase touches")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--predicate", choices=("key", "partition"), default="key",
                    help="key: key IN (...); partition: partition = 0 AND key IN (...), touched objects in partition 0")
    ap.add_argument("--workers", type=int, default=2, help="local worker processes of the second dry run")
    args = ap.parse_args()
    from lakesink import wiring
    from lakesink.driver.erase import erase
    from lakesink.driver.erase_plan import plan
    from lakesink.manifest.queries import where_predicate
    from lakesink.manifest.rows import live_objects
    from lakesink.runners.local import LocalRunner

    work = tempfile.mkdtemp(prefix="bench-erase-")
    try:
        t0 = time.perf_counter()
        a = build_archive(work, args.records, args.per_object, args.partitions)
        built = time.perf_counter() - t0
        n_objects = len(a["rows"])
        n_touch = max(1, round(n_objects * args.touch))
        pool = [r for r in a["rows"] if args.predicate == "key" or r.kafka_partition == 0]
        touched = pool[::max(1, len(pool) // n_touch)][:n_touch]
        per_partition = args.records // args.partitions
        offsets = {(r.kafka_partition, r.first_offset + (r.record_count // 2)) for r in touched}  # the middle one
        keys = ", ".join(f"'k{p * per_partition + o}'" for p, o in sorted(offsets))
        where = f"key IN ({keys})" if args.predicate == "key" else f"partition = 0 AND key IN ({keys})"
        base = writers_alone(a["cfg"], touched, offsets)
        erase(a["cfg"], where)  # warm-up: imports, DuckDB, the manifest's first read
        t0 = time.perf_counter()
        dry = erase(a["cfg"], where)
        plan_s = time.perf_counter() - t0
        assert dry.records == len(offsets), dry
        with LocalRunner(args.workers) as runner:
            erase(a["cfg"], where, runner=runner)  # warm-up: the workers' imports
            t0 = time.perf_counter()
            on_workers = erase(a["cfg"], where, runner=runner)
            workers_s = time.perf_counter() - t0
        # the same objects and counts as the plan reading every object
        cfg = a["cfg"]
        rows = sorted(live_objects(wiring.manifest(cfg).arrow(job=cfg.name).to_pylist()),
                      key=lambda r: (r["topic"], r["kafka_partition"], r["first_offset"]))
        full = plan(wiring.task_parts(cfg), rows, where_predicate(where), where, pruning=False)
        def same(ms):
            return [(m.row["object_key"], m.offsets, m.records) for m in ms]
        assert same(dry.matched) == same(full.matched) == same(on_workers.matched), "pruned and full plans differ"
        t0 = time.perf_counter()
        rep = erase(a["cfg"], where, execute=True)
        erase_s = time.perf_counter() - t0
        assert (rep.records, rep.committed) == (len(offsets), len(touched)), rep
        print(f"archive: {args.records} records in {n_objects} objects of {args.per_object} in {args.partitions} "
              f"partition(s) (JSON, keys, headers, metadata; built in {built:.1f} s); erase touches {len(touched)} "
              f"objects ({len(touched) / n_objects:.0%}), one record each; --predicate {args.predicate}")
        print(f"dry run: {dry.records} record(s) in {len(dry.matched)} object(s); {dry.scanned_objects} object(s) "
              f"read, {dry.pruned} ruled out by the manifest; same objects and counts as the unpruned plan "
              f"({full.scanned_objects} objects read)")
        print(f"{'path':<44}{'seconds':>9}{'x writers alone':>17}")
        for name, s in (("writers alone (baseline)", base), ("erase --execute (plan on the driver)", erase_s),
                        ("erase dry run (the plan, on the driver)", plan_s),
                        (f"erase dry run (the plan, {args.workers} local workers)", workers_s)):
            print(f"{name:<44}{s:>9.2f}{s / base:>17.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
