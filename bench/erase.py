"""``lakesink erase`` cost: an erase touching 1% of the objects of a 1M-record archive, against rewriting those
objects with the format writers alone.

    .venv/bin/python bench/erase.py [--records 1000000] [--per-object 1000] [--touch 0.01]

No broker, no Spark: the archive (JSON values, keys and headers side files, record metadata; one partition) is
written straight with the format writers to a local directory (``store.url=file://``) and committed to a local
delta-rs manifest, as the sink would, so the numbers are compute-bound. Then:

* **erase**: ``erase(cfg, "key IN (...)", execute=True)`` with one key in each of ``touch`` x objects: the plan
  (every record of every live object read and the predicate evaluated: a record predicate cannot be answered from
  the manifest), the staging, the two manifest commits, the replacements;
* **dry run**: the same erase without ``--execute`` (the plan alone; after one untimed warm-up dry run);
* **writers alone** (the baseline): the touched objects' files read and written again without those records by
  the format writers (:func:`lakesink.executor.rewrite.rewrite_file`), and put back: no plan, no manifest.

Ratios = seconds / writers-alone seconds. Each path runs once.
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


def build_archive(work: str, records: int, per_object: int) -> dict:
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
    for first in range(0, records, per_object):
        last = min(records, first + per_object) - 1
        recs = [SinkRecord(TOPIC, 0, o, base_ts + o, f"k{o}".encode(), {"order_id": o, "customer": f"c{o % 9973}",
                                                                "note": "x" * 120}, headers=(("src", b"bench"),))
                for o in range(first, last + 1)]
        stem = f"topics/{TOPIC}/partition=0/{TOPIC}+0+{first:010d}"
        written = {}
        for view, (f, rv, ext) in views.items():
            out = io.BytesIO()
            w = f.open_writer(out, rv)
            w.write_many(recs)
            w.close()
            written[view] = (stem + ext, store.put_bytes(stem + ext, out.getvalue()))
        sides = tuple(SideFile(v, k, r.etag, r.version_id, r.size) for v, (k, r) in written.items() if v != "value")
        key, value = written["value"]
        rows.append(object_row(TOPIC, 0, first, last, first_offset=first, last_offset=last,
                               record_count=last - first + 1, encoded_partition="partition=0", object_key=key,
                               object_uri=store.uri(key), side_files=sides, format="json", compression="none",
                               size_bytes=value.size, etag=value.etag, version_id=value.version_id,
                               min_timestamp_ms=base_ts + first, max_timestamp_ms=base_ts + last))
    manifest = wiring.manifest(cfg)
    manifest.ensure()
    manifest.commit(cfg.name, 0, uuid.uuid4().hex, rows)
    return {"cfg": cfg, "raw": raw, "rows": rows}


def writers_alone(cfg, rows, offsets: set[int]) -> float:
    """Seconds to rewrite the touched objects' files without ``offsets`` with the format writers, and put them."""
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
        keep = [i for i, o in enumerate(span) if o not in offsets]
        for key, view, f in [(r.object_key, RecordView.VALUE, fmt)] + [
                (s.key, RecordView(s.view), MetadataFormat() if s.view == "metadata" else fmt) for s in r.side_files]:
            new, _ = rewrite_file(f, view, store.read(key), keep, list(span), TOPIC, 0)
            store.put_bytes(key + ".baseline", new)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--per-object", type=int, default=1000)
    ap.add_argument("--touch", type=float, default=0.01, help="fraction of the objects the erase touches")
    args = ap.parse_args()
    from lakesink.driver.erase import erase

    work = tempfile.mkdtemp(prefix="bench-erase-")
    try:
        t0 = time.perf_counter()
        a = build_archive(work, args.records, args.per_object)
        built = time.perf_counter() - t0
        n_objects = len(a["rows"])
        step = max(1, round(1 / args.touch))
        touched = a["rows"][::step]
        offsets = {r.first_offset + (r.record_count // 2) for r in touched}  # one record in the middle of each
        where = "key IN (" + ", ".join(f"'k{o}'" for o in sorted(offsets)) + ")"
        base = writers_alone(a["cfg"], touched, offsets)
        erase(a["cfg"], where)  # warm-up: imports, DuckDB, the manifest's first read
        t0 = time.perf_counter()
        dry = erase(a["cfg"], where)
        plan_s = time.perf_counter() - t0
        assert dry.records == len(offsets), dry
        t0 = time.perf_counter()
        rep = erase(a["cfg"], where, execute=True)
        erase_s = time.perf_counter() - t0
        assert (rep.records, rep.committed) == (len(offsets), len(touched)), rep
        print(f"archive: {args.records} records in {n_objects} objects of {args.per_object} (JSON, keys, headers, "
              f"metadata; built in {built:.1f} s); erase touches {len(touched)} objects ({args.touch:.0%}), "
              f"one record each")
        print(f"{'path':<34}{'seconds':>9}{'x writers alone':>17}")
        for name, s in (("writers alone (baseline)", base), ("erase --execute", erase_s),
                        ("erase dry run (the plan)", plan_s)):
            print(f"{name:<34}{s:>9.2f}{s / base:>17.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
