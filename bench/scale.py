"""Flat at scale (issue #30 item 5): CPU per million records and peak RSS at 10x the data and at 64 partitions,
against the 1M-record, 4-partition run of the same script.

    .venv/bin/python bench/scale.py [--records 1000000] [--big 10000000] [--wide-partitions 64] [--runs 1]

One KafkaBroker and one moto S3 endpoint (its own process) for the whole run. Three topics of JSON values of
~200 B, each record with a key (~14 B) and two headers (~45 B) (``bench/sink.py``'s ``json_value``,
``record_key``, ``record_headers``: the issue's reference shape):

* ``base``: ``--records`` records in 4 partitions (the reference figures: measured first and again last in each
  run, the median of all taken; both are printed, their spread being what the machine's noise is worth);
* ``big``: ``--big`` records (10x) in 4 partitions;
* ``wide``: ``--records`` records in ``--wide-partitions`` partitions.

For each, cold processes as users run them (``bench/cold.py``'s ``run_measured``: process-tree CPU, and here the
tree's peak resident set too, sampled every 0.2 s):

* ``sink --once --flush-tail`` with ``store.kafka.keys=true``, ``store.kafka.headers=true`` (Avro side files) and
  the record-metadata side file, flush.size ``--flush-size``, objects on the S3 endpoint, a new manifest on
  ``s3a://`` (delta-rs), what ``--engine auto`` picks here (the local engine);
* ``restore --to-topic`` of that archive into a fresh topic with the same partition count (exactly once,
  transactional, from the objects on S3).

Printed per shape: CPU-s per million records, peak RSS (tree = the largest sum of the tree's resident sets at one
sample, which counts shared pages once per process; process = the largest single process), and each as a ratio
to ``base``. Target (printed, never asserted): every ratio <= 1.2x.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import cold  # noqa: E402  (bench/cold.py: process-tree CPU and RSS)
import sink as bench_sink  # noqa: E402  (bench/sink.py: data shapes, producer, configs)

TARGET = 1.2


def produce(servers: str, topic: str, n: int, partitions: int) -> int:
    """``bench_sink.produce``'s records (key and two headers each) spread over ``partitions``; value bytes."""
    saved = bench_sink.PARTITIONS
    bench_sink.PARTITIONS = partitions  # its producer places record i on partition i % PARTITIONS
    try:
        return bench_sink.produce(servers, topic, n, bench_sink.json_value, key=bench_sink.record_key,
                                  headers=bench_sink.record_headers)
    finally:
        bench_sink.PARTITIONS = saved


def measure(cmd: list[str], env: dict) -> dict:
    """One cold process: wall s, CPU-s, peak RSS (tree, process) and its last JSON line."""
    peak: dict[str, int] = {}
    wall, cpu, out = cold.run_measured(cmd, env, timeout=3600, peak=peak)
    doc = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
    return {"wall": wall, "cpu": cpu, "tree": peak.get("tree", 0), "process": peak.get("process", 0), "doc": doc}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--big", type=int, default=10_000_000)
    ap.add_argument("--wide-partitions", type=int, default=64)
    ap.add_argument("--flush-size", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args(argv)

    from lakesink.devstack.kafka import KafkaBroker
    from lakesink.devstack.s3 import S3Endpoint

    cold.wheel_bytecode()  # lakesink as an installed wheel has it
    work = Path(tempfile.mkdtemp(prefix="lakesink-scale-"))
    kafka, s3 = KafkaBroker(heap="1g"), S3Endpoint()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    shapes = {"base": (a.records, 4), "big": (a.big, 4), "wide": (a.records, a.wide_partitions)}
    load0 = tuple(round(x, 2) for x in os.getloadavg())
    rows: dict[str, list[dict]] = {k: [] for k in shapes}
    try:
        servers = cold.start_stack(kafka, s3, work)
        for shape, (n, parts) in shapes.items():
            topic = f"scale-{shape}"
            kafka.create_topic(topic, partitions=parts)
            t = time.perf_counter()
            vbytes = produce(servers, topic, n, parts)
            cold.log(f"{shape}: produced {n:,} records ({vbytes / n:.0f} B values) into {parts} partitions in "
                     f"{time.perf_counter() - t:.0f} s")
        for run in range(a.runs):
            # the reference measured first and again last in each run: on a shared machine its spread is the noise
            for shape in [*shapes, "base"]:
                n, parts = shapes[shape]
                name = f"scale-{shape}-{run}-{uuid.uuid4().hex[:6]}"
                cfg = bench_sink.sink_config("json", name, servers, s3.endpoint_url,
                                             f"s3a://{bench_sink.BUCKET}/_lakesink/{name}", a.flush_size,
                                             {"topics": f"scale-{shape}", "topics.dir": f"scale/{name}",
                                              "store.kafka.keys": "true", "store.kafka.headers": "true",
                                              "keys.format.class": "avro", "headers.format.class": "avro"})
                cfg_file = work / f"{name}.json"
                cfg_file.write_text(json.dumps(cfg))
                cli = [sys.executable, "-m", "lakesink.cli", "--format", "json"]
                sink = measure([*cli, "sink", "--config", str(cfg_file), "--once", "--flush-tail"], env)
                assert sink["doc"]["records"] == n, sink["doc"]
                dest = f"{name}-restored"
                kafka.create_topic(dest, partitions=parts)
                restore = measure([*cli, "restore", "--config", str(cfg_file), "--to-topic", dest], env)
                assert restore["doc"]["produced"] == n, restore["doc"]
                for path, m in (("sink", sink), ("restore", restore)):
                    rows[shape].append({"run": run, "path": path, "n": n, "parts": parts, **m})
                    cold.log(f"run {run} {shape} {path}: {m['wall']:.1f} s, {m['cpu'] * 1e6 / n:.1f} CPU-s/M, "
                             f"peak RSS tree {m['tree'] / 2**20:.0f} MiB, process {m['process'] / 2**20:.0f} MiB")
    finally:
        s3.stop()
        kafka.stop()

    def spread(path: str) -> str:
        return ", ".join(f"{r['cpu'] * 1e6 / r['n']:.1f}" for r in rows["base"] if r["path"] == path)

    def med(shape: str, path: str, key: str) -> float:
        vals = [r[key] * (1e6 / r["n"] if key == "cpu" else 1) for r in rows[shape] if r["path"] == path]
        return statistics.median(vals)

    print(f"\nload average (1, 5, 15 min) at the start: {load0}, at the end: "
          f"{tuple(round(x, 2) for x in os.getloadavg())}; {os.cpu_count()} CPUs")
    print(f"\nJSON values (~200 B) with a key and two headers each, store.kafka.keys/headers (Avro side files), "
          f"flush.size {a.flush_size:,}, moto S3, delta-rs manifest on s3a://, local engine; cold processes; "
          f"medians of {a.runs} run(s)\n")
    print("| shape | records | partitions | path | s | CPU-s/M | vs base | peak RSS tree MiB | vs base "
          "| peak RSS process MiB | vs base |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    verdicts = []
    for shape, (n, parts) in shapes.items():
        for path in ("sink", "restore"):
            cpu, tree, proc = (med(shape, path, k) for k in ("cpu", "tree", "process"))
            bcpu, btree, bproc = (med("base", path, k) for k in ("cpu", "tree", "process"))
            wall = med(shape, path, "wall")
            print(f"| {shape} | {n:,} | {parts} | {path} | {wall:.1f} | {cpu:.1f} | {cpu / bcpu:.2f}x "
                  f"| {tree / 2**20:.0f} | {tree / btree:.2f}x | {proc / 2**20:.0f} | {proc / bproc:.2f}x |")
            if shape != "base":
                worst = max(cpu / bcpu, tree / btree, proc / bproc)
                verdicts.append(f"{shape} {path}: worst ratio {worst:.2f}x "
                                f"({'met' if worst <= TARGET else 'MISSED'}, target <= {TARGET}x)")
    print(f"\nbase measurements, CPU-s/M: sink {spread('sink')}; restore {spread('restore')}\n")
    print("\n".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
