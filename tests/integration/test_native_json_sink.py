"""The sink writes the same objects with lakesink-native's kernels and without them (LAKESINK_NATIVE=0), on both
engines: JSON values the native pass proves are copied, the rest decided in Python as before; the keys and headers
side files (Avro and JSON) are the bytes of the Python twins."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.archive_checks import base_config, produce, write_config

from lakesink.objects.formats.native import ENV

#: canonical values, and values the native check leaves to Python: whitespace, a 17-digit float (repr's own), an
#: exponent, escapes Python writes otherwise, a repeated key
VALUES = [json.dumps({"i": i, "amount": round(i * 1.37, 2), "name": f"Zoë {i}", "tags": ["a", i]},
                     separators=(",", ":"), ensure_ascii=False).encode() for i in range(40)] + [
    b'{"i": 40}', b'{"x":0.30000000000000004}', b'{"x":1e5}', b'{"e":"\\u00e9","s":"\\/"}', b'{"k":1,"k":2}',
    b'{"deep":[[[{"a":null}]]],"t":"tab\\there"}']


def _sink(engine: str, config: str, cwd, native: str) -> None:
    """A cold ``lakesink sink --once --flush-tail`` of all VALUES, lakesink-native on ("1") or off ("0")."""
    out = subprocess.run([sys.executable, "-m", "lakesink.cli", "--format", "json", "sink", "--config", config,
                          "--once", "--flush-tail", "--engine", engine, "--master", "local[2]"],
                         capture_output=True, text=True, timeout=300, cwd=cwd, env={**os.environ, ENV: native})
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.splitlines()[-1])["records"] == len(VALUES)


def _objects(s3, bucket: str, prefix: str) -> dict[str, bytes]:
    client = s3.client()
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for o in page.get("Contents", [])]
    # the value objects (the record-metadata side files are Avro: a random sync marker each)
    return {k[len(prefix):]: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys
            if k.endswith(".json")}


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_the_json_sink_writes_the_same_objects_with_and_without_the_native_check(engine, kafka, s3, bucket,
                                                                                 topic_name, tmp_path):
    kafka.create_topic(topic_name, partitions=2)
    produce(kafka, topic_name, VALUES, partition_of=lambda i: i % 2)
    got = {}
    for native in ("1", "0"):
        cfg = base_config(kafka, s3, bucket, topic_name, **{
            "flush.size": "1000", "name": f"job-{native}", "topics.dir": f"n{native}",
            "manifest.location": f"s3a://{bucket}/_lakesink/m{native}"})
        _sink(engine, write_config(tmp_path, cfg, f"sink{native}.json"), tmp_path, native)
        got[native] = _objects(s3, bucket, f"n{native}/")
    assert len(got["1"]) == 2 and got["1"] == got["0"]
    lines = sorted(line for body in got["1"].values() for line in body.decode().splitlines())
    assert lines == sorted(json.dumps(json.loads(v), separators=(",", ":"), ensure_ascii=False) for v in VALUES)


def _produce_keyed(kafka, topic: str) -> None:
    """VALUES with keys and headers: several headers, a null header value, non-ASCII text, and in partition 0 a header
    JSON must escape (the native JSON lines decline that batch: the Python twin writes it)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": True})
    for i, v in enumerate(VALUES):
        headers = [("trace-id", b"%016x" % (i * 2654435761)), ("source", "Zoë".encode()), ("empty", None)]
        if i == 10:
            headers.append(("quote", b'say "hi"'))
        p.produce(topic, value=v, key=b"customer-%05d" % i, headers=headers, partition=i % 2)
    assert p.flush(60) == 0


@pytest.mark.parametrize("side", ["json", "avro"])
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_keys_and_headers_side_files_are_the_same_with_and_without_the_native_kernels(engine, side, kafka, s3, bucket,
                                                                                      topic_name, tmp_path):
    kafka.create_topic(topic_name, partitions=2)
    _produce_keyed(kafka, topic_name)
    client = s3.client()
    got = {}
    for native in ("1", "0"):
        target = f"{bucket}-n{native}"  # the same object keys in two buckets: Avro's sync marker is the key's
        client.create_bucket(Bucket=target)
        cfg = base_config(kafka, s3, target, topic_name, **{
            "flush.size": "1000", "name": f"job-{native}", "store.kafka.keys": "true", "store.kafka.headers": "true",
            "keys.format.class": side, "headers.format.class": side,
            "manifest.location": f"s3a://{target}/_lakesink/manifest"})
        _sink(engine, write_config(tmp_path, cfg, f"sink{native}.json"), tmp_path, native)
        keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=target)
                for o in page.get("Contents", []) if not o["Key"].startswith("_lakesink/")]
        got[native] = {k: client.get_object(Bucket=target, Key=k)["Body"].read() for k in keys
                       if ".keys." in k or ".headers." in k or k.endswith(".json")}
    sides = sorted(k for k in got["1"] if ".keys." in k or ".headers." in k)
    assert len(sides) == 4 and all(k.endswith(f".{side}") for k in sides), sorted(got["1"])
    assert got["1"] == got["0"]
    if side == "json":
        headers = [json.loads(line) for k in sides if ".headers." in k for line in got["1"][k].decode().splitlines()]
        assert {"key": "quote", "value": 'say "hi"'} in [h for rec in headers for h in rec["headers"]]
        assert all(rec["headers"][1:3] == [{"key": "source", "value": "Zoë"}, {"key": "empty", "value": None}]
                   for rec in headers)
