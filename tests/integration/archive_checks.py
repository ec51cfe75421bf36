"""Shared helpers for sink tests: produce records, build configs, check the archive through the manifest."""
from __future__ import annotations

import json
from collections import defaultdict

from lakesink.archive import iter_objects, read_object
from lakesink.formats.base import RecordView
from lakesink.manifest import Manifest
from lakesink.store import StoreSettings, open_store


def produce(kafka, topic: str, values: list[bytes], keys: list[bytes] | None = None,
            partition_of=None, headers=True, timestamps: list[int] | None = None) -> dict[int, list[tuple[int, bytes, bytes]]]:
    """Produce and return {partition: [(offset, key, value)]} as Kafka assigned them."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5, "enable.idempotence": True})
    out: dict[int, list] = defaultdict(list)
    errors = []

    def done(err, msg):
        if err:
            errors.append(err)
        else:
            out[msg.partition()].append((msg.offset(), msg.key(), msg.value()))

    for i, v in enumerate(values):
        kw = {}
        if partition_of is not None:
            kw["partition"] = partition_of(i)
        if timestamps is not None:
            kw["timestamp"] = timestamps[i]
        p.produce(topic, value=v, key=keys[i] if keys else f"k{i}".encode(),
                  headers=[("i", str(i).encode())] if headers else None, on_delivery=done, **kw)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(60)
    assert not errors, errors
    return {k: sorted(v) for k, v in out.items()}


def base_config(kafka, s3, bucket: str, topic: str, **over) -> dict:
    cfg = {
        "name": f"job-{topic}",
        "topics": topic,
        "flush.size": "10",
        "format.class": "json",
        "s3.bucket.name": bucket,
        "s3.region": "us-east-1",
        "store.url": s3.endpoint_url,
        "aws.access.key.id": "testing",
        "aws.secret.access.key": "testing",
        "manifest.location": f"s3a://{bucket}/_lakesink/manifest",
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
    }
    cfg.update({k.replace("_", "."): v for k, v in over.items()})
    return cfg


def manifest_rows(spark, cfg) -> list:
    from pyspark.sql import functions as F

    return Manifest(spark, cfg.manifest_location).df().where(F.col("job") == cfg.name).collect()


def check_chains(rows, expected_end: dict[tuple[str, int], int] | None = None) -> dict[tuple[str, int], int]:
    """Ranges of each partition chain from 0 with no gap/overlap; returns next offset per partition."""
    by = defaultdict(set)
    for r in rows:
        by[(r.topic, r.kafka_partition)].add((r.range_start, r.range_end))
    nxt = {}
    for tp, ranges in by.items():
        expect = 0
        for a, b in sorted(ranges):
            assert a == expect, f"{tp}: range [{a}, {b}] does not chain from {expect}: {sorted(ranges)}"
            expect = b + 1
        nxt[tp] = expect
    if expected_end is not None:
        assert nxt == expected_end, (nxt, expected_end)
    return nxt


def archived_values(spark, cfg, view=RecordView.VALUE) -> dict[tuple[str, int], list]:
    """Every archived value per partition, objects in first-offset order, read and etag-verified."""
    rows = manifest_rows(spark, cfg)
    store = open_store(StoreSettings.from_config(cfg))
    fmt = {RecordView.VALUE: cfg.value_format, RecordView.KEYS: cfg.keys_format,
           RecordView.HEADERS: cfg.headers_format}[view]()
    out = defaultdict(list)
    for obj in iter_objects(rows):
        out[(obj.topic, obj.kafka_partition)].extend(read_object(store, fmt, obj, view))
    return dict(out)


def json_values(raw: list[bytes]) -> list:
    return [json.loads(v) for v in raw]
