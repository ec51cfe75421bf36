"""lakesink against the floor: what no archiver can beat on this machine, measured on the same data in the same run.

    .venv/bin/python bench/floor.py [--records 1000000] [--runs 2] [--flush-size 50000]

One KafkaBroker and one moto S3 endpoint (its own process) for the whole run; one 4-partition topic of N JSON
values of ~200 B (``bench/sink.py``'s ``bench-json``, null keys). Each run, alternating, every path a fresh process
(cold, as users meet it), timed from spawn to exit, CPU the process tree's user+system time (``bench/cold.py``):

* **sink**: ``lakesink sink --once --flush-tail`` (the local engine, what ``--engine auto`` picks here), a new job
  and manifest each run, vs the **sink floor**: librdkafka (confluent-kafka) consuming exactly the same offsets
  into memory, then the values joined with newlines (a JSON-lines object's bytes) uploaded as ONE multipart
  upload (boto3, 16 MiB parts) to the same endpoint. No object naming, rotation, manifest, side files or
  exactly-once protocol: a lower bound, not a competitor.
* **sink (no native check)**: the same sink with ``LAKESINK_NATIVE=0``: JSON values proven canonical (copied as they
  are, as Connect's JsonConverter would write them again) by parsing each one in Python (orjson), not by
  lakesink-native's one pass over the column (``lakesink/objects/formats/native.py``). Same objects either way.
* **sink (bytearray)**: the same sink with ``format.class=bytearray``, same records, same floor: the values stored
  as they are, no check at all.
* **restore**: ``lakesink restore --to-topic`` of that archive into a fresh 4-partition topic (transactional,
  exactly once, from the objects on S3), vs the **restore floor**: the same values, already on local disk,
  produced by one transactional librdkafka producer into another fresh topic, committing every ``DEFAULT_RECORDS_PER_TXN``
  records (imported: lakesink's restore's own default, 50,000 today), partition i % 4.

Ratio = lakesink / floor for wall time and for CPU (1.0 would be the floor itself). Target (issue #30 item 4,
printed, never asserted): <= 2x the floor for both paths.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import cold  # noqa: E402  (bench/cold.py: process-tree CPU, steal)
import sink as bench_sink  # noqa: E402  (bench/sink.py: data shapes, producer, configs)
from lakesink.executor.restore import DEFAULT_RECORDS_PER_TXN as RECORDS_PER_TXN  # noqa: E402
from lakesink.objects.formats.native import ENV as NATIVE_ENV, native_module  # noqa: E402

TOPIC = bench_sink.TOPIC_OF["json"]
PART_SIZE = 16 * 1024 * 1024
TARGET = 2.0
#: the sinks of a run: (path, format.class, job name suffix, environment); the first one's archive is restored
SINKS = (("sink", "json", "", {}), ("sink (no native check)", "json", "-p", {NATIVE_ENV: "0"}),
         ("sink (bytearray)", "bytearray", "-b", {}))
#: each lakesink path and the floor it is compared with
FLOOR_OF = {**{path: "sink floor" for path, *_ in SINKS}, "restore": "restore floor"}
PATHS = tuple(FLOOR_OF)


def sink_floor_child(args) -> int:
    """Consume the topic's offsets into memory, upload the values as one multipart object."""
    import boto3
    from boto3.s3.transfer import TransferConfig
    from confluent_kafka import Consumer, TopicPartition
    import io

    ends = {int(p): e for p, e in json.loads(args.ends).items()}
    c = Consumer({"bootstrap.servers": args.servers, "group.id": f"floor-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "enable.partition.eof": False, "fetch.max.bytes": 64 << 20,
                  "max.partition.fetch.bytes": 16 << 20})
    c.assign([TopicPartition(TOPIC, p, 0) for p in ends])
    values: list[bytes] = []
    left = sum(ends.values())
    while left > 0:
        for m in c.consume(num_messages=10_000, timeout=1.0):
            if m.error() is None and m.offset() < ends[m.partition()]:
                values.append(m.value())
                left -= 1
    c.close()
    body = b"\n".join(values) + b"\n"
    s3 = boto3.client("s3", endpoint_url=args.endpoint, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    s3.upload_fileobj(io.BytesIO(body), bench_sink.BUCKET, f"floor/{uuid.uuid4().hex}.json",
                      Config=TransferConfig(multipart_threshold=PART_SIZE, multipart_chunksize=PART_SIZE,
                                            use_threads=False))
    print(json.dumps({"records": len(values), "bytes": len(body)}))
    return 0


def restore_floor_child(args) -> int:
    """Produce the values of ``--values`` (one per line) transactionally into ``--topic``."""
    from confluent_kafka import Producer

    values = Path(args.values).read_bytes().split(b"\n")[:-1]
    p = Producer({"bootstrap.servers": args.servers, "transactional.id": f"floor-{uuid.uuid4().hex[:8]}",
                  "linger.ms": 5, "enable.idempotence": True, "acks": "all", "compression.type": "none"})
    p.init_transactions(30)
    for start in range(0, len(values), RECORDS_PER_TXN):
        p.begin_transaction()
        for i in range(start, min(start + RECORDS_PER_TXN, len(values))):
            while True:
                try:
                    p.produce(args.topic, values[i], partition=i % bench_sink.PARTITIONS)
                    break
                except BufferError:
                    p.poll(0.05)
        p.commit_transaction(60)
    print(json.dumps({"records": len(values)}))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--flush-size", type=int, default=50_000)
    for hidden in ("--sink-floor", "--restore-floor"):
        ap.add_argument(hidden, action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--servers", "--endpoint", "--ends", "--values", "--topic"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.sink_floor:
        return sink_floor_child(args)
    if args.restore_floor:
        return restore_floor_child(args)

    from confluent_kafka import Consumer, TopicPartition

    from lakesink.devstack.kafka import KafkaBroker
    from lakesink.devstack.s3 import S3Endpoint
    from lakesink.driver.kafka_admin import KafkaMetadata

    cold.wheel_bytecode()  # lakesink as an installed wheel has it
    work = Path(tempfile.mkdtemp(prefix="lakesink-floor-"))
    kafka, s3 = KafkaBroker(heap="1g"), S3Endpoint()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    try:
        servers = cold.start_stack(kafka, s3, work)
        kafka.create_topic(TOPIC, partitions=bench_sink.PARTITIONS)
        cold.log(f"producing {args.records:,} JSON records to {TOPIC}")
        value_bytes = bench_sink.produce(servers, TOPIC, args.records, bench_sink.json_value)
        snap = KafkaMetadata({"bootstrap.servers": servers}).snapshot([TOPIC])
        ends = {p: b.latest for (_t, p), b in snap.bounds.items()}
        total = sum(ends.values())
        # the restore floor's input: the same values, on local disk before its process starts
        c = Consumer({"bootstrap.servers": servers, "group.id": "floor-dump", "enable.auto.commit": False})
        c.assign([TopicPartition(TOPIC, p, 0) for p in ends])
        dump, left = [], total
        while left > 0:
            for m in c.consume(num_messages=10_000, timeout=1.0):
                if m.error() is None:
                    dump.append(m.value())
                    left -= 1
        c.close()
        values_file = work / "values.jsonl"
        values_file.write_bytes(b"\n".join(dump) + b"\n")
        del dump
        cold.log(f"{total:,} records, {value_bytes / 1e6:.0f} MB of values; {args.runs} run(s); lakesink-native "
                 + ("installed" if native_module() is not None else "NOT installed: the first two sinks are the same"))

        rows = []
        for run in range(args.runs):
            name = f"floor-{run}-{uuid.uuid4().hex[:6]}"
            row = {}
            for path, fmt, suffix, extra_env in SINKS:
                job = name + suffix
                cfg = bench_sink.sink_config(fmt, job, servers, s3.endpoint_url,
                                             f"s3a://{bench_sink.BUCKET}/_lakesink/{job}", args.flush_size,
                                             {"topics.dir": f"floor/{job}"})
                job_file = work / f"{job}.json"
                job_file.write_text(json.dumps(cfg))
                wall, cpu, out = cold.run_measured([sys.executable, "-m", "lakesink.cli", "--format", "json", "sink",
                                                    "--config", str(job_file), "--once", "--flush-tail"],
                                                   {**env, **extra_env})
                assert json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])["records"] == total
                row[path] = (wall, cpu)
            cfg_file = work / f"{name}.json"  # the first sink's archive: what restore reads
            wall, cpu, out = cold.run_measured([sys.executable, __file__, "--sink-floor", "--servers", servers,
                                                "--endpoint", s3.endpoint_url, "--ends", json.dumps(ends)], env)
            assert json.loads(out.splitlines()[-1])["records"] == total
            row["sink floor"] = (wall, cpu)
            dest = f"{name}-restored"
            kafka.create_topic(dest, partitions=bench_sink.PARTITIONS)
            wall, cpu, out = cold.run_measured([sys.executable, "-m", "lakesink.cli", "--format", "json", "restore",
                                                "--config", str(cfg_file), "--to-topic", dest], env)
            restored = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
            assert restored.get("produced", restored.get("records")) == total, restored
            row["restore"] = (wall, cpu)
            dest = f"{name}-floor"
            kafka.create_topic(dest, partitions=bench_sink.PARTITIONS)
            wall, cpu, out = cold.run_measured([sys.executable, __file__, "--restore-floor", "--servers", servers,
                                                "--values", str(values_file), "--topic", dest], env)
            assert json.loads(out.splitlines()[-1])["records"] == total
            row["restore floor"] = (wall, cpu)
            cold.log(f"run {run}: " + ", ".join(f"{k} {w:.1f} s / {c:.1f} CPU-s" for k, (w, c) in row.items()))
            rows.append(row)

        per_m = 1e6 / total
        print(f"\nAgainst the floor, {total:,} JSON records (~{value_bytes / total:.0f} B), 4 partitions, moto S3, "
              f"flush.size {args.flush_size:,}, {os.cpu_count()} CPUs; cold processes, lakesink's local engine")
        print("| run | path | lakesink s | floor s | wall ratio | lakesink CPU-s/M | floor CPU-s/M | CPU ratio |")
        print("|---|---|---|---|---|---|---|---|")
        for i, row in enumerate(rows):
            for path in PATHS:
                (w, c), (fw, fc) = row[path], row[FLOOR_OF[path]]
                print(f"| {i} | {path} | {w:.1f} | {fw:.1f} | {w / fw:.2f}x | {c * per_m:.1f} | {fc * per_m:.1f} "
                      f"| {c / fc:.2f}x |")
        print()
        for path in PATHS:
            wr = statistics.median(r[path][0] / r[FLOOR_OF[path]][0] for r in rows)
            cr = statistics.median(r[path][1] / r[FLOOR_OF[path]][1] for r in rows)
            print(f"{path}: median lakesink / floor {wr:.2f}x wall, {cr:.2f}x CPU (target <= {TARGET:.0f}x both)")
        return 0
    finally:
        s3.stop()
        kafka.stop()


if __name__ == "__main__":
    sys.exit(main())
