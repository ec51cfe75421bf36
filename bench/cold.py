"""Cold runs, as users meet the job: ``lakesink sink --once --flush-tail`` in a fresh process vs a fresh
plain-Spark process doing the same read and write, end to end.

    .venv/bin/python bench/cold.py [--records 1000000] [--runs 3] [--flush-size 50000]

One KafkaBroker and one moto S3 endpoint (its own process) for the whole run; one 4-partition topic of N
JSON values of ~200 B (``bench/sink.py``'s ``bench-json``). Each run, alternating:

* ``lakesink``: ``python -m lakesink.cli --format json sink --config F --once --flush-tail --engine E`` for each
  engine of ``--engines``, each with a new job name and a new manifest on ``s3a://`` (a new user's first run: the
  manifest table is created too), objects to the S3 endpoint. ``local`` (what ``--engine auto`` picks for this
  config): the tasks run in local worker processes, no Spark JVM (``lakesink.runners.local``); ``spark``:
  in a local Spark session. Its JSON batch line gives the phases: ``start`` (process start to the CLI:
  interpreter and imports), ``config``, ``init`` (manifest table, clients), ``plan``, ``session`` (spark engine:
  what is left to wait of the Spark start, begun in advance right after the config was read), ``archive``,
  ``commit``; ``other`` is the rest of the wall time (exit, shutdown).
* ``plain Spark``: ``python bench/cold.py --plain-child …``: a fresh local[2] session with the same jars and
  S3A settings (``lakesink.runtime.spark.get_spark``), ``spark.read.format("kafka")`` over exactly the same offsets,
  ``from_json`` of the value, ``.write.json`` to ``s3a://`` with ``maxRecordsPerFile`` = flush.size; without
  lakesink's JVM class archive (``lakesink.runtime.class_archive``), as a plain Spark job runs, unless
  ``--plain-class-archive``.

Keys and headers (issue #30 item 1; ``--side-formats``, default ``avro,json``, '' to skip): a second topic holds the
same values with a key (~14 B) and two headers (~45 B) per record (``bench/sink.py``'s ``record_key`` and
``record_headers``); each run archives it per engine without side files and with ``store.kafka.keys=true`` and
``store.kafka.headers=true`` in each side-file format (``keys.format.class`` = ``headers.format.class``), in an order
that turns from run to run, and prints the CPU ratio with side files / without (target <= 1.3x).

After each lakesink run the same command runs again with nothing new to archive (``empty re-run``): what a
scheduled run costs when the topic is idle (the engine starts in advance: the local workers, or a JVM that run
never uses).
``services CPU`` is the broker's and moto's CPU during the lakesink run: they share the machine's cores.
``steal`` is the CPU time the hypervisor gave to other guests during the lakesink run (/proc/stat): this
machine is a VM on a shared host, and a run with seconds of it ran on a slower machine.

Wall time is the subprocess's, from spawn to exit. CPU is the process tree's user+system time (driver, Spark
JVM, Python workers), sampled from /proc every 0.2 s (the last 0.2 s of short-lived workers can be missed).
Ratio = plain-Spark wall / lakesink wall (> 1: lakesink is faster). Targets (printed, never asserted):
>= 1.5x the plain-Spark process; an end-to-end time below the Kafka Connect figures measured by hand on this
machine for the same data (Aiven's S3 sink 23-27 s, a DeviantArt-format sink 11.6-12.4 s; quoted from the
issue, not measured here).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import sink as bench_sink  # noqa: E402  (bench/sink.py: data shapes, producer, configs)

TOPIC = bench_sink.TOPIC_OF["json"]
CONNECT = {"Aiven S3 sink (JSON lines)": (23.0, 27.0), "DeviantArt-format sink (block gzip)": (11.6, 12.4)}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def tree_cpu(root: int, seen: dict[int, float], rss: dict[int, int] | None = None) -> None:
    """Update ``seen`` (pid -> CPU seconds) with every live process descending from ``root``; with ``rss``, set it
    to each live process's resident set now (bytes; ``bench/scale.py``'s peak RSS)."""
    tck = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, float]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    rest = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            procs[int(d)] = (int(rest[1]), (int(rest[11]) + int(rest[12])) / tck)
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _cpu) in procs.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    for pid in tree:
        if pid in procs:
            seen[pid] = max(seen.get(pid, 0.0), procs[pid][1])
            if rss is not None:
                try:
                    with open(f"/proc/{pid}/statm") as f:
                        rss[pid] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
                except OSError:
                    pass


def wheel_bytecode() -> None:
    """Compile lakesink's modules to bytecode, as ``pip install`` does for a wheel: under PYTHONDONTWRITEBYTECODE (this
    machine sets it) every cold process would otherwise compile the modules changed since the last write again
    (~0.3 CPU-s each), a cost no installed lakesink pays."""
    import compileall

    import lakesink

    compileall.compile_dir(os.path.dirname(lakesink.__file__), quiet=1)


def warm_broker(servers: str, topic: str = "bench-warmup") -> None:
    """One transaction on a fresh broker before anything is measured: the broker creates its transaction state topic
    (50 partitions) on the first transactional producer, whose ``init_transactions`` waits and retries meanwhile --
    seconds of wall and CPU the first measured restore would otherwise pay (13.2 against 8.9 CPU-s per million
    records for the same restore measured again later, bench/results/scale.md 17:01)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": servers, "transactional.id": f"bench-warmup-{os.getpid()}"})
    p.init_transactions(120)
    p.begin_transaction()
    p.produce(topic, b"warm")
    p.commit_transaction(120)


def start_stack(kafka, s3, work: Path) -> str:
    """Start ``kafka`` (a KafkaBroker) and ``s3`` (an S3Endpoint, logging into ``work``), create the bench bucket and
    warm the broker (:func:`warm_broker`); the broker's bootstrap servers."""
    kafka.start()
    s3.spawn(work / "s3.log")
    s3.create_bucket(bench_sink.BUCKET)
    kafka.create_topic("bench-warmup", partitions=1)
    warm_broker(kafka.bootstrap_servers)
    return kafka.bootstrap_servers


def steal_s() -> float:
    """CPU time the hypervisor gave to others so far (``steal`` of /proc/stat, all CPUs; 0 where unknown): a run
    with much of it ran on a busier host, and its absolute times say less than its ratios."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def cpu_of(pids: list[int | None]) -> float:
    """CPU seconds used so far by ``pids`` and their descendants."""
    seen: dict[int, float] = {}
    for pid in pids:
        if pid is not None:
            tree_cpu(pid, seen)
    return sum(seen.values())


def run_measured(cmd: list[str], env: dict, timeout: float = 900,
                 peak: dict[str, int] | None = None) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process tree, stdout) of ``cmd`` run to completion. With ``peak``, also
    its ``tree`` (the largest sum of the tree's resident sets at one sample) and ``process`` (the largest single
    process's) peak RSS in bytes, sampled with the CPU every 0.2 s."""
    seen: dict[int, float] = {}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True)
        while proc.poll() is None:
            rss: dict[int, int] | None = {} if peak is not None else None
            tree_cpu(proc.pid, seen, rss)
            if peak is not None and rss:
                peak["tree"] = max(peak.get("tree", 0), sum(rss.values()))
                peak["process"] = max(peak.get("process", 0), max(rss.values()))
            if time.perf_counter() - t > timeout:
                proc.kill()
                raise RuntimeError(f"{cmd[:4]} did not finish in {timeout} s")
            time.sleep(0.2)
        wall = time.perf_counter() - t
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} exited {proc.returncode}:\n{stderr[-3000:]}")
    return wall, sum(seen.values()), stdout


def plain_child(args) -> int:
    """The baseline process: a cold session reading and writing the same records with Spark alone."""
    from pyspark.sql import functions as F

    from lakesink.runtime.spark import get_spark
    from lakesink.store.settings import S3Settings

    ends = json.loads(args.ends)
    s3 = S3Settings(endpoint_url=args.endpoint, access_key="testing", secret_key="testing")
    spark = get_spark("plain-cold", master="local[2]", s3=s3)
    df = bench_sink.kafka_df(spark, args.servers, TOPIC, {int(p): e for p, e in ends.items()})
    (df.select(F.from_json(F.col("value").cast("string"), bench_sink.JSON_DDL).alias("v")).select("v.*")
     .write.option("maxRecordsPerFile", args.flush_size).option("ignoreNullFields", "false").mode("overwrite")
     .json(args.out))
    spark.stop()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--flush-size", type=int, default=50_000)
    ap.add_argument("--plain-class-archive", action="store_true",
                    help="let the plain-Spark process map lakesink's JVM class archive too (default: it does not, "
                         "as a plain Spark job would not)")
    ap.add_argument("--engines", default="local,spark",
                    help="lakesink's engines to time, comma-separated (default local,spark: `lakesink sink --engine`)")
    ap.add_argument("--side-formats", default="avro,json",
                    help="keys+headers variant: side-file formats to archive the keys+headers topic with, each against "
                         "the same topic without side files ('' = skip the variant)")
    ap.add_argument("--plain-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--servers", help=argparse.SUPPRESS)
    ap.add_argument("--endpoint", help=argparse.SUPPRESS)
    ap.add_argument("--ends", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.plain_child:
        return plain_child(args)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    side_formats = [f.strip() for f in args.side_formats.split(",") if f.strip()]
    if not engines or any(e not in ("local", "spark") for e in engines):
        ap.error(f"--engines {args.engines!r}: local and/or spark")

    from lakesink.devstack.kafka import KafkaBroker
    from lakesink.devstack.s3 import S3Endpoint
    from lakesink.driver.kafka_admin import KafkaMetadata

    wheel_bytecode()  # lakesink as an installed wheel has it
    work = Path(tempfile.mkdtemp(prefix="lakesink-cold-"))
    kafka, s3 = KafkaBroker(heap="1g"), S3Endpoint()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    # a plain Spark job has no lakesink class archive (lakesink.runtime.class_archive) unless --plain-class-archive
    plain_env = env if args.plain_class_archive else {**env, "LAKESINK_CLASS_ARCHIVE": "0"}
    try:
        kafka.start()
        s3.spawn(work / "s3.log")
        s3.create_bucket(bench_sink.BUCKET)
        servers = kafka.bootstrap_servers
        kafka.create_topic(TOPIC, partitions=bench_sink.PARTITIONS)
        log(f"producing {args.records:,} JSON records to {TOPIC}")
        value_bytes = bench_sink.produce(servers, TOPIC, args.records, bench_sink.json_value)
        kh_topic = TOPIC + bench_sink.KH_SUFFIX
        if side_formats:
            kafka.create_topic(kh_topic, partitions=bench_sink.PARTITIONS)
            log(f"producing {args.records:,} JSON records with keys and headers to {kh_topic}")
            bench_sink.produce(servers, kh_topic, args.records, bench_sink.json_value, key=bench_sink.record_key,
                               headers=bench_sink.record_headers)
        snap = KafkaMetadata({"bootstrap.servers": servers}).snapshot([TOPIC])
        ends = {p: b.latest for (_t, p), b in snap.bounds.items()}
        log(f"{sum(ends.values()):,} records, {value_bytes / 1e6:.0f} MB of values; {args.runs} cold run(s) each")
        services = [kafka.pid, s3.pid]

        def sink_run(run: int, engine: str, label: str, extra: dict, empty: bool) -> dict:
            """One cold ``lakesink sink --once --flush-tail`` (then, with ``empty``, its empty re-run)."""
            name = f"cold-{run}-{engine}-{label}-{uuid.uuid4().hex[:6]}"
            cfg = bench_sink.sink_config("json", name, servers, s3.endpoint_url,
                                         f"s3a://{bench_sink.BUCKET}/_lakesink/{name}", args.flush_size,
                                         {"topics.dir": f"cold/{name}", **extra})
            cfg_file = work / f"{name}.json"
            cfg_file.write_text(json.dumps(cfg))
            sink_cmd = [sys.executable, "-m", "lakesink.cli", "--format", "json", "sink", "--config",
                        str(cfg_file), "--once", "--flush-tail", "--engine", engine]
            before, stolen = cpu_of(services), steal_s()
            wall, cpu, out = run_measured(sink_cmd, env)
            services_cpu, stolen = cpu_of(services) - before, steal_s() - stolen
            batch = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
            assert batch["records"] == sum(ends.values()), batch
            phases = batch["seconds"]
            phases["other"] = max(0.0, wall - sum(phases.values()))
            log(f"run {run}: lakesink ({engine} engine, {label}) {wall:.1f} s, CPU {cpu:.1f} s, services CPU "
                f"{services_cpu:.1f} s, steal {stolen:.1f} s "
                f"({', '.join(f'{k} {v:.1f}' for k, v in phases.items())})")
            got = {"s": wall, "cpu_s": cpu, "phases": phases, "services_cpu_s": services_cpu, "steal_s": stolen}
            if empty:
                empty_wall, empty_cpu, out = run_measured(sink_cmd, env)
                assert json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])["records"] == 0
                log(f"run {run}: lakesink ({engine} engine) empty re-run {empty_wall:.1f} s, CPU {empty_cpu:.1f} s")
                got.update(empty_s=empty_wall, empty_cpu_s=empty_cpu)
            return got

        rows = []
        kh_rows: list[dict] = []
        for run in range(args.runs):
            row: dict = {}
            for engine in engines:
                row[engine] = sink_run(run, engine, "values", {}, empty=True)
            kh: dict = {}
            for engine in engines if side_formats else ():
                # the variants' order turns from run to run: a drift over the run (the S3 endpoint holding more
                # objects, the host's load) is not charged to one variant
                variants = ["none", *side_formats]
                for side in variants[run % len(variants):] + variants[:run % len(variants)]:
                    extra = {"topics": kh_topic}
                    if side != "none":
                        extra.update({"store.kafka.keys": "true", "store.kafka.headers": "true",
                                      "keys.format.class": side, "headers.format.class": side})
                    kh[(engine, side)] = sink_run(run, engine, f"kh-{side}", extra, empty=False)
            kh_rows.append(kh)
            pwall, pcpu, _ = run_measured([sys.executable, __file__, "--plain-child", "--servers", servers,
                                           "--endpoint", s3.endpoint_url, "--ends", json.dumps(ends),
                                           "--flush-size", str(args.flush_size),
                                           "--out", f"s3a://{bench_sink.BUCKET}/plain-cold/{run}"], plain_env)
            log(f"run {run}: plain Spark {pwall:.1f} s, CPU {pcpu:.1f} s")
            row["plain"] = {"s": pwall, "cpu_s": pcpu}
            rows.append(row)
        per_m = 1e6 / sum(ends.values())
        print(f"\nCold end-to-end, {sum(ends.values()):,} JSON records (~{value_bytes / sum(ends.values()):.0f} B), "
              f"4 partitions, S3 endpoint, flush.size {args.flush_size:,}, local[*] on {os.cpu_count()} CPUs; plain "
              f"Spark {'with' if args.plain_class_archive else 'without'} lakesink's class archive")
        print("| run | engine | lakesink s | plain Spark s | vs plain Spark | lakesink CPU-s/M | plain CPU-s/M "
              "| services CPU-s | steal s | empty re-run s (CPU-s) | lakesink phases (s) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for i, row in enumerate(rows):
            p = row["plain"]
            for engine in engines:
                r = row[engine]
                print(f"| {i} | {engine} | {r['s']:.1f} | {p['s']:.1f} | {p['s'] / r['s']:.2f}x | "
                      f"{r['cpu_s'] * per_m:.0f} | {p['cpu_s'] * per_m:.0f} | {r['services_cpu_s']:.1f} | "
                      f"{r['steal_s']:.1f} | {r['empty_s']:.1f} ({r['empty_cpu_s']:.1f}) | "
                      + ", ".join(f"{k} {v:.1f}" for k, v in r["phases"].items()) + " |")
        print()
        for engine in engines:
            med = statistics.median(row["plain"]["s"] / row[engine]["s"] for row in rows)
            print(f"{engine} engine: median vs plain Spark {med:.2f}x (target >= 1.5x); median end to end "
                  f"{statistics.median(row[engine]['s'] for row in rows):.1f} s, CPU "
                  f"{statistics.median(row[engine]['cpu_s'] for row in rows) * per_m:.0f} s per million records")
        if side_formats:
            print(f"\nKeys and headers: {kh_topic}, the same values with a key and two headers per record, archived "
                  "without side files (none) and with store.kafka.keys=true and store.kafka.headers=true in each "
                  "side-file format; ratio = CPU with side files / CPU without, same run and engine (target <= 1.3x)")
            print("| run | engine | side files | lakesink s | lakesink CPU-s/M | CPU ratio vs none | services CPU-s "
                  "| steal s | lakesink phases (s) |")
            print("|---|---|---|---|---|---|---|---|---|")
            for i, kh in enumerate(kh_rows):
                for engine in engines:
                    none = kh[(engine, "none")]
                    for side in ["none"] + side_formats:
                        r = kh[(engine, side)]
                        print(f"| {i} | {engine} | {side} | {r['s']:.1f} | {r['cpu_s'] * per_m:.1f} | "
                              f"{r['cpu_s'] / none['cpu_s']:.2f}x | {r['services_cpu_s']:.1f} | {r['steal_s']:.1f} | "
                              + ", ".join(f"{k} {v:.1f}" for k, v in r["phases"].items()) + " |")
            print()
            for engine in engines:
                for side in side_formats:
                    med = statistics.median(kh[(engine, side)]["cpu_s"] / kh[(engine, "none")]["cpu_s"]
                                            for kh in kh_rows)
                    print(f"{engine} engine, {side} side files: median CPU ratio with keys+headers / without "
                          f"{med:.2f}x (target <= 1.3x); CPU "
                          f"{statistics.median(kh[(engine, side)]['cpu_s'] for kh in kh_rows) * per_m:.1f} vs "
                          f"{statistics.median(kh[(engine, 'none')]['cpu_s'] for kh in kh_rows) * per_m:.1f} s per "
                          "million records")
        for what, (lo, hi) in CONNECT.items():
            print(f"reference (measured by hand, quoted from the issue): {what} {lo}-{hi} s")
        return 0
    finally:
        s3.stop()
        kafka.stop()


if __name__ == "__main__":
    sys.exit(main())
