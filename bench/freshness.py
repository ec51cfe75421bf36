"""Freshness in continuous mode: how long after a record is produced is it committed to the manifest?

    .venv/bin/python bench/freshness.py [--minutes 10] [--rate 20000] [--interval 5s] [--rotate-ms 10000]
                                        [--engine local|spark]

Starts its own Kafka broker (KRaft) and moto S3 endpoint (a separate process), one 4-partition topic, a producer
in its own process (so its CPU does not compete with the sink's driver for a GIL) writing ``--rate`` keyed JSON
records/s (~200 B values) paced in 1-second ticks, and the CLI as users run it::

    python -m lakesink.cli --format json sink --config F --continuous --interval 5s --engine local

with ``partitioner.class=daily``, ``timestamp.extractor=Record``, ``rotate.interval.ms`` (default 10000) and a
``flush.size`` no file reaches (files close on time only), objects on the S3 endpoint and the manifest on
``s3a://`` (delta-rs). The producer runs for ``--minutes`` plus a margin (rotation + 3 intervals), so every record
of the measured window is closed by a later record; then the sink gets SIGINT (it finishes its batch and exits
0) and one ``sink --once --flush-tail`` archives what is left open.

Per record, freshness = (the Delta commit timestamp of the manifest version holding its object, from
``DeltaTable.history()``, matched by the commit's ``userMetadata`` batch id) − (the record's Kafka timestamp,
CreateTime, read from the object's record-metadata side file: one value per record, not the object's min/max).
Only records produced in the window ``[producer start, + --minutes)`` count. It reports p50/p99/max overall and
per minute (growth would show there), the producer's achieved rate, the target ``p99 <= interval + rotation +
3 s`` as a met/missed line (never an assertion), and where the time goes, per record, in five parts that add
up to its freshness exactly (:func:`components`):

* ``rotation``: from the record to the last record of its object (the file waits for its time span to end);
* ``poll wait``: from there to the start of the batch that committed it (the next poll, Kafka's produce
  latency included);
* ``plan`` (with ``session``), ``archive``: that batch's phases (the metrics table, ``lakesink.manifest.metrics``);
* ``commit``: the rest, to the Delta commit's timestamp (pre-commit checks, the commit).

A batch's start is its metrics row's ``committed_at`` minus its ``seconds_total``. Every 5 s it samples the CPU
of the sink's process tree, the producer, the broker and moto, and the machine's (/proc/stat): the per-minute
table shows how much of the machine other processes took (a shared machine) and the hypervisor's steal.
Exactly once: per partition the offsets of all metadata side files are exactly ``0 .. end-1``, each once, and
their count is what the broker acknowledged to the producer. Not part of CI (it runs for the ``--minutes``
given, plus ~3 min).
"""
from __future__ import annotations

import argparse
import io
import json
import math
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

TOPIC = "freshness-json"
PARTITIONS = 4
BUCKET = "freshness"
PARTS = ("rotation", "poll_wait", "plan", "archive", "commit")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------- pure maths

def percentile(values, q: float) -> float:
    """The nearest-rank ``q``-th percentile of ``values`` (the smallest value with at least q % of the values at
    or below it): a value that occurred, never an interpolation. NaN for no values."""
    a = np.asarray(values, dtype=np.float64)
    if not a.size:
        return math.nan
    return float(np.percentile(a, q, method="inverted_cdf"))


def summary(values) -> dict:
    """``n``, ``p50``, ``p99``, ``max`` and ``mean`` of ``values``."""
    a = np.asarray(values, dtype=np.float64)
    if not a.size:
        return {"n": 0, "p50": math.nan, "p99": math.nan, "max": math.nan, "mean": math.nan}
    return {"n": int(a.size), "p50": percentile(a, 50), "p99": percentile(a, 99), "max": float(a.max()),
            "mean": float(a.mean())}


def per_minute(ts_ms, fresh_ms, t0_ms: int) -> list[dict]:
    """:func:`summary` of the freshness of the records produced in each minute after ``t0_ms`` (by record
    timestamp), as ``{"minute": m, ...}`` in minute order."""
    ts = np.asarray(ts_ms, dtype=np.int64)
    fresh = np.asarray(fresh_ms, dtype=np.float64)
    minute = (ts - t0_ms) // 60_000
    return [{"minute": int(m), **summary(fresh[minute == m])} for m in np.unique(minute)]


def cpu_per_minute(samples: list[dict], t0_s: float) -> dict[int, dict[str, float]]:
    """Per minute after ``t0_s`` (by sample time), the CPU used between consecutive cumulative ``samples``
    (``{"t": epoch s, "busy": machine busy CPU-s, "steal": CPU-s, "ours": {name: CPU-s}}``) as % of one core:
    each of ``ours``, ``other`` (the machine's busy time not in ``ours``: processes outside the benchmark) and
    ``steal`` (the hypervisor's)."""
    acc: dict[int, dict[str, float]] = {}
    span: dict[int, float] = {}
    for a, b in zip(samples, samples[1:]):
        dt_s = b["t"] - a["t"]
        if dt_s <= 0:
            continue
        m = int((b["t"] - t0_s) // 60)
        row = acc.setdefault(m, {})
        ours = 0.0
        for k, v in b["ours"].items():
            used = max(0.0, v - a["ours"].get(k, v))
            row[k] = row.get(k, 0.0) + used
            ours += used
        row["other"] = row.get("other", 0.0) + max(0.0, (b["busy"] - a["busy"]) - ours)
        row["steal"] = row.get("steal", 0.0) + max(0.0, b["steal"] - a["steal"])
        span[m] = span.get(m, 0.0) + dt_s
    return {m: {k: 100 * v / span[m] for k, v in row.items()} for m, row in sorted(acc.items())}


@dataclass(frozen=True)
class BatchTimes:
    """One committed batch, epoch ms: the Delta commit's timestamp, the batch's start and its phases."""

    commit_ms: float
    start_ms: float
    plan_ms: float  # plan + session
    archive_ms: float


def batch_times(commit_ms: float, metrics_committed_ms: float, seconds: dict) -> BatchTimes:
    """A batch's times from its Delta commit timestamp and its metrics row (``committed_at`` in epoch ms; the
    ``seconds_*`` phases): it started ``seconds_total`` before the metrics row was built."""
    total = seconds.get("total") or 0.0
    plan = (seconds.get("plan") or 0.0) + (seconds.get("session") or 0.0)
    archive = seconds.get("archive") or 0.0
    return BatchTimes(commit_ms, metrics_committed_ms - total * 1000, plan * 1000, archive * 1000)


def components(ts_ms, object_max_ms, batch: BatchTimes) -> dict[str, np.ndarray]:
    """Where the freshness of the records ``ts_ms`` of one object (its largest record timestamp
    ``object_max_ms``) committed by ``batch`` went, per record, in the parts of :data:`PARTS`; they add up to
    ``batch.commit_ms - ts`` exactly (the ``commit`` part takes the rest, and can be slightly negative when the
    clocks' readings overlap)."""
    ts = np.asarray(ts_ms, dtype=np.float64)
    n = ts.size
    rotation = object_max_ms - ts
    poll_wait = np.full(n, batch.start_ms - object_max_ms)
    plan = np.full(n, batch.plan_ms)
    archive = np.full(n, batch.archive_ms)
    commit = np.full(n, batch.commit_ms - batch.start_ms - batch.plan_ms - batch.archive_ms)
    return {"rotation": rotation, "poll_wait": poll_wait, "plan": plan, "archive": archive, "commit": commit}


def breakdown(parts: dict[str, np.ndarray], fresh_ms) -> dict[str, dict[str, float]]:
    """Mean of each part over all records and over the slowest 1 % (freshness at or above its p99): what the
    typical record and the tail wait for. Each row's parts add up to that row's mean freshness."""
    fresh = np.asarray(fresh_ms, dtype=np.float64)
    if not fresh.size:
        return {}
    tail = fresh >= percentile(fresh, 99)
    out = {"all": {k: float(np.mean(v)) for k, v in parts.items()},
           "p99 tail": {k: float(np.mean(v[tail])) for k, v in parts.items()}}
    out["all"]["freshness"] = float(fresh.mean())
    out["p99 tail"]["freshness"] = float(fresh[tail].mean())
    return out


def target_line(p99_ms: float, interval_s: float, rotate_ms: int, slack_s: float = 3.0) -> str:
    """The target ``p99 <= interval + rotation + slack`` as one line saying met or missed."""
    target = interval_s + rotate_ms / 1000 + slack_s
    p99 = p99_ms / 1000
    if math.isnan(p99):
        return f"target p99 <= {target:g} s (interval {interval_s:g} + rotation {rotate_ms / 1000:g} + {slack_s:g}): " \
               f"no records measured"
    verdict = "met" if p99 <= target else "MISSED"
    return (f"target p99 <= {target:g} s (interval {interval_s:g} + rotation {rotate_ms / 1000:g} + {slack_s:g}): "
            f"p99 {p99:.2f} s, {verdict} ({p99 - target:+.2f} s)")


def exactly_once(offsets_by_partition: dict[int, list], ends: dict[int, int]) -> list[str]:
    """Problems with the archived offsets: each partition's must be exactly ``0 .. ends[p]-1``, each once. ``[]``
    when exactly once."""
    problems = []
    for p in sorted(set(ends) | set(offsets_by_partition)):
        arrays = [np.asarray(a, dtype=np.int64) for a in offsets_by_partition.get(p, [])]
        offs = np.sort(np.concatenate(arrays)) if arrays else np.zeros(0, np.int64)
        end = ends.get(p, 0)
        dup = int(offs.size - np.unique(offs).size)
        missing = end - int(np.unique(offs[(offs >= 0) & (offs < end)]).size)
        beyond = int(np.count_nonzero((offs < 0) | (offs >= end)))
        if dup or missing or beyond:
            problems.append(f"partition {p}: {dup} duplicated, {missing} missing, {beyond} outside [0, {end})")
    return problems


def commit_times(history: list[dict], job: str) -> dict[int, int]:
    """``{batch_id: Delta commit timestamp ms}`` of ``job``'s sink commits in a ``DeltaTable.history()``."""
    out = {}
    for h in history:
        try:
            tag = json.loads(h.get("userMetadata") or "")
        except ValueError:
            continue
        if isinstance(tag, dict) and tag.get("lakesink_job") == job and isinstance(tag.get("batch_id"), int):
            out[tag["batch_id"]] = int(h["timestamp"])
    return out


# ---------------------------------------------------------------------------------------------- producer process

def value(i: int) -> bytes:
    """A ~200 B JSON order (same shape at every rate; a format string: the producer's CPU is a cost here)."""
    return (f'{{"id":{i},"customer":"c{i % 9973:05d}","sku":"sku-{i % 777:04d}","qty":{i % 13},'
            f'"price_cents":{(i * 7919) % 100000},"status":"{("new", "paid", "shipped")[i % 3]}",'
            f'"note":"{"x" * 80}","ts_note":"produced by bench/freshness.py"}}').encode()


def produce(servers: str, rate: int, seconds: float, out: str, start_at: float) -> None:
    """Produce ``rate`` keyed records/s in 1-second ticks (a tick's records at once, then sleep to the next tick)
    for ``seconds`` from ``start_at`` (epoch s); write the counts to ``out`` (JSON)."""
    import resource

    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": servers, "linger.ms": 5, "acks": "all", "enable.idempotence": True,
                  "queue.buffering.max.messages": max(100_000, 4 * rate)})
    acked = errors = 0
    first_error = None

    def done(err, _msg) -> None:
        nonlocal acked, errors, first_error
        if err:
            errors += 1
            first_error = first_error or str(err)
        else:
            acked += 1

    time.sleep(max(0.0, start_at - time.time()))
    t0 = time.time()
    sent, ticks, late = 0, 0, 0
    while time.time() - t0 < seconds:
        for _ in range(rate):
            while True:
                try:
                    p.produce(TOPIC, value=value(sent), key=f"c{sent % 9973:05d}".encode(), on_delivery=done)
                    break
                except BufferError:
                    p.poll(0.05)
            sent += 1
        p.poll(0)
        ticks += 1
        if time.time() > t0 + ticks:
            late += 1  # this tick's records took longer than the tick
        while (left := t0 + ticks - time.time()) > 0:
            p.poll(min(left, 0.1))  # serves delivery reports (poll returns early when it served one)
    t1 = time.time()
    p.flush(120)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    Path(out).write_text(json.dumps({"sent": sent, "acked": acked, "errors": errors, "first_error": first_error,
                                     "t0": t0, "t1": t1, "ticks": ticks, "late_ticks": late,
                                     "cpu_s": ru.ru_utime + ru.ru_stime}))


# ---------------------------------------------------------------------------------------------- the run

class BatchReader(threading.Thread):
    """Reads the CLI's stdout: one JSON line per batch, kept with the wall time it arrived."""

    def __init__(self, stream):
        super().__init__(name="freshness-batches", daemon=True)
        self.stream, self.batches, self.other = stream, [], []

    def run(self) -> None:
        for raw in self.stream:
            line = raw.decode(errors="replace").strip()
            try:
                data = json.loads(line) if line.startswith("{") else None
            except ValueError:
                data = None
            if isinstance(data, dict) and "batch_id" in data:
                self.batches.append((time.time(), data))
            elif line:
                self.other.append(line)


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and its descendants alive now."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for pr in procs:
        try:
            t = pr.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def machine_cpu_s() -> tuple[float, float]:
    """(busy, steal) CPU-seconds of the whole machine so far, all cores (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    tck = os.sysconf("SC_CLK_TCK")
    user, nice, system, _idle, _iowait, irq, softirq = v[:7]
    steal = v[7] if len(v) > 7 else 0
    return (user + nice + system + irq + softirq) / tck, steal / tck


class Sampler(threading.Thread):
    """Every ``every_s``: the machine's busy and steal CPU-s and the CPU-s of each of the benchmark's own
    process trees (``pids``: name -> pid; sink, producer, broker, moto), cumulative."""

    def __init__(self, pids: dict[str, int], every_s: float = 5.0):
        super().__init__(name="freshness-cpu", daemon=True)
        self.pids, self.every_s, self.samples = pids, every_s, []
        self.stop_event = threading.Event()

    def take(self) -> None:
        busy, steal = machine_cpu_s()
        self.samples.append({"t": time.time(), "busy": busy, "steal": steal,
                             "ours": {k: tree_cpu_s(p) for k, p in self.pids.items() if p}})

    def run(self) -> None:
        self.take()
        while not self.stop_event.wait(self.every_s):
            self.take()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="the measured window of produced records")
    ap.add_argument("--rate", type=int, default=20_000, help="records per second produced (1-second ticks)")
    ap.add_argument("--interval", default="5s", help="the sink's --interval")
    ap.add_argument("--rotate-ms", type=int, default=10_000, help="rotate.interval.ms")
    ap.add_argument("--flush-size", type=int, default=100_000_000, help="large: files close on time only")
    ap.add_argument("--engine", choices=("local", "spark"), default="local")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args(argv)

    from lakesink.devstack.kafka import KafkaBroker
    from lakesink.devstack.s3 import S3Endpoint
    from lakesink.driver.batch import parse_interval

    interval_s = parse_interval(args.interval)
    margin_s = args.rotate_ms / 1000 + 3 * interval_s  # every window record is closed by a later one
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="lakesink-freshness-"))
    kafka, s3 = KafkaBroker(), S3Endpoint()
    sink = prod = None
    try:
        kafka.start()
        s3.spawn(work / "s3.log")
        s3.create_bucket(BUCKET)
        kafka.create_topic(TOPIC, partitions=PARTITIONS)
        name = f"fresh-{uuid.uuid4().hex[:6]}"
        cfg = {"name": name, "topics": TOPIC, "format.class": "json", "flush.size": str(args.flush_size),
               "rotate.interval.ms": str(args.rotate_ms), "partitioner.class": "daily",
               "timestamp.extractor": "Record", "locale": "en", "timezone": "UTC",
               "s3.bucket.name": BUCKET, "s3.region": "us-east-1", "store.url": s3.endpoint_url,
               "aws.access.key.id": "testing", "aws.secret.access.key": "testing",
               "manifest.location": f"s3a://{BUCKET}/_lakesink/manifest",
               "kafka.bootstrap.servers": kafka.bootstrap_servers}
        cfg_file = work / "sink.json"
        cfg_file.write_text(json.dumps(cfg))
        env = {**os.environ, "TMPDIR": str(work), "LAKESINK_LOG_DIR": str(work / "logs"),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])),
               "SPARK_LOCAL_IP": "127.0.0.1"}
        cmd = [sys.executable, "-m", "lakesink.cli", "--format", "json", "sink", "--config", str(cfg_file),
               "--continuous", "--interval", args.interval, "--engine", args.engine, "--master", args.master]
        sink = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=open(work / "sink.stderr", "wb"),
                                start_new_session=True, cwd=work)
        reader = BatchReader(sink.stdout)
        reader.start()
        # the sink's cold start (and the first, empty polls) happen before the first record is produced
        deadline = time.time() + 300
        while not reader.batches and sink.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        if not reader.batches:
            raise SystemExit(f"the sink did not poll: exit {sink.poll()}, {reader.other[-3:]}; "
                             f"{(work / 'sink.stderr').read_text(errors='replace')[-1500:]}")
        produced_file = work / "produced.json"
        start_at = time.time() + 1.0
        prod = multiprocessing.get_context("spawn").Process(
            target=produce, args=(kafka.bootstrap_servers, args.rate, args.minutes * 60 + margin_s,
                                  str(produced_file), start_at), name="freshness-producer")
        prod.start()
        log(f"freshness: {args.minutes:g} min + {margin_s:g} s margin at {args.rate} rec/s into {PARTITIONS} "
            f"partitions; sink --continuous --interval {args.interval} --engine {args.engine}, rotate.interval.ms "
            f"{args.rotate_ms}; work dir {work}")
        cpu0 = tree_cpu_s(sink.pid)
        sampler = Sampler({"sink": sink.pid, "producer": prod.pid, "broker": kafka.pid, "moto": s3.pid})
        sampler.start()
        while prod.is_alive():
            prod.join(30)
            if sink.poll() is not None:
                log(f"the sink exited early with {sink.returncode}: {reader.other[-3:]}")
                break
            if prod.is_alive():
                log(f"{len(reader.batches)} batch lines, {sum(b['records'] for _t, b in reader.batches):,} "
                    f"records committed")
        prod.join()
        cpu_sink = tree_cpu_s(sink.pid) - cpu0
        sampler.stop_event.set()
        sampler.join(30)
        log("SIGINT to the sink (it finishes its batch)")
        sink.send_signal(signal.SIGINT)
        try:
            rc = sink.wait(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(sink.pid, signal.SIGKILL)
            rc = sink.wait()
        reader.join(10)
        load_after = os.getloadavg()
        tail = subprocess.run([sys.executable, "-m", "lakesink.cli", "--format", "json", "sink", "--config",
                               str(cfg_file), "--once", "--flush-tail", "--engine", "local"], env=env,
                              capture_output=True, timeout=600, cwd=work)
        produced = json.loads(produced_file.read_text())
        figures = measure(cfg_file, name, produced, args, interval_s, reader, kafka.bootstrap_servers)
        figures.update({"sink_exit": rc, "tail_exit": tail.returncode, "sink_cpu_s": cpu_sink,
                        "load_before": load_before, "load_after": load_after, "produced": produced,
                        "tail_stdout": tail.stdout.decode(errors="replace")[-500:],
                        "cpu_per_minute": cpu_per_minute(sampler.samples, produced["t0"])})
        report(args, figures, reader, work)
        if args.out:
            Path(args.out).write_text(json.dumps(figures, indent=1, default=str))
        return 0
    finally:
        if prod is not None and prod.is_alive():
            prod.terminate()
        if sink is not None and sink.poll() is None:
            os.killpg(sink.pid, signal.SIGKILL)
            sink.wait()
        s3.stop()
        kafka.stop()
        shutil.rmtree(work, ignore_errors=True)


def measure(cfg_file: Path, job: str, produced: dict, args, interval_s: float, reader: BatchReader,
            servers: str) -> dict:
    """Read the manifest, its history, the metrics table and every metadata side file back; the figures."""
    from confluent_kafka import Consumer, TopicPartition
    from deltalake import DeltaTable

    from lakesink import wiring
    from lakesink.config import load_config
    from lakesink.manifest.metrics import MetricsTable, metrics_location
    from lakesink.objects.formats.metadata import MetadataFormat
    from lakesink.store import open_store

    cfg = load_config(str(cfg_file))
    manifest = wiring.manifest(cfg)
    table = DeltaTable(manifest.uri, storage_options=manifest.storage_options or None)
    rows = table.to_pyarrow_table().to_pylist()
    commits = commit_times(table.history(), job)
    metrics = MetricsTable(metrics_location(cfg), wiring.s3_settings(cfg))
    mrows = DeltaTable(metrics.uri, storage_options=metrics.storage_options or None).to_pyarrow_table().to_pylist()
    continuous_run = {b["run_id"] for _t, b in reader.batches}
    times = {}
    batch_rows = {}
    for m in mrows:
        if m["run_id"] not in continuous_run:
            continue
        secs = {"plan": m["seconds_plan"], "session": m["seconds_session"], "archive": m["seconds_archive"],
                "commit": m["seconds_commit"], "total": m["seconds_total"]}
        times[m["batch_id"]] = batch_times(commits[m["batch_id"]], m["committed_at"].timestamp() * 1000, secs)
        batch_rows[m["batch_id"]] = m
    store = open_store(wiring.task_parts(cfg).store)
    fmt = MetadataFormat()
    w0 = int(produced["t0"] * 1000)
    w1 = w0 + int(args.minutes * 60_000)
    offsets: dict[int, list] = {}
    ts_all, fresh_all, parts_all = [], [], {k: [] for k in PARTS}
    in_window_tail = 0
    for r in rows:
        if r["kind"] != "object" or r["job"] != job:
            continue
        side = {s["view"]: s for s in r["side_files"] or ()}["metadata"]
        offs, ts, _present, _types = fmt.read_arrays(io.BytesIO(store.read(side["key"], side.get("etag"))))
        offsets.setdefault(r["kafka_partition"], []).append(offs)
        window = (ts >= w0) & (ts < w1)
        if not window.any():
            continue
        b = times.get(r["batch_id"])
        if b is None or r["run_id"] not in continuous_run:  # committed by the tail run: missed the continuous run
            in_window_tail += int(window.sum())
            continue
        t = ts[window]
        ts_all.append(t)
        fresh_all.append(b.commit_ms - t)
        for k, v in components(t, float(ts.max()), b).items():
            parts_all[k].append(v)
    ts_arr = np.concatenate(ts_all) if ts_all else np.zeros(0, np.int64)
    fresh = np.concatenate(fresh_all) if fresh_all else np.zeros(0)
    parts = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in parts_all.items()}
    c = Consumer({"bootstrap.servers": servers, "group.id": "freshness-bench"})
    ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
    c.close()
    archived = sum(int(a.size) for v in offsets.values() for a in v)
    cont = [b for _t, b in reader.batches if b.get("committed", True) and b["records"]]
    per_batch = [{"batch_id": i, "start_s": round((t.start_ms - w0) / 1000, 3),
                  "commit_s": round((t.commit_ms - w0) / 1000, 3), "plan": batch_rows[i]["seconds_plan"],
                  "archive": batch_rows[i]["seconds_archive"], "commit": batch_rows[i]["seconds_commit"],
                  "records_read": batch_rows[i]["records_read"], "records": batch_rows[i]["records"]}
                 for i, t in sorted(times.items())]
    return {
        "window": [w0, w1], "overall": summary(fresh), "per_minute": per_minute(ts_arr, fresh, w0),
        "breakdown": breakdown(parts, fresh), "target": target_line(summary(fresh)["p99"], interval_s, args.rotate_ms),
        "in_window_committed_by_tail": in_window_tail, "ends": ends, "archived": archived,
        "exactly_once_problems": exactly_once(offsets, ends),
        "batches": len(cont), "polls": len(reader.batches), "per_batch": per_batch,
        "polls_per_batch_line": [{"at_s": round(t - w0 / 1000, 3), "batch_id": b["batch_id"],
                                  "records_read": b.get("records_read"), "records": b["records"],
                                  "seconds": b.get("seconds")} for t, b in reader.batches],
        "records_read": sum(b.get("records_read") or 0 for _t, b in reader.batches),  # every poll's reads
        "records_committed": sum(b["records"] for b in cont),
        "batch_seconds": summary([m["seconds_total"] for m in batch_rows.values()]),
        "archive_seconds": summary([m["seconds_archive"] or 0 for m in batch_rows.values()]),
    }


def report(args, f: dict, reader: BatchReader, work: Path) -> None:
    p = f["produced"]
    secs = p["t1"] - p["t0"]
    print(f"\nFreshness: lakesink sink --continuous --interval {args.interval} --engine {args.engine}, "
          f"rotate.interval.ms {args.rotate_ms}, flush.size {args.flush_size:,}, {PARTITIONS} partitions, JSON "
          f"values ~200 B with keys, moto S3, manifest on s3a:// (delta-rs)")
    print(f"producer: {p['acked']:,} acknowledged of {p['sent']:,} sent ({p['errors']} errors) in {secs:.1f} s: "
          f"{p['acked'] / secs:,.0f} records/s achieved of {args.rate:,} asked ({p['late_ticks']} of {p['ticks']} "
          f"1-second ticks late); producer CPU {p['cpu_s']:.0f} s")
    print(f"load average before {f['load_before'][0]:.2f} / after {f['load_after'][0]:.2f} (1 min); sink process "
          f"tree CPU {f['sink_cpu_s']:.0f} s over the run ({f['sink_cpu_s'] / secs * 100:.0f} % of one core)")
    o = f["overall"]
    print(f"\nrecords in the {args.minutes:g}-minute window: {o['n']:,}; freshness p50 {o['p50'] / 1000:.2f} s, "
          f"p99 {o['p99'] / 1000:.2f} s, max {o['max'] / 1000:.2f} s, mean {o['mean'] / 1000:.2f} s")
    print(f["target"])
    cpu = f.get("cpu_per_minute", {})
    batches_by_minute: dict[int, list] = {}
    for b in f.get("per_batch", []):
        batches_by_minute.setdefault(int(b["start_s"] // 60), []).append(b)
    read_by_minute: dict[int, int] = {}  # every poll's reads, the polls that closed no file included
    for b in f.get("polls_per_batch_line", []):
        m = int(b["at_s"] // 60)
        read_by_minute[m] = read_by_minute.get(m, 0) + (b["records_read"] or 0)
    print("\nper minute of record time (freshness) and of wall time (batches started, CPU as % of one core: the "
          "sink's process tree, the producer, broker + moto, other processes, hypervisor steal):")
    print("| minute | records | p50 s | p99 s | max s | committing batches | max archive s | records read | sink CPU % "
          "| producer CPU % | broker+moto CPU % | other CPU % | steal % |")
    print("|---:|" + "---:|" * 12)
    for m in f["per_minute"]:
        c = cpu.get(m["minute"], {})
        bs = batches_by_minute.get(m["minute"], [])
        print(f"| {m['minute']} | {m['n']:,} | {m['p50'] / 1000:.2f} | {m['p99'] / 1000:.2f} | {m['max'] / 1000:.2f} "
              f"| {len(bs)} | {max((b['archive'] or 0 for b in bs), default=0):.2f} "
              f"| {read_by_minute.get(m['minute'], 0):,} | {c.get('sink', 0):.0f} | {c.get('producer', 0):.0f} "
              f"| {c.get('broker', 0) + c.get('moto', 0):.0f} | {c.get('other', 0):.0f} | {c.get('steal', 0):.0f} |")
    if f["breakdown"]:
        print("\nwhere the time goes (mean seconds per record; the parts add up to the freshness):")
        print("| records | " + " | ".join(PARTS) + " | freshness |")
        print("|---|" + "---:|" * (len(PARTS) + 1))
        for label, row in f["breakdown"].items():
            print(f"| {label} | " + " | ".join(f"{row[k] / 1000:.2f}" for k in (*PARTS, "freshness")) + " |")
    b, a = f["batch_seconds"], f["archive_seconds"]
    print(f"\n{f['batches']} committed batches of {f['polls']} polls; batch seconds p50 {b['p50']:.2f} p99 "
          f"{b['p99']:.2f} max {b['max']:.2f} (archive p50 {a['p50']:.2f} max {a['max']:.2f}); records read "
          f"{f['records_read']:,} by all polls for {f['records_committed']:,} committed "
          f"({f['records_read'] / max(1, f['records_committed']):.2f}x: open files are read again by each poll until "
          f"they close)")
    eo = "exactly once" if not f["exactly_once_problems"] and f["archived"] == p["acked"] else "NOT exactly once"
    print(f"archived {f['archived']:,} records of {p['acked']:,} acknowledged (Kafka end offsets "
          f"{sum(f['ends'].values()):,}): {eo} {f['exactly_once_problems'] or ''}")
    print(f"window records committed only by the tail run: {f['in_window_committed_by_tail']:,}; sink exit "
          f"{f['sink_exit']} after SIGINT, tail run exit {f['tail_exit']}")
    if reader.other:
        print(f"sink stdout, non-batch lines: {reader.other[:5]}")
    err = (work / "sink.stderr").read_text(errors="replace").strip()
    if err:
        print(f"sink stderr ({len(err.splitlines())} lines): {err[-800:]}")


if __name__ == "__main__":
    sys.exit(main())
