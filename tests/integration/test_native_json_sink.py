"""The JSON sink writes the same objects with lakesink-native's check and without it (LAKESINK_NATIVE=0), on both
engines: values the native pass proves are copied, the rest decided in Python as before."""
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
        out = subprocess.run([sys.executable, "-m", "lakesink.cli", "--format", "json", "sink", "--config",
                              write_config(tmp_path, cfg, f"sink{native}.json"), "--once", "--flush-tail",
                              "--engine", engine, "--master", "local[2]"],
                             capture_output=True, text=True, timeout=300, cwd=tmp_path,
                             env={**os.environ, ENV: native})
        assert out.returncode == 0, out.stderr[-3000:]
        assert json.loads(out.stdout.splitlines()[-1])["records"] == len(VALUES)
        got[native] = _objects(s3, bucket, f"n{native}/")
    assert len(got["1"]) == 2 and got["1"] == got["0"]
    lines = sorted(line for body in got["1"].values() for line in body.decode().splitlines())
    assert lines == sorted(json.dumps(json.loads(v), separators=(",", ":"), ensure_ascii=False) for v in VALUES)
