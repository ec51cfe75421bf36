"""The first run on a fresh machine: `make demo` in a clean clone with empty caches, timed step by step.

    flock /tmp/lakesink-spark.lock .venv/bin/python bench/first_run.py [--out bench/results/first-run.md]

Clones this checkout's HEAD into a new directory (``--work``, default a fresh temp dir), then runs ``make demo``
there with its own empty pip cache (``PIP_CACHE_DIR``), an empty jar cache (the clone's ``.cache/jars``, and
``LAKESINK_CACHE_DIR``/``XDG_CACHE_HOME`` pointing into the work dir) and no ``.venv``: every download -- PyPI for
pip, Maven Central for the jars -- is inside the measurement. Each output line is time-stamped; the steps are the
spans between the lines bootstrap and the demo print. The project's budget for the whole is 180 s.
Prints the table and, with ``--out``, writes it as Markdown.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 180.0

#: (step name, the first output line that starts it) -- in order; a marker never printed leaves its step out
MARKERS = [
    ("python -m venv", "bootstrap: creating .venv"),
    ("pip install -e '.[local]' (PyPI, empty cache) and, beside it, the jars (Maven Central)",
     "bootstrap: downloading the jars"),
    ("demo: broker + S3 endpoint start", "bootstrap: ready for the demo"),
    ("demo: produce, Spark session, 3 sink batches, manifest query", "== local stack up"),
]
#: (what, first line, last line) of the spans that overlap the steps above
SPANS = [
    ("of which pip install", "bootstrap: installing lakesink[", "bootstrap: installed lakesink["),
    ("of which the jars (760 MB, SHA-256 checked)", "bootstrap: downloading the jars", "kafka: "),
]


def steps(lines: list[tuple[float, str]], end: float) -> list[tuple[str, float]]:
    """``[(step, seconds)]`` from time-stamped output lines (the first line matching each marker starts a step,
    the next step's start or ``end`` ends it); the run's start counts as the first step's start."""
    starts: list[tuple[str, float]] = []
    for name, marker in MARKERS:
        hit = next((t for t, line in lines if line.startswith(marker)), None)
        if hit is not None:
            starts.append((name, hit))
    if starts:
        starts[0] = (starts[0][0], 0.0)
    return [(name, (starts[i + 1][1] if i + 1 < len(starts) else end) - t) for i, (name, t) in enumerate(starts)]


def spans(lines: list[tuple[float, str]]) -> list[tuple[str, float]]:
    """``[(what, seconds)]`` of :data:`SPANS` whose first and last lines were both printed."""
    out = []
    for name, first, last in SPANS:
        a = next((t for t, line in lines if line.startswith(first)), None)
        b = next((t for t, line in lines if line.startswith(last)), None)
        if a is not None and b is not None:
            out.append((name, b - a))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=None, help="an empty directory to clone into (default: a new one)")
    ap.add_argument("--out", type=Path, default=None, help="write the result as Markdown here")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="lakesink-first-run-"))
    clone = work / "clone"
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    t = time.monotonic()
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    clone_s = time.monotonic() - t
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LAKESINK_", "VIRTUAL_ENV", "PYTHONPATH", "SPARK_", "PYSPARK_"))}
    env.update(PIP_CACHE_DIR=str(work / "pip-cache"), LAKESINK_CACHE_DIR=str(work / "lakesink-cache"),
               XDG_CACHE_HOME=str(work / "xdg-cache"), PATH=":".join(
                   p for p in env.get("PATH", "").split(":") if ".venv" not in p))
    for d in ("pip-cache", "lakesink-cache", "xdg-cache"):
        (work / d).mkdir()

    lines: list[tuple[float, str]] = []
    t0 = time.monotonic()
    proc = subprocess.Popen(["make", "demo"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.monotonic() - t0
        lines.append((now, line.rstrip("\n")))
        print(f"{now:7.1f}s  {line}", end="", flush=True)
    rc = proc.wait()
    total = time.monotonic() - t0
    table = steps(lines, total)
    ok = rc == 0 and total <= BUDGET_S
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = [
        "# First run: `make demo` from a clean clone with empty caches",
        "",
        f"Measured by `bench/first_run.py` on {when}, commit {head}, {platform.node() or 'this machine'} "
        f"({os.cpu_count()} cores shared with other jobs, Python {platform.python_version()}). A fresh `git clone` "
        f"(not timed: {clone_s:.1f} s), no `.venv`, an empty pip cache (`PIP_CACHE_DIR`), an empty jar cache; the "
        "network: PyPI and Maven Central.",
        "",
        "| step | seconds |",
        "| --- | ---: |",
        *[f"| {name} | {secs:.1f} |" for name, secs in table],
        *[f"| &nbsp;&nbsp;{name} | ({secs:.1f}) |" for name, secs in spans(lines)],
        f"| **`make demo`, total** | **{total:.1f}** |",
        "",
        f"Budget {BUDGET_S:.0f} s: **{'met' if ok else 'NOT met'}** (exit status {rc}).",
        "",
        "Not fetched or built for the demo (`LAKESINK_BOOTSTRAP=demo`): the test and docs tools of `[dev]` (and "
        "moto[server]'s dependencies for every other AWS service: `[local]` is moto's S3 and flask), the Schema "
        "Registry (Apicurio, 109 MB; `make bootstrap`/`lakesink setup --registry`), the JVM class-data archive "
        "(about 50 s of CPU, built by the next `make bootstrap`/`make test`).",
    ]
    print("\n".join(md))
    if args.out:
        args.out.write_text("\n".join(md) + "\n")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
