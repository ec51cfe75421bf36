"""CPU per S3 request: lakesink's store client against a plain boto3 client, same endpoint, same config.

    .venv/bin/python bench/requests.py [--rounds 3] [--keys 1000]

One moto S3 endpoint (its own process). Both clients are made with the config ``lakesink.store.S3Store`` uses
(path-style, one try per call); lakesink's comes from ``lakesink.credentials.boto3_client`` (a Session reading
botocore's data through the process's one loader, S3's dates parsed by ``lakesink.credentials.parse_timestamp``),
the baseline from a new ``boto3.Session`` as any boto3 user makes it. Per round, alternating which goes first:
one ListObjectsV2 page of ``--keys`` keys (5 times), GetObject and HeadObject of 200 small objects each, and
PutObject of 200 objects of 2 KB. CPU is this process's user+system time (``resource.getrusage``) around each
loop; the endpoint's own CPU is not counted. Printed: ms of CPU per request (per page for the listing), and
lakesink / baseline (below 1.0: lakesink's client is cheaper). Nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

BUCKET = "bench-requests"


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def loops(client, keys: int) -> dict[str, float]:
    """ms of CPU per request of each kind, one pass."""
    out = {}
    c0 = cpu()
    for _ in range(5):
        page = client.list_objects_v2(Bucket=BUCKET, Prefix="list/", MaxKeys=keys)
        assert len(page["Contents"]) == keys, len(page["Contents"])
    out["ListObjectsV2 page"] = (cpu() - c0) / 5 * 1000
    c0 = cpu()
    for i in range(200):
        client.get_object(Bucket=BUCKET, Key=f"list/k{i:06d}")["Body"].read()
    out["GetObject"] = (cpu() - c0) / 200 * 1000
    c0 = cpu()
    for i in range(200):
        client.head_object(Bucket=BUCKET, Key=f"list/k{i:06d}")
    out["HeadObject"] = (cpu() - c0) / 200 * 1000
    body = os.urandom(2048)
    c0 = cpu()
    for i in range(200):
        client.put_object(Bucket=BUCKET, Key=f"put/k{i:06d}", Body=body)
    out["PutObject 2 KB"] = (cpu() - c0) / 200 * 1000
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keys", type=int, default=1000)
    a = ap.parse_args(argv)

    import boto3
    from botocore.config import Config

    from lakesink.credentials import CredentialSettings, boto3_client
    from lakesink.devstack.s3 import S3Endpoint

    s3 = S3Endpoint().start()
    try:
        s3.create_bucket(BUCKET)
        cfg = Config(region_name="us-east-1", s3={"addressing_style": "path"},
                     retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=10, read_timeout=60)
        mine = boto3_client(CredentialSettings("static", "bench", "bench"), "us-east-1", "s3", s3.endpoint_url, cfg,
                            variant=True)
        plain = boto3.Session(aws_access_key_id="bench", aws_secret_access_key="bench",
                              region_name="us-east-1").client("s3", endpoint_url=s3.endpoint_url, config=cfg)
        for i in range(a.keys):
            plain.put_object(Bucket=BUCKET, Key=f"list/k{i:06d}", Body=b"x" * 100)
        for c in (mine, plain):  # connections open, first-call set-up done
            loops(c, a.keys)
        got: dict[str, dict[str, list[float]]] = {"lakesink": {}, "boto3": {}}
        for r in range(a.rounds):
            order = [("lakesink", mine), ("boto3", plain)]
            for name, c in (order if r % 2 == 0 else order[::-1]):
                for k, v in loops(c, a.keys).items():
                    got[name].setdefault(k, []).append(v)
    finally:
        s3.stop()
    print("\n| request | lakesink ms CPU | boto3 ms CPU | lakesink / boto3 |\n|---|---:|---:|---:|")
    for k in got["lakesink"]:
        m, b = statistics.median(got["lakesink"][k]), statistics.median(got["boto3"][k])
        print(f"| {k}{f' ({a.keys:,} keys)' if 'List' in k else ''} | {m:.2f} | {b:.2f} | {m / b:.2f}x |")
    print(f"\nmedians of {a.rounds} rounds; per round, lakesink: "
          + "; ".join(f"{k} {', '.join(f'{v:.2f}' for v in vs)}" for k, vs in got["lakesink"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
