"""`lakesink sql` end to end on a 100k-row manifest: the DuckDB route against the Spark route, same queries.

    flock /tmp/lakesink-spark.lock .venv/bin/python bench/sql.py [--rows 100000] [--out bench/results/sql.md]

Writes a local path manifest of ``--rows`` object rows (delta-rs, 20 commits, 8 topics x 12 partitions, another
job's rows beside them), then runs every docs/sql.md query except 9 (``lag`` asks a broker; there is none here)
as its own `lakesink sql` process, the way a user types it: each process pays its own start-up. Spark runs with
``--engine spark`` (a cold local Spark per query, as before this route existed); once more for the Spark route
as one `--file` process holding all the queries, which is the fairest Spark can do. Prints seconds per query and
the ratio Spark / DuckDB, measured in this run; the issue's target is <= 2 s per DuckDB query. Then where a
DuckDB process's time goes (unless ``--no-phases``): each query once more in a process that runs the command's
steps, timed (wall and CPU) step by step.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 2.0
#: Runs of each query on the DuckDB route (and on the baseline's): an even number, each tree first half the time.
REPS = 4


def write_manifest(location: str, rows: int) -> None:
    sys.path.insert(0, str(ROOT))
    from lakesink.manifest.deltars import DeltaRsManifest
    from lakesink.manifest.rows import SideFile, object_row

    m = DeltaRsManifest(location)
    m.ensure()
    per_commit = rows // 20
    next_offset: dict[tuple[str, int], int] = {}
    base_ms = int(time.time() * 1000) - 86_400_000
    n = 0
    for batch in range(20):
        out = []
        for _ in range(per_commit):
            topic, part = f"orders-{n % 8}", (n // 8) % 12
            first = next_offset.get((topic, part), 0)
            last = first + 999
            next_offset[(topic, part)] = last + 1
            key = f"topics/{topic}/partition={part}/{topic}+{part}+{first:010d}.json"
            out.append(object_row(topic, part, first, last, first_offset=first, last_offset=last, record_count=1000,
                                  encoded_partition=f"partition={part}", object_key=key, object_uri=f"s3://b/{key}",
                                  side_files=(SideFile("metadata", key[:-5] + ".metadata.avro", None, None, 900),),
                                  format="json", compression=None, size_bytes=200_000 + n % 5000, etag=f"{n:032x}",
                                  version_id=None, min_timestamp_ms=base_ms + n * 800, max_timestamp_ms=base_ms + n * 800 + 700))
            n += 1
        m.commit("bench", batch, f"run-{batch}", out)
    m.commit("another-job", 0, "other", out[:1000])


def doc_queries() -> dict[int, str]:
    text = (ROOT / "docs" / "sql.md").read_text()
    found = re.findall(r"^### (\d+)\. (.+?)\n\n```sql\n(.*?)```", text, re.S | re.M)
    return {int(n): sql.strip().replace("'orders'", "'orders-0'") for n, _t, sql in found if int(n) != 9}


#: The processes' environment: bytecode written and read as an installed package's is (pip compiles it); with
#: PYTHONDONTWRITEBYTECODE set (as in some shells here) every process compiled lakesink's changed modules again.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


#: CPU seconds (user + system) of each timed process, in order: less bent by other work on the machine than
#: the wall clock (every process here is mostly single-threaded Python).
CPU: list[float] = []


def timed(argv: list[str], tree: str | None = None) -> float:
    """Seconds of one `lakesink` process, start to exit; ``tree``: another checkout's lakesink (PYTHONPATH)."""
    env = ENV if tree is None else {**ENV, "PYTHONPATH": tree}
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "lakesink.cli", *argv], capture_output=True, text=True, timeout=600,
                       cwd=tree or ROOT, env=env)
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(u1.ru_utime - u0.ru_utime + u1.ru_stime - u0.ru_stime)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return time.monotonic() - t0


#: The DuckDB route's steps, timed in a process of their own (``python -c``; argv: config, query): what
#: `lakesink sql` does, in its order. Prints one JSON list of [step, wall s, CPU s].
PHASES = r"""
import io, json, sys, time
def now(): return time.perf_counter(), time.process_time()
out, t = [], now()
def step(name):
    global t
    n = now(); out.append([name, n[0] - t[0], n[1] - t[1]]); t = n
config, query = sys.argv[1], sys.argv[2]
from lakesink.cli.main import build_parser, main
import lakesink.runtime.client_logs, lakesink.cli.sql
args = build_parser(["sql"]).parse_args(["sql", "--config", config, query])
step("CLI and config modules, argv parsed")
from lakesink.config import load_config
cfg = load_config(config)
step("config parsed and validated")
from lakesink.driver import sql as dsql
from lakesink.manifest.queries import orders_rows, query_statements
(statement,) = query_statements(query, dsql.QUERY_NAMES)
names = dsql.statement_names([statement])
order = not orders_rows(statement)
step("statement checked (sqlglot: import, parse)")
rows = dsql.read_manifest(cfg, names=names)
step("manifest read (delta-rs: import, log, data files)")
db = dsql.open_duckdb(cfg, with_lag=False, names=names, rows=rows)
step("DuckDB connection, tables and views (import, transpile)")
columns, result, _ = db.query(statement, None, order=order)
step("query (transpile, run, fetch)")
from lakesink.cli.output import TableResult, TextOutput
TextOutput(io.StringIO()).render(TableResult(columns, result, []))
step("rows rendered as text")
print(json.dumps(out), flush=True)
import os
os._exit(0)  # as the command ends (lakesink.cli.process)
"""


def phases(config: Path, queries: dict[int, str]) -> list[tuple[str, float, float]]:
    """Median wall and CPU seconds of each step of :data:`PHASES` over ``queries``, with the interpreter's own
    start (the process's wall time less the steps')."""
    import json

    per: dict[str, list[tuple[float, float]]] = {}
    for q in queries.values():
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-c", PHASES, str(config), q], capture_output=True, text=True, timeout=600,
                           cwd=ROOT, env=ENV)
        total = time.monotonic() - t0
        if r.returncode != 0:
            raise SystemExit(f"phases failed: {r.stderr.strip()[-500:]}")
        steps = json.loads(r.stdout.splitlines()[-1])
        per.setdefault("interpreter start and exit", []).append((total - sum(w for _n, w, _c in steps), float("nan")))
        for name, wall, cpu in steps:
            per.setdefault(name, []).append((wall, cpu))
    return [(name, statistics.median(w for w, _c in v), statistics.median(c for _w, c in v)) for name, v in per.items()]


def _f(v: float, unit: str = "", digits: int = 2) -> str:
    return "not run" if v != v else f"{v:.{digits}f}{unit}"  # NaN: the route was not run (--no-spark, no baseline)


def _commit(tree: str) -> str:
    r = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--out", default=None, help="write the results section at the top of this file (earlier "
                                                "sections kept below it)")
    ap.add_argument("--no-spark", action="store_true", help="the DuckDB route only (no JVM: no lock needed)")
    ap.add_argument("--no-phases", action="store_true", help="skip the step-by-step breakdown of a DuckDB process")
    ap.add_argument("--baseline", default=None, metavar="DIR",
                    help="another checkout (e.g. the main branch) whose DuckDB route is timed too, each of its runs "
                         "next to this tree's (before it half the time), so both columns see the same machine load")
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="lakesink-bench-sql-"))
    location = str(work / "manifest")
    t0 = time.monotonic()
    write_manifest(location, args.rows)
    print(f"manifest: {args.rows} object rows written in {time.monotonic() - t0:.1f} s ({location})", flush=True)
    cfg = work / "job.properties"
    cfg.write_text("name=bench\ntopics=orders-0\nformat.class=json\nflush.size=1000\ns3.bucket.name=bench-bucket\n"
                   "s3.region=us-east-1\nstore.url=http://127.0.0.1:1\naws.access.key.id=x\naws.secret.access.key=x\n"
                   f"manifest.location={location}\nkafka.bootstrap.servers=127.0.0.1:1\nmetrics.location=none\n")
    queries = doc_queries()
    # one untimed process first: bytecode written, the manifest's files in the page cache (as for a user's second
    # query); every timed process still starts cold otherwise (its own interpreter, imports, manifest read)
    timed(["sql", "--config", str(cfg), "--engine", "duckdb", "--limit", "0", queries[1]])
    if args.baseline:
        timed(["sql", "--config", str(cfg), "--engine", "duckdb", "--limit", "0", queries[1]], args.baseline)
    nan = float("nan")
    results, base, cpus = [], {}, {}
    for n, q in queries.items():
        duck, before, cpu, cpu_before = [], [], [], []
        argv = ["sql", "--config", str(cfg), "--engine", "duckdb", "--limit", "0", q]
        for i in range(REPS):
            # the baseline first every other time: the second of two runs of one query was up to ~0.1 s faster
            for tree, walls, cpu_s in ([(None, duck, cpu)] + ([(args.baseline, before, cpu_before)] if args.baseline
                                                              else []))[::-1 if i % 2 else 1]:
                walls.append(timed(argv, tree))
                cpu_s.append(CPU[-1])
        base[n] = statistics.median(before) if before else nan
        cpus[n] = (statistics.median(cpu), statistics.median(cpu_before) if cpu_before else nan)
        spark = nan if args.no_spark else timed(["sql", "--config", str(cfg), "--engine", "spark", "--limit", "0", q])
        results.append((n, statistics.median(duck), spark))
        print(f"query {n:2d}: duckdb {statistics.median(duck):5.2f} s (median of {REPS})  spark {spark:6.2f} s  "
              f"ratio {spark / statistics.median(duck):5.1f}x  baseline duckdb {base[n]:5.2f} s", flush=True)
    qfile = work / "all.sql"
    qfile.write_text(";\n".join(queries.values()) + ";\n")
    duck_all = timed(["sql", "--config", str(cfg), "--engine", "duckdb", "--limit", "0", "--file", str(qfile)])
    cpu_all = [CPU[-1], nan]
    base_all = nan if not args.baseline else timed(
        ["sql", "--config", str(cfg), "--engine", "duckdb", "--limit", "0", "--file", str(qfile)], args.baseline)
    cpu_all[1] = CPU[-1] if args.baseline else nan
    spark_all = nan if args.no_spark else timed(["sql", "--config", str(cfg), "--engine", "spark", "--limit", "0",
                                                  "--file", str(qfile)])
    worst = max(d for _n, d, _s in results)
    steps = [] if args.no_phases else phases(cfg, queries)
    lines = [
        f"# lakesink sql: DuckDB route vs Spark route ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)",
        "",
        f"`bench/sql.py`: {args.rows:,} object rows in a local path manifest (delta-rs, 21 commits, another job's rows "
        f"beside them); each docs/sql.md query (9 left out: it asks a broker) as its own `lakesink sql` process. "
        f"{platform.machine()}, {os.cpu_count()} cpu(s), Python {platform.python_version()}, load average "
        f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end.",
        "",
        *([f"Baseline: the DuckDB route of `{args.baseline}` (git {_commit(args.baseline)}), each of its runs next to "
           f"this tree's (git {_commit(str(ROOT))}), before it half the time.", ""] if args.baseline else []),
        f"| query | DuckDB s (median of {REPS}) | baseline DuckDB s | DuckDB CPU s | baseline CPU s | Spark s (cold) "
        "| Spark / DuckDB |",
        "|---|---|---|---|---|---|---|",
        *(f"| {n} | {d:.2f} | {_f(base[n])} | {cpus[n][0]:.2f} | {_f(cpus[n][1])} | {_f(s)} | {_f(s / d, 'x', 1)} |"
          for n, d, s in results),
        f"| all 9 in one `--file` process | {duck_all:.2f} | {_f(base_all)} | {cpu_all[0]:.2f} | {_f(cpu_all[1])} | "
        f"{_f(spark_all)} | {_f(spark_all / duck_all, 'x', 1)} |",
        "",
        f"Slowest DuckDB query: {worst:.2f} s end to end (target <= {TARGET_S:.0f} s: "
        f"{'met' if worst <= TARGET_S else 'missed'}).",
        *(["", "Where a DuckDB process's time goes: each query once more, its steps timed one by one in one "
               "process (`PHASES`), median over the queries:", "",
           "| step | wall s | CPU s |", "|---|---|---|",
           *(f"| {name} | {w:.3f} | {_f(c, digits=3)} |" for name, w, c in steps),
           f"| total | {sum(w for _n, w, _c in steps):.3f} | {sum(c for _n, _w, c in steps if c == c):.3f} |"]
          if steps else []),
    ]
    print("\n".join(lines))
    if args.out:
        out = Path(args.out)
        earlier = out.read_text() if out.exists() else ""
        out.write_text("\n".join(lines) + "\n" + (f"\n{earlier}" if earlier else ""))


if __name__ == "__main__":
    main()
