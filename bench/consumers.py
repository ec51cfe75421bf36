"""CPU per partition read: a Kafka consumer per range (Spark's Python workers) against the consumer a local worker
keeps from one range to the next (``lakesink.executor.kept_consumer``), on a plaintext and on a SASL_SSL listener.

    .venv/bin/python bench/consumers.py [--partitions 64] [--records 15625] [--rounds 3]

One devstack KafkaBroker with a PLAINTEXT and a SASL_SSL listener (SCRAM-SHA-512, its generated private CA, as
``lakesink dev up --kafka-security sasl_ssl`` runs it). One topic of ``--partitions`` partitions holding
``--records`` records each (``bench/sink.py``'s JSON values, a key and two headers each: the issue's shape; the
default is 1M records over 64 partitions, ``bench/scale.py``'s wide shape). Per round and listener, in turn:
``lakesink.executor.kafka_reader.read_range`` over every partition, one range each (what the sink's tasks read),
first with a consumer per range, then with kept consumers, in this process, with the cyclic GC off as in a sink
task. Both with ``kafka.fetch.max.wait.ms`` 10: a kept consumer is lent again only once the fetch its last read
left at the broker has come back (up to ``fetch.wait.max.ms``, librdkafka's default 500 ms), and here the reads
follow each other with nothing between them, where a sink's task archives each range before the next. CPU is this
process's user+system time (``resource.getrusage``: librdkafka's threads included; the broker's own CPU is not
counted). Printed: ms of CPU per partition read (medians of the rounds), the ratio kept / per
range, and the wall time per partition. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import gc
import resource
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import sink as bench_sink  # noqa: E402  (bench/sink.py: data shapes and producer)


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def read_all(conf: dict, topic: str, partitions: int, records: int) -> int:
    """Read every partition's ``[0, records)`` with the direct reader; the records read."""
    from lakesink.executor.kafka_reader import read_range

    return sum(b.num_rows for p in range(partitions)
               for b in read_range(conf, topic, p, 0, records, key=True, headers=True))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--records", type=int, default=15_625, help="records per partition")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)

    from lakesink.devstack.kafka import KafkaBroker
    from lakesink.executor import kept_consumer
    from lakesink.executor.kafka_reader import consumer_config

    broker = KafkaBroker(security="sasl_ssl", heap="1g")
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        broker.start()
        topic = "bench-consumers"
        broker.create_topic(topic, partitions=a.partitions)
        saved = bench_sink.PARTITIONS
        bench_sink.PARTITIONS = a.partitions  # its producer places record i on partition i % PARTITIONS
        try:
            bench_sink.produce(broker.bootstrap_servers, topic, a.records * a.partitions, bench_sink.json_value,
                               key=bench_sink.record_key, headers=bench_sink.record_headers)
        finally:
            bench_sink.PARTITIONS = saved
        wait = {"fetch.max.wait.ms": "10"}
        secured = {k.removeprefix("kafka."): v for k, v in broker.client_options().items()}
        listeners = {"PLAINTEXT": consumer_config({"bootstrap.servers": broker.bootstrap_servers, **wait},
                                                  "bench-consumers"),
                     "SASL_SSL": consumer_config({**secured, **wait}, "bench-consumers")}
        gc.disable()  # as in a sink task (lakesink.executor.task.archive_partitions)
        for _ in range(a.rounds):
            for listener, conf in listeners.items():
                for mode, keep in (("per range", False), ("kept", True)):
                    kept_consumer.keep_consumers(keep)
                    c0, w0 = cpu(), time.perf_counter()
                    n = read_all(conf, topic, a.partitions, a.records)
                    c1, w1 = cpu(), time.perf_counter()
                    kept_consumer.keep_consumers(False)
                    assert n == a.records * a.partitions, n
                    results.setdefault((listener, mode), []).append((c1 - c0, w1 - w0))
                    gc.collect()
    finally:
        gc.enable()
        broker.stop()

    per = lambda k, i: statistics.median(x[i] for x in results[k]) / a.partitions * 1000  # noqa: E731
    print(f"\n{a.partitions} partitions of {a.records:,} records (JSON values, a key and two headers each), one range "
          f"each; medians of {a.rounds} round(s)\n")
    print("| listener | consumer | ms CPU per partition | kept / per range | ms wall per partition |")
    print("|---|---|---:|---:|---:|")
    for listener in ("PLAINTEXT", "SASL_SSL"):
        base = per((listener, "per range"), 0)
        for mode in ("per range", "kept"):
            ms = per((listener, mode), 0)
            ratio = f"{ms / base:.2f}x" if mode == "kept" else ""
            print(f"| {listener} | {mode} | {ms:.1f} | {ratio} | {per((listener, mode), 1):.0f} |")
    print("\nper round, ms CPU per partition: " + "; ".join(
        f"{lst} {mode} " + ", ".join(f"{c / a.partitions * 1000:.1f}" for c, _w in v)
        for (lst, mode), v in results.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
