"""JSON copy-through check (lakesink.objects.formats.json.value_lines) against the json-module baseline in the
same run: parse then ``compact_json`` of every value (what the per-record path does).

    .venv/bin/python bench/json_copy.py [--values 50000]

Values are bench/sink.py's JSON orders (~240 B, all canonical); one core, the cyclic GC off as in the sink's
executor body, best of 5. Prints microseconds per value and the ratio (> 1: value_lines is faster).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import sink as bench_sink  # noqa: E402

from lakesink.objects.formats.json import compact_json, value_lines  # noqa: E402


def best(fn, repeat: int = 5) -> float:
    out = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", type=int, default=50_000)
    a = ap.parse_args(argv)
    raws = [bench_sink.json_value(i) for i in range(a.values)]
    gc.disable()
    ours = best(lambda: value_lines(raws))
    base = best(lambda: [compact_json(json.loads(r.decode("utf-8"))) for r in raws])
    assert value_lines(raws) == [compact_json(json.loads(r)) for r in raws]
    n = len(raws)
    print(f"{n:,} JSON values of ~{sum(map(len, raws)) // n} B")
    print(f"value_lines (orjson check, copy-through) {ours / n * 1e6:6.2f} us/value")
    print(f"json.loads + compact_json (baseline)     {base / n * 1e6:6.2f} us/value")
    print(f"ratio: {base / ours:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
