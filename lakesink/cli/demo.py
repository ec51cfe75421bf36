"""`lakesink demo`: the sink end to end on the embedded local stack, explained as it goes.

Starts a real Kafka broker and an S3 endpoint on 127.0.0.1, produces orders to a 3-partition
topic, archives them with a Confluent-style S3 sink config, prints the object keys, the committed
offsets and a SQL query over the Delta manifest, shows that a re-run archives nothing twice,
then stops everything. Exit status 0 only if every produced record is archived exactly once.
:func:`run` returns a :class:`~lakesink.cli.output.DemoResult`; the narration goes through ``say``.
"""
from __future__ import annotations

import json
import time
from typing import Callable

from lakesink.cli.output import DemoResult

TOPIC = "orders"
BUCKET = "lakesink-demo"
RECORDS = 1000

CONFIG = """\
# A Confluent S3 sink config, as pasted from Kafka Connect (connector.class/tasks.max are ignored)
name=orders-archive
connector.class=io.confluent.connect.s3.S3SinkConnector
tasks.max=1
topics=orders
topics.dir=topics
format.class=io.confluent.connect.s3.format.json.JsonFormat
partitioner.class=io.confluent.connect.storage.partitioner.DefaultPartitioner
flush.size=100
store.kafka.keys=true
keys.format.class=io.confluent.connect.s3.format.json.JsonFormat
s3.bucket.name={bucket}
s3.region=us-east-1
store.url={endpoint}
aws.access.key.id=testing
aws.secret.access.key=testing
# lakesink's own keys: where Kafka is, where the manifest lives, how keys are decoded
kafka.bootstrap.servers={bootstrap}
manifest.location=s3a://{bucket}/_lakesink/manifest
key.decoder=string
"""


def _table(rows: list[dict]) -> list[str]:
    """Rows as an aligned text table (what ``DataFrame.show()`` would print)."""
    if not rows:
        return ["   (no rows)"]
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    line = "   +" + "+".join("-" * width[c] for c in cols) + "+"
    out = [line, "   |" + "|".join(c.rjust(width[c]) for c in cols) + "|", line]
    out += ["   |" + "|".join(str(r[c]).rjust(width[c]) for c in cols) + "|" for r in rows]
    return out + [line]


def run(records: int = RECORDS, say: Callable[[str], None] = print) -> DemoResult:
    """The demo; ``say`` narrates it (``lakesink --format json demo`` narrates nothing)."""
    from confluent_kafka import Producer

    from lakesink.config import SinkConfig, parse_properties
    from lakesink.devstack.stack import LocalStack
    from lakesink.driver.sink import SinkJob
    from lakesink.driver.sql import run_queries
    from lakesink.errors import DevStackError
    from lakesink.runners.local import LocalRunner
    from lakesink.runtime.engine import open_engine

    t0 = time.monotonic()
    stack = LocalStack(registry=False)  # the demo's values are JSON: no Schema Registry to download or start
    stack.check_installed("demo")
    with stack:
        say(f"== local stack up in {time.monotonic() - t0:.1f}s: Kafka {stack.kafka.bootstrap_servers}, "
            f"S3 {stack.s3.endpoint_url}")
        stack.kafka.create_topic(TOPIC, partitions=3)
        stack.s3.create_bucket(BUCKET)
        p = Producer({"bootstrap.servers": stack.kafka.bootstrap_servers, "linger.ms": 5})
        for i in range(records):
            order = {"order_id": i, "customer": f"c{i % 17}", "amount_cents": (i * 7919) % 10_000}
            p.produce(TOPIC, key=f"c{i % 17}".encode(), value=json.dumps(order).encode())
        if p.flush(30):
            raise DevStackError("demo: the producer could not deliver every record in 30 s")
        del p  # a live producer would keep reconnecting (and logging) after the broker stops
        say(f"== produced {records} orders to topic {TOPIC!r} (3 partitions)")

        text = CONFIG.format(bucket=BUCKET, endpoint=stack.s3.endpoint_url, bootstrap=stack.kafka.bootstrap_servers)
        say("== config (.properties)\n" + text)
        cfg = SinkConfig.from_dict(parse_properties(text), source="demo.properties")
        for k, why in cfg.ignored_keys:
            say(f"   ignored: {k} ({why})")

        # the engine `lakesink sink` picks on one machine: local worker processes, no JVM (a path manifest and the
        # direct Kafka reader leave Spark nothing to do but schedule Python tasks)
        with open_engine(cfg, "auto", "local[2]") as eng:
            say("== engine: " + ("local worker processes (no JVM)" if isinstance(eng.runner, LocalRunner) else "Spark"))
            batches = [SinkJob(eng.spark, cfg, runner=eng.runner).run_batch()]
            say(f"== batch 1 (flush.size=100; tails below 100 stay uncommitted): {batches[-1].summary()}")
            batches.append(SinkJob(eng.spark, cfg, runner=eng.runner).run_batch(flush_tail=True))
            say(f"== batch 2 (--flush-tail closes the tails): {batches[-1].summary()}")
            batches.append(SinkJob(eng.spark, cfg, runner=eng.runner).run_batch(flush_tail=True))
            say(f"== batch 3 (nothing new: exactly once, nothing re-archived): "
                f"{batches[-1].committed_rows} rows committed")

            keys = sorted(o["Key"] for o in
                          stack.s3.client().list_objects_v2(Bucket=BUCKET, Prefix="topics/").get("Contents", []))
            sample = keys[:4] + keys[-2:] if len(keys) > 6 else keys
            say(f"== {len(keys)} objects under s3://{BUCKET}/topics/, e.g.:")
            for k in (keys[:4] + ["..."] + keys[-2:] if len(keys) > 6 else keys):
                say(f"   {k}")

            query = """SELECT topic, kafka_partition, count_if(kind = 'object') AS objects,
                              sum(CASE WHEN kind = 'object' THEN record_count END) AS records, min(range_start) AS first_offset,
                              max(range_end) AS last_offset, max(range_end) + 1 AS next_offset
                       FROM manifest GROUP BY topic, kafka_partition ORDER BY kafka_partition"""
            say("== manifest query:\n   " + " ".join(query.split()))
            (res, first) = run_queries(cfg, query + "; SELECT object_key, etag FROM manifest WHERE kind='object' "
                                       "ORDER BY kafka_partition, first_offset LIMIT 1", spark=eng.spark, limit=None)
            rows = [dict(zip(res.columns, r)) for r in res.rows]
            say("\n".join(_table(rows)))
            first_key, first_etag = first.rows[0]
            body = stack.s3.client().get_object(Bucket=BUCKET, Key=first_key)["Body"].read()
            say(f"== first lines of {first_key} (etag {first_etag}):")
            for line in body.splitlines()[:2]:
                say(f"   {line.decode()}")
        archived = sum(r["records"] for r in rows)
        ok = archived == records and all(r["first_offset"] == 0 for r in rows)
        return DemoResult(ok=ok, records=records, archived=archived, objects=len(keys), batches=batches,
                          sample_keys=sample, partitions=rows, seconds=time.monotonic() - t0)


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="run the sink end to end on the embedded local stack")
    p.add_argument("--records", type=int, default=RECORDS, help=f"orders to produce (default {RECORDS})")
    p.set_defaults(func=lambda args, output: run(args.records, say=output.progress))
