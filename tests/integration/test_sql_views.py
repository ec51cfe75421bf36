"""`lakesink sql`, the manifest views and `lakesink status` on a real archive (broker, S3 endpoint, Spark, Delta).

One archive per module: a topic whose partition 0 is written by a transactional producer (aborted
transactions: markers and aborted records inside committed ranges, and an `advance` row from a range holding
only those) and whose partition 1 is plain; after the sink, 5 more records wait on partition 1 (lag). Every
query of docs/sql.md runs as written there, on both routes of `lakesink sql`: Spark, and DuckDB over the
delta-rs read of the path manifest (no JVM). `lakesink sql` runs in process (the Spark route on the session's
Spark: a cold Spark subprocess costs ~30 s here), and once as a subprocess on the DuckDB route with no Spark jars
to be found; `lakesink status` starts no JVM and runs as a subprocess.
"""
from __future__ import annotations

import functools
import json
import re
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.archive_checks import base_config, json_payloads, produce, write_config

from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.driver.sql import QUERY_NAMES

DOC = Path(__file__).resolve().parents[2] / "docs" / "sql.md"


def doc_queries() -> dict[int, tuple[str, str]]:
    """``{n: (title, sql)}`` of docs/sql.md's numbered queries."""
    text = DOC.read_text()
    found = re.findall(r"^### (\d+)\. (.+?)\n\n```sql\n(.*?)```", text, re.S | re.M)
    return {int(n): (title, sql.strip()) for n, title, sql in found}


@pytest.fixture(scope="module")
def archive(spark, kafka, s3, tmp_path_factory):
    from confluent_kafka import Producer

    bucket = f"sql-{int(time.time() * 1000)}"
    s3.client().create_bucket(Bucket=bucket)
    topic = f"orders-sql-{int(time.time() * 1000)}"
    kafka.create_topic(topic, partitions=2)
    p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    written = [0, 0]  # records produced, records committed (partition 0)

    def transactions(plan):
        for commit, count in plan:
            p.begin_transaction()
            for _ in range(count):
                p.produce(topic, value=json.dumps({"id": written[0]}).encode(), partition=0)
                written[0] += 1
            p.flush(30)
            (p.commit_transaction if commit else p.abort_transaction)(30)
            written[1] += count if commit else 0

    transactions(((True, 6), (False, 3), (True, 5)))
    produce(kafka, topic, json_payloads(12), partition_of=lambda i: 1, headers=False)
    raw = base_config(kafka, s3, bucket, topic, **{"flush.size": "4"})
    cfg = SinkConfig.from_dict(raw)
    SinkJob(spark, cfg).run_batch(flush_tail=True)
    transactions(((False, 1), (True, 2), (False, 1)))  # a range starting and ending with an aborted transaction
    SinkJob(spark, cfg).run_batch(flush_tail=True)
    SinkJob(spark, cfg).run_batch(flush_tail=True)  # whatever the last range left: an advance row
    produce(kafka, topic, json_payloads(5, start=100), partition_of=lambda i: 1, headers=False)  # lag on p1
    return {"cfg": cfg, "file": write_config(tmp_path_factory.mktemp("sqlcfg"), raw), "topic": topic,
            "committed": {0: written[1], 1: 12}, "end": {0: 24, 1: 17}, "job": raw["name"]}


ENGINES = ("spark", "duckdb")


def run_on(spark, archive, n: int, engine: str = "spark"):
    from lakesink.driver.sql import run_queries

    sql = doc_queries()[n][1].replace("'orders'", f"'{archive['topic']}'")
    (res,) = run_queries(archive["cfg"], sql, engine=engine, spark=spark, limit=None)
    return [dict(zip(res.columns, r)) for r in res.rows]


def test_the_doc_has_ten_numbered_queries():
    assert sorted(doc_queries()) == list(range(1, 11))


@pytest.mark.parametrize("engine", ENGINES)
def test_doc_queries_1_to_5_objects_and_schemas(spark, archive, engine):
    run = functools.partial(run_on, engine=engine)
    total = sum(archive["committed"].values())
    day = run(spark, archive, 1)
    assert {r["kafka_partition"]: r["records"] for r in day} == archive["committed"]
    assert all(r["bytes"] > 0 and r["objects"] >= 3 for r in day)

    holder = run(spark, archive, 2)
    assert len(holder) == 1 and holder[0]["first_offset"] <= 3 <= holder[0]["last_offset"]
    assert holder[0]["uri"].startswith(f"s3://{archive['cfg'].s3_bucket_name}/topics/{archive['topic']}/")

    largest = run(spark, archive, 3)
    sizes = [r["size_bytes"] for r in largest]
    assert 0 < len(largest) <= 10 and sizes == sorted(sizes, reverse=True)

    small = run(spark, archive, 4)
    objects = run(spark, archive, 1)
    assert {r["kafka_partition"]: r["small_objects"] for r in small} == {r["kafka_partition"]: r["objects"]
                                                                         for r in objects}
    history = run(spark, archive, 5)  # schemaless JSON: one schema-less entry covering every record
    assert len(history) == 1 and history[0]["schema_version"] is None and history[0]["records"] == total


@pytest.mark.parametrize("engine", ENGINES)
def test_doc_queries_6_to_10_offsets_gaps_lag(spark, archive, engine):
    run = functools.partial(run_on, engine=engine)
    topic, end = archive["topic"], archive["end"]
    offsets = run(spark, archive, 6)
    assert {(r["topic"], r["kafka_partition"]): r["next_offset"] for r in offsets} == {
        (topic, 0): end[0], (topic, 1): 12}
    assert all(r["last_commit_at"] is not None for r in offsets)

    gaps = run(spark, archive, 7)
    assert all(r["kafka_partition"] == 0 for r in gaps), gaps  # partition 1 is plain: no gap
    # p0: 0-5 committed, 6 marker, 7-9 aborted, 10 marker, 11-15 committed, 16 marker | 17 aborted, 18 marker,
    # 19-20 committed, 21 marker, 22 aborted, 23 marker. With flush.size 4 the objects are 0-3, 4-12 (its span
    # covers 6-10), 13-15 and 19-20; every other offset is in exactly one gap.
    assert {r["kind"] for r in gaps} <= {"advance", "unarchived"} and any(r["kind"] == "unarchived" for r in gaps)
    covered = [o for r in gaps for o in range(r["start_offset"], r["end_offset"] + 1)]
    assert sorted(covered) == [16, 17, 18, 21, 22, 23], gaps
    assert all(r["offsets"] == r["end_offset"] - r["start_offset"] + 1 and r["reason"] for r in gaps)
    assert all("transaction markers" in r["reason"] for r in gaps if r["kind"] == "unarchived")

    proof = run(spark, archive, 8)
    assert len(proof) == 2 and all(r["offsets_expected"] == r["offsets_accounted"] == r["next_offset"]
                                   for r in proof), proof

    lag = {r["kafka_partition"]: r for r in run(spark, archive, 9)}
    assert (lag[0]["lag_records"], lag[0]["lag_seconds"]) == (0, 0)
    assert (lag[1]["committed_offset"], lag[1]["end_offset"], lag[1]["lag_records"]) == (12, 17, 5)
    assert lag[1]["lag_seconds"] is not None and lag[1]["lag_seconds"] >= 0

    hours = run(spark, archive, 10)
    assert sum(r["records"] for r in hours) == sum(archive["committed"].values())


def test_one_session_registers_the_views_once_on_spark(spark, archive, monkeypatch):
    """Several statements in one Spark SqlSession (``lakesink sql --file``, the interactive prompt) register the
    views once, and again only when a later statement first needs the broker's end offsets; the answers are the
    DuckDB route's."""
    import lakesink.driver.sql as sqlmod

    calls = []
    real = sqlmod.register_views
    monkeypatch.setattr(sqlmod, "register_views", lambda *a, **k: calls.append(k["with_lag"]) or real(*a, **k))
    text = "SELECT count(*) AS n FROM objects; SELECT sum(record_count) AS r FROM manifest WHERE kind = 'object'"
    with sqlmod.SqlSession(archive["cfg"], engine="spark", spark=spark) as session:
        first = session.run(text, None)
        assert calls == [False]
        later = session.run("SELECT count(*) AS n FROM objects; SELECT count(*) AS p FROM lag", None)
        assert calls == [False, True]
        session.run("SELECT count(*) AS n FROM lag", None)
        assert calls == [False, True]
    duck = sqlmod.run_queries(archive["cfg"], text + "; SELECT count(*) AS p FROM lag", engine="duckdb", limit=None)
    assert [r.rows for r in first + later[1:]] == [r.rows for r in duck]
    assert later[0].rows == first[0].rows


def test_python_api_registers_views_in_the_session(spark, archive):
    import lakesink

    names = lakesink.register_views(spark, archive["cfg"], with_lag=False)
    assert names == ["manifest", "committed_offsets", "objects", "schema_history", "gaps", "erasures", "metrics",
                     "consumer_groups"]
    assert spark.sql("SELECT count(*) FROM metrics").collect()[0][0] == 3  # the fixture's three batches
    assert spark.sql("SELECT count(*) FROM objects").collect()[0][0] >= 6
    df = lakesink.sql(spark, archive["cfg"], "SELECT sum(lag_records) AS n FROM lag")
    assert df.collect()[0]["n"] == 5


@pytest.mark.parametrize("engine", ENGINES)
def test_cli_sql_in_process_text_json_and_bad_sql(spark, archive, capsys, engine):
    f = archive["file"]

    def main(argv):
        from lakesink.cli.main import main as cli

        i = argv.index("sql") + 1
        return cli(argv[:i] + ["--engine", engine] + argv[i:])

    assert main(["sql", "--config", f, "SELECT topic, kafka_partition, next_offset FROM committed_offsets "
                                       "ORDER BY kafka_partition"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0].split() == ["topic", "kafka_partition", "next_offset"] and lines[-1] == "(2 rows)"
    assert lines[2].split() == [archive["topic"], "0", str(archive["end"][0])]

    assert main(["--format", "json", "sql", "--config", f, "--limit", "1",
                 "SELECT uri FROM objects ORDER BY uri"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["columns"] == ["uri"] and len(doc["rows"]) == 1 and doc["notes"] == ["first 1 rows shown (--limit)"]

    assert main(["--format", "csv", "sql", "--config", f, "SELECT kafka_partition, records FROM committed_offsets "
                                                           "ORDER BY kafka_partition"]) == 0
    assert capsys.readouterr().out.splitlines() == ["kafka_partition,records", f"0,{archive['committed'][0]}",
                                                    f"1,{archive['committed'][1]}"]

    assert main(["sql", "--config", f, "SELECT nope FROM objects"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lakesink: error: query: ") and "nope" in err[0], err
    assert main(["sql", "--config", f, "SELEC 1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "syntax" in err[0].lower(), err
    # another bucket's table, by path: refused before either engine sees it
    assert main(["sql", "--config", f, "SELECT * FROM delta.`s3a://another-bucket/manifest`"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "lakesink: error: query: the table delta.`s3a://another-bucket/manifest` is outside this job's archive (a "
        f"query reads {', '.join(sorted(QUERY_NAMES))})"), err


def test_cli_sql_file_runs_every_statement_without_a_jvm(archive, tmp_path):
    """`lakesink sql --file` on a path manifest: DuckDB, no Spark (the Spark jars are nowhere to be found), every
    statement's rows in order, JSON one document per statement."""
    queries = tmp_path / "q.sql"
    queries.write_text("-- two statements\nSELECT count(*) AS n FROM objects;\n"
                       "SELECT kafka_partition, next_offset FROM committed_offsets ORDER BY kafka_partition;\n")
    env = {**os.environ, "LAKESINK_JARS_DIR": str(tmp_path / "no-jars")}
    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "--format", "json", "sql", "--config", archive["file"],
                        "--file", str(queries)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    first, second = (json.loads(line) for line in r.stdout.splitlines())
    assert first["columns"] == ["n"] and first["rows"][0]["n"] >= 6
    assert [(x["kafka_partition"], x["next_offset"]) for x in second["rows"]] == [(0, archive["end"][0]), (1, 12)]


def test_cli_status_subprocess_healthy_and_past_thresholds(archive, s3):
    f, topic = archive["file"], archive["topic"]
    # an orphan of the job on partition 1 (an upload no manifest row references)
    s3.client().put_object(Bucket=archive["cfg"].s3_bucket_name,
                           Key=f"topics/{topic}/partition=1/{topic}+1+0000000099.json", Body=b"{}\n",
                           Metadata={"lakesink-job": archive["job"]})
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "status", "--config", f, "--max-lag", "10"],
                       capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - t0
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr == "" and f"job '{archive['job']}': OK; 2 partition(s), lag 5 record(s), 1 orphan object(s)" in r.stdout
    assert "SparkContext" not in r.stdout + r.stderr  # no JVM for a path manifest
    print(f"lakesink status took {seconds:.1f}s")

    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "--format", "json", "status", "--config", f,
                        "--max-lag", "2"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["healthy"] is False and doc["problems"] == [f"{topic}-1: lag 5 > --max-lag 2"]
    by = {p["partition"]: p for p in doc["partitions"]}
    assert (by[1]["committed_offset"], by[1]["end_offset"], by[1]["lag"], by[1]["orphans"]) == (12, 17, 5, 1)

    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "status", "--config", f, "--max-age", "soon"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == ("lakesink: error: --max-age 'soon': expected a duration "
                                                      "like 30s, 5m, 1h or 250ms"), r.stderr
