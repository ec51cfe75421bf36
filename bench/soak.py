"""Soak: ``lakesink sink --continuous`` for N minutes under a steady produce rate, sampled every minute.

    .venv/bin/python bench/soak.py [--minutes 30] [--rate 500] [--interval 15s] [--flush-size 1000]

Starts its own Kafka broker (KRaft) and moto S3 endpoint (a separate process), one 2-partition topic, a
producer thread at ``--rate`` JSON records/s (~200 B each), and the CLI as users run it:
``python -m lakesink.cli --format json sink --config F --continuous --interval I --master local[1]`` in its own
process group, with its own ``TMPDIR``, ``SPARK_LOCAL_DIRS``, ``java.io.tmpdir`` and ``LAKESINK_LOG_DIR`` (all under
one work directory, so every temporary file the run makes is counted). Each minute it samples, from /proc:

* RSS of the driver (the CLI's Python process), of the Spark JVM, and of the Python workers (sum);
* open file descriptors of the driver, the JVM and the workers (sum);
* sizes of the run's temp dir, Spark scratch dir and log dir;
* objects and records committed in the minute (from the CLI's JSON batch lines), and the lag (records
  produced minus records committed).

At the end the sink gets SIGTERM (it finishes its batch and exits 0), ``lakesink status`` reports the lag per
partition, and the script prints the table plus a verdict: the growth of each resource from the second sample
(first minute excluded: warm-up) to the last, and the spread of objects per minute. It never asserts;
``bench/results/soak-latest.json`` keeps the samples. Not part of CI (it runs for half an hour).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

TOPIC = "soak-json"
PARTITIONS = 2
BUCKET = "soak"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def value(i: int) -> bytes:
    """A ~200 B JSON order (same shape at every rate)."""
    return json.dumps({"id": i, "customer": f"c{i % 9973:05d}", "sku": f"sku-{i % 777:04d}", "qty": i % 13,
                       "price_cents": (i * 7919) % 100000, "status": ("new", "paid", "shipped")[i % 3],
                       "note": "x" * 80}, separators=(",", ":")).encode()


class Producer(threading.Thread):
    """Produces ``rate`` records/s in 10 slices a second until stopped; counts what the broker acknowledged."""

    def __init__(self, servers: str, rate: int):
        super().__init__(name="soak-producer", daemon=True)
        from confluent_kafka import Producer as KProducer

        self.p = KProducer({"bootstrap.servers": servers, "linger.ms": 20, "acks": "all",
                            "enable.idempotence": True})
        self.rate, self.sent, self.acked, self.errors = rate, 0, 0, 0
        self.stop_event = threading.Event()

    def _done(self, err, _msg) -> None:
        if err:
            self.errors += 1
        else:
            self.acked += 1

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop_event.is_set():
            due = int((time.monotonic() - t0) * self.rate)
            while self.sent < due:
                self.p.produce(TOPIC, value=value(self.sent), partition=self.sent % PARTITIONS, on_delivery=self._done)
                self.sent += 1
            self.p.poll(0.1)
        self.p.flush(60)


class BatchReader(threading.Thread):
    """Reads the CLI's stdout: one JSON line per committed batch, kept with the time it arrived."""

    def __init__(self, stream):
        super().__init__(name="soak-batches", daemon=True)
        self.stream, self.batches, self.other = stream, [], []

    def run(self) -> None:
        for raw in self.stream:
            line = raw.decode(errors="replace").strip()
            if line.startswith("{"):
                try:
                    data = json.loads(line)
                except ValueError:
                    data = None
                if isinstance(data, dict) and "batch_id" in data:
                    self.batches.append((time.monotonic(), data))
                    continue
            if line:
                self.other.append(line)


# ---------------------------------------------------------------------------------------------- /proc sampling

def _procs() -> dict[int, tuple[int, str]]:
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, ValueError, IndexError):
                continue
            out[int(d)] = (ppid, cmd)
    return out


def _tree(root: int, procs: dict[int, tuple[int, str]]) -> list[int]:
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _cmd) in procs.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    return sorted(p for p in tree if p in procs)


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _du_mb(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total / 1e6


def _cpu_s(pids: list[int]) -> float:
    tck = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
            total += (int(rest[11]) + int(rest[12])) / tck
        except (OSError, ValueError, IndexError):
            pass
    return total


def sample(driver: int, dirs: dict[str, Path]) -> dict:
    """One reading of the sink's process tree: the driver, the JVM, the Python workers (everything else)."""
    procs = _procs()
    tree = _tree(driver, procs)
    jvm = [p for p in tree if p != driver and "java" in procs[p][1].split(" ")[0]]
    workers = [p for p in tree if p != driver and p not in jvm]
    return {
        "driver_rss_mb": _rss_mb(driver), "jvm_rss_mb": sum(_rss_mb(p) for p in jvm),
        "workers_rss_mb": sum(_rss_mb(p) for p in workers), "workers": len(workers),
        "driver_fds": _fds(driver), "jvm_fds": sum(_fds(p) for p in jvm), "workers_fds": sum(_fds(p) for p in workers),
        "cpu_s": _cpu_s(tree), **{f"{k}_mb": _du_mb(v) for k, v in dirs.items()},
    }


# ---------------------------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--rate", type=int, default=500, help="records per second produced (steady)")
    ap.add_argument("--interval", default="15s", help="the sink's --interval")
    ap.add_argument("--flush-size", type=int, default=1000)
    ap.add_argument("--master", default="local[1]")
    ap.add_argument("--sample-s", type=float, default=60.0, help="seconds between samples")
    ap.add_argument("--out", default=str(HERE / "results" / "soak-latest.json"))
    args = ap.parse_args(argv)

    from lakesink.devstack.kafka import KafkaBroker
    from lakesink.devstack.s3 import S3Endpoint

    work = Path(tempfile.mkdtemp(prefix="lakesink-soak-"))
    dirs = {"tmp": work / "tmp", "scratch": work / "spark-scratch", "logs": work / "logs"}
    for d in dirs.values():
        d.mkdir()
    kafka, s3 = KafkaBroker(), S3Endpoint()
    sink = producer = None
    samples: list[dict] = []
    try:
        kafka.start()
        s3.spawn(work / "s3.log")
        s3.create_bucket(BUCKET)
        kafka.create_topic(TOPIC, partitions=PARTITIONS)
        name = f"soak-{uuid.uuid4().hex[:6]}"
        cfg = {"name": name, "topics": TOPIC, "format.class": "json", "flush.size": str(args.flush_size),
               "s3.bucket.name": BUCKET, "s3.region": "us-east-1", "store.url": s3.endpoint_url,
               "aws.access.key.id": "testing", "aws.secret.access.key": "testing",
               "manifest.location": f"s3a://{BUCKET}/_lakesink/manifest",
               "kafka.bootstrap.servers": kafka.bootstrap_servers}
        cfg_file = work / "sink.json"
        cfg_file.write_text(json.dumps(cfg))
        env = {**os.environ, "TMPDIR": str(dirs["tmp"]), "SPARK_LOCAL_DIRS": str(dirs["scratch"]),
               "LAKESINK_LOG_DIR": str(dirs["logs"]), "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={dirs['tmp']}",
               "PYTHONPATH": str(HERE.parent), "SPARK_LOCAL_IP": "127.0.0.1"}

        producer = Producer(kafka.bootstrap_servers, args.rate)
        producer.start()
        cmd = [sys.executable, "-m", "lakesink.cli", "--format", "json", "sink", "--config", str(cfg_file),
               "--continuous", "--interval", args.interval, "--master", args.master]
        sink = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=open(work / "sink.stderr", "wb"),
                                start_new_session=True, cwd=work)
        reader = BatchReader(sink.stdout)
        reader.start()
        log(f"soak: {args.minutes:g} min, {args.rate} rec/s, interval {args.interval}, flush.size {args.flush_size}, "
            f"{args.master}; work dir {work}")
        t0 = time.monotonic()
        end = t0 + args.minutes * 60
        prev_cpu, seen_batches = 0.0, 0
        while time.monotonic() < end:
            time.sleep(min(args.sample_s, max(0.0, end - time.monotonic())))
            if sink.poll() is not None:
                log(f"the sink exited early with {sink.returncode}: {reader.other[-3:]}")
                break
            s = sample(sink.pid, dirs)
            batches = reader.batches[seen_batches:]
            seen_batches += len(batches)
            s.update({"minute": round((time.monotonic() - t0) / 60, 2), "batches": len(batches),
                      "objects": sum(b["objects"] for _t, b in batches),
                      "records": sum(b["records"] for _t, b in batches),
                      "produced": producer.acked,
                      "archived": sum(b["records"] for _t, b in reader.batches)})
            s["lag"] = s["produced"] - s["archived"]
            s["cpu_pct"] = 100 * (s["cpu_s"] - prev_cpu) / args.sample_s
            prev_cpu = s["cpu_s"]
            samples.append(s)
            log(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in s.items()))
        producer.stop_event.set()
        producer.join(90)
        log("SIGTERM to the sink (it finishes its batch)")
        sink.send_signal(signal.SIGTERM)
        try:
            rc = sink.wait(timeout=180)
        except subprocess.TimeoutExpired:
            os.killpg(sink.pid, signal.SIGKILL)
            rc = sink.wait()
        reader.join(10)
        status = subprocess.run([sys.executable, "-m", "lakesink.cli", "--format", "json", "status", "--config",
                                 str(cfg_file)], env=env, capture_output=True, timeout=300, cwd=work)
        report(args, samples, reader, producer, rc, status, work)
        return 0
    finally:
        if producer is not None:
            producer.stop_event.set()
        if sink is not None and sink.poll() is None:
            os.killpg(sink.pid, signal.SIGKILL)
            sink.wait()
        s3.stop()
        kafka.stop()
        shutil.rmtree(work, ignore_errors=True)


def report(args, samples: list[dict], reader: BatchReader, producer: Producer, rc: int, status, work: Path) -> None:
    cols = [("minute", "min", "{:.0f}"), ("driver_rss_mb", "driver RSS MB", "{:.0f}"),
            ("jvm_rss_mb", "JVM RSS MB", "{:.0f}"), ("workers_rss_mb", "workers RSS MB", "{:.0f}"),
            ("workers", "workers", "{}"), ("driver_fds", "driver fds", "{}"), ("jvm_fds", "JVM fds", "{}"),
            ("workers_fds", "workers fds", "{}"), ("tmp_mb", "tmp MB", "{:.1f}"),
            ("scratch_mb", "scratch MB", "{:.1f}"), ("logs_mb", "logs MB", "{:.2f}"),
            ("batches", "batches", "{}"), ("objects", "objects", "{}"), ("records", "records", "{}"),
            ("lag", "lag", "{}"), ("cpu_pct", "CPU %", "{:.0f}")]
    print(f"\nSoak: lakesink sink --continuous --interval {args.interval} --master {args.master}, "
          f"{args.rate} JSON records/s (~200 B) into {PARTITIONS} partitions, flush.size {args.flush_size}, "
          f"moto S3, manifest on s3a://; sampled every {args.sample_s:g} s")
    print("| " + " | ".join(h for _k, h, _f in cols) + " |")
    print("|" + "---|" * len(cols))
    for s in samples:
        print("| " + " | ".join(f.format(s[k]) for k, _h, f in cols) + " |")
    if len(samples) >= 3:
        a, b = samples[1], samples[-1]  # the first minute is warm-up (JVM start, first batches)
        print(f"\ngrowth from minute {a['minute']:.0f} to {b['minute']:.0f}:")
        for k, h, _f in cols[1:11]:
            print(f"  {h}: {a[k]:.1f} -> {b[k]:.1f} ({b[k] - a[k]:+.1f})")
        per_min = [s["objects"] / (args.sample_s / 60) for s in samples[1:]]
        print(f"  objects per minute (after the first): mean {statistics.mean(per_min):.1f}, "
              f"min {min(per_min):.0f}, max {max(per_min):.0f}, stdev {statistics.pstdev(per_min):.1f}")
    print(f"produced {producer.acked:,} records ({producer.errors} produce errors); {len(reader.batches)} batches "
          f"committed {sum(b['records'] for _t, b in reader.batches):,} records in "
          f"{sum(b['objects'] for _t, b in reader.batches):,} objects; sink exit {rc} after SIGTERM")
    if reader.other:
        print(f"sink stdout, non-batch lines: {reader.other[:5]}")
    try:
        st = json.loads(status.stdout)
        print(f"lakesink status: total lag {st['total_lag']} (records below flush.size stay open per partition), "
              f"healthy={st['healthy']}, orphans={st['orphans']}")
    except ValueError:
        st = None
        print(f"lakesink status failed ({status.returncode}): {status.stderr.decode(errors='replace')[-500:]}")
    err = (work / "sink.stderr").read_text(errors="replace").strip()
    if err:
        print(f"sink stderr ({len(err.splitlines())} lines): {err[-1000:]}")
    for log_file in sorted((work / "logs").glob("*.log")):  # the run's Spark log, kept next to the samples
        kept = Path(args.out).with_suffix(".spark.log")
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log_file, kept)
        print(f"Spark log of the run copied to {kept}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "samples": samples, "exit": rc, "status": st,
                               "produced": producer.acked}, indent=1))
    log(f"samples written to {out}")


if __name__ == "__main__":
    sys.exit(main())
