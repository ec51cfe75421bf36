"""Two jobs, one manifest (issue #26 items 1 and 2): `lakesink sql`, its views and `--where` stay in the config's job.

Job A archives topic TA (2 partitions, plain records); job B archives topic TB (one partition, with aborted
transactions, so B has gaps and A has none) into the same bucket, the same manifest and the same metrics table.
Every query of docs/sql.md, run with A's config, must answer for A alone, and for both jobs with ``all_jobs``
(``--all-jobs``). A ``--where`` predicate must not leave A's objects: not through a UNION or a subquery reading
the manifest's Delta table by path, nor by naming B (no rows), nor through a comment.
"""
from __future__ import annotations

import json
import time

import pytest
from support.archive_checks import base_config, json_payloads, produce, write_config
from test_sql_views import doc_queries

import lakesink
from lakesink import wiring
from lakesink.cli.main import main
from lakesink.config import SinkConfig
from lakesink.driver.archive import select_objects
from lakesink.driver.sink import SinkJob
from lakesink.driver.sql import run_query
from lakesink.errors import ArchiveQueryError

A_RECORDS = 10  # 5 per partition of TA, flush.size 4: two objects per partition


@pytest.fixture(scope="module")
def jobs(spark, kafka, s3, tmp_path_factory):
    from confluent_kafka import Producer

    stamp = int(time.time() * 1000)
    bucket = f"sql-jobs-{stamp}"
    s3.client().create_bucket(Bucket=bucket)
    ta, tb = f"orders-a-{stamp}", f"orders-b-{stamp}"
    kafka.create_topic(ta, partitions=2)
    kafka.create_topic(tb, partitions=1)
    produce(kafka, ta, json_payloads(A_RECORDS), partition_of=lambda i: i % 2, headers=False)
    p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"tx-{tb}"})
    p.init_transactions(30)
    b_records = 0
    for commit, count in ((True, 3), (False, 2), (True, 2)):  # B: markers and aborted records, i.e. gaps
        p.begin_transaction()
        for i in range(count):
            p.produce(tb, value=json.dumps({"id": i}).encode(), partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
        b_records += count if commit else 0
    raw_a = base_config(kafka, s3, bucket, ta, **{"flush.size": "4"})
    raw_b = base_config(kafka, s3, bucket, tb, **{"flush.size": "4"})
    assert raw_a["manifest.location"] == raw_b["manifest.location"] and raw_a["name"] != raw_b["name"]
    cfg_a, cfg_b = SinkConfig.from_dict(raw_a), SinkConfig.from_dict(raw_b)
    SinkJob(spark, cfg_a).run_batch(flush_tail=True)
    SinkJob(spark, cfg_b).run_batch(flush_tail=True)
    SinkJob(spark, cfg_b).run_batch(flush_tail=True)  # whatever B's last range left
    produce(kafka, ta, json_payloads(3, start=100), partition_of=lambda i: 0, headers=False)  # lag on TA-0
    d = tmp_path_factory.mktemp("sqljobs")
    return {"a": cfg_a, "b": cfg_b, "ta": ta, "tb": tb, "b_records": b_records, "bucket": bucket,
            "file_a": write_config(d, raw_a, "a.json"), "manifest": raw_a["manifest.location"]}


@pytest.fixture
def sessions(spark, jobs):
    """A Spark SqlSession per scope (``lakesink sql --file`` on Spark), for one test: the views registered once per
    test (temp views are the Spark session's: another test's registration replaces them), not per query."""
    from lakesink.driver.sql import SqlSession

    opened = {scope: SqlSession(jobs["a"], engine="spark", spark=spark, all_jobs=scope) for scope in (False, True)}
    yield opened
    for session in opened.values():
        session.close()


def run(sessions, jobs, n: int, all_jobs: bool = False) -> list[dict]:
    sql = doc_queries()[n][1].replace("'orders'", f"'{jobs['ta']}'")
    (res,) = sessions[all_jobs].run(sql, None)
    return [dict(zip(res.columns, r)) for r in res.rows]


def one(spark, jobs, sql: str, all_jobs: bool = False) -> list[tuple]:
    return run_query(spark, jobs["a"], sql, limit=None, **wide(all_jobs)).rows


def wide(all_jobs: bool) -> dict:
    """The call a notebook makes: no keyword by default (so the scoped default itself is what is tested)."""
    return {"all_jobs": True} if all_jobs else {}


# ------------------------------------------------------------------------------ item 2: views scoped to the job
def test_the_issue_count_is_job_a_alone_unless_all_jobs(spark, jobs):
    a = one(spark, jobs, "SELECT count(*), sum(record_count) FROM objects")
    assert a == [(4, A_RECORDS)], a
    both = one(spark, jobs, "SELECT count(*), sum(record_count) FROM objects", all_jobs=True)
    assert both[0][0] > 4 and both[0][1] == A_RECORDS + jobs["b_records"], both


def test_manifest_and_metrics_views_hold_job_a_alone(spark, jobs):
    name_a, name_b = jobs["a"].name, jobs["b"].name
    for view in ("manifest", "metrics", "committed_offsets", "objects", "schema_history"):
        assert one(spark, jobs, f"SELECT DISTINCT job FROM {view}") == [(name_a,)], view
        assert sorted(one(spark, jobs, f"SELECT DISTINCT job FROM {view}", all_jobs=True)) == \
               sorted([(name_a,), (name_b,)]), view
    assert one(spark, jobs, "SELECT count(*) FROM metrics") == [(1,)]  # A's one batch (B ran two)
    assert one(spark, jobs, "SELECT count(*) FROM gaps") == [(0,)]
    assert one(spark, jobs, "SELECT DISTINCT job FROM gaps", all_jobs=True) == [(name_b,)]


def test_python_api_register_views_is_scoped_and_widens(spark, jobs):
    lakesink.register_views(spark, jobs["a"], with_lag=False)
    assert spark.sql("SELECT count(DISTINCT job) FROM manifest").collect()[0][0] == 1
    assert lakesink.sql(spark, jobs["a"], "SELECT count(DISTINCT topic) AS n FROM objects").collect()[0]["n"] == 1
    lakesink.register_views(spark, jobs["a"], with_lag=False, all_jobs=True)
    assert spark.sql("SELECT count(DISTINCT job) FROM manifest").collect()[0][0] == 2
    assert lakesink.sql(spark, jobs["a"], "SELECT count(DISTINCT topic) AS n FROM objects",
                        all_jobs=True).collect()[0]["n"] == 2


def test_every_doc_query_answers_for_job_a_alone(sessions, jobs):
    ta, name_a = jobs["ta"], jobs["a"].name
    day = run(sessions, jobs, 1)
    assert {r["topic"] for r in day} == {ta} and sum(r["records"] for r in day) == A_RECORDS
    holder = run(sessions, jobs, 2)
    assert len(holder) == 1 and f"/topics/{ta}/" in holder[0]["uri"]
    largest = run(sessions, jobs, 3)
    assert len(largest) == 4 and all(f"/topics/{ta}/" in r["uri"] for r in largest)
    assert {r["topic"] for r in run(sessions, jobs, 4)} == {ta}
    history = run(sessions, jobs, 5)
    assert [(r["topic"], r["records"]) for r in history] == [(ta, A_RECORDS)]
    offsets = run(sessions, jobs, 6)
    assert {(r["job"], r["topic"], r["kafka_partition"]): r["next_offset"] for r in offsets} == {
        (name_a, ta, 0): 5, (name_a, ta, 1): 5}
    assert run(sessions, jobs, 7) == []  # B's gaps are not A's
    proof = run(sessions, jobs, 8)
    assert [(r["job"], r["kafka_partition"]) for r in proof] == [(name_a, 0), (name_a, 1)]
    assert all(r["offsets_expected"] == r["offsets_accounted"] == r["next_offset"] == 5 for r in proof), proof
    lag = run(sessions, jobs, 9)
    assert {(r["topic"], r["kafka_partition"]): r["lag_records"] for r in lag} == {(ta, 0): 3, (ta, 1): 0}
    hours = run(sessions, jobs, 10)
    assert {r["topic"] for r in hours} == {ta} and sum(r["records"] for r in hours) == A_RECORDS


def test_every_doc_query_with_all_jobs_answers_for_both(sessions, jobs):
    ta, tb, total = jobs["ta"], jobs["tb"], A_RECORDS + jobs["b_records"]
    day = run(sessions, jobs, 1, True)
    assert {r["topic"] for r in day} == {ta, tb} and sum(r["records"] for r in day) == total
    assert len(run(sessions, jobs, 2, True)) == 1  # the query names TA's partition 0
    assert {r["uri"].split("/topics/")[1].split("/")[0] for r in run(sessions, jobs, 3, True)} == {ta, tb}
    assert {r["topic"] for r in run(sessions, jobs, 4, True)} == {ta, tb}
    assert {(r["topic"], r["records"]) for r in run(sessions, jobs, 5, True)} == {(ta, A_RECORDS),
                                                                               (tb, jobs["b_records"])}
    assert {r["job"] for r in run(sessions, jobs, 6, True)} == {jobs["a"].name, jobs["b"].name}
    gaps = run(sessions, jobs, 7, True)
    assert gaps and {r["topic"] for r in gaps} == {tb}
    proof = run(sessions, jobs, 8, True)
    assert {r["job"] for r in proof} == {jobs["a"].name, jobs["b"].name}
    assert all(r["offsets_expected"] == r["offsets_accounted"] == r["next_offset"] for r in proof), proof
    # lag asks the broker for the config's topics only: still A's
    assert {r["topic"] for r in run(sessions, jobs, 9, True)} == {ta}
    assert sum(r["records"] for r in run(sessions, jobs, 10, True)) == total


def test_cli_sql_all_jobs_flag(spark, jobs, capsys):
    q = "SELECT count(DISTINCT job) AS jobs, sum(record_count) AS records FROM objects"
    assert main(["--format", "json", "sql", "--config", jobs["file_a"], q]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == [{"jobs": 1, "records": A_RECORDS}]
    assert main(["--format", "json", "sql", "--config", jobs["file_a"], "--all-jobs", q]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == [{"jobs": 2, "records": A_RECORDS + jobs["b_records"]}]


# ------------------------------------------------------------------------ item 1: --where cannot leave the job
def union(jobs) -> str:
    return (f"1=0 UNION ALL SELECT * FROM delta.`{jobs['manifest']}` "
            f"WHERE job = '{jobs['b'].name}' AND kind = 'object'")


def objects_of(spark, jobs, where: str | None) -> list:
    return select_objects(spark, jobs["a"], wiring.manifest(jobs["a"], spark), where)


def refused(spark, jobs, where: str) -> str:
    with pytest.raises(ArchiveQueryError) as e:
        lakesink.read_archive(spark, jobs["a"], where=where)
    assert "\n" not in str(e.value), str(e.value)
    return str(e.value)


def test_where_union_reading_the_manifest_by_path_is_refused(spark, jobs):
    assert "a set operation (UNION) is not allowed" in refused(spark, jobs, union(jobs))


def test_where_subqueries_and_statements_are_refused(spark, jobs):
    b = jobs["b"].name
    scalar = f"topic = (SELECT max(topic) FROM delta.`{jobs['manifest']}` WHERE job = '{b}')"
    assert "a subquery is not allowed" in refused(spark, jobs, scalar)
    oracle = f"EXISTS (SELECT 1 FROM delta.`{jobs['manifest']}` WHERE job = '{b}')"
    assert "a subquery is not allowed" in refused(spark, jobs, oracle)
    assert "a second statement (';')" in refused(spark, jobs, f"job = '{b}'; SELECT * FROM manifest")
    # a predicate that would close the parentheses of a `(job = … AND kind = …) AND (<where>)` text wrapper
    assert "[PARSE_SYNTAX_ERROR]" in refused(spark, jobs, "1=1) OR (1=1")


def test_where_naming_another_job_selects_nothing(spark, jobs):
    assert objects_of(spark, jobs, f"job = '{jobs['b'].name}'") == []
    assert lakesink.read_archive(spark, jobs["a"], where=f"topic = '{jobs['tb']}'").count() == 0
    assert len(objects_of(spark, jobs, f"job = '{jobs['a'].name}'")) == 4


def test_where_that_is_not_a_boolean_is_refused_and_null_selects_nothing(spark, jobs):
    from lakesink.errors import ArchiveQueryError

    with pytest.raises(ArchiveQueryError, match=r"is a string, not a boolean expression"):
        objects_of(spark, jobs, "topic")
    assert objects_of(spark, jobs, "CAST(NULL AS BOOLEAN)") == []  # unknown counts as not selected, as in WHERE


def test_where_comments_do_not_widen(spark, jobs):
    ta, b = jobs["ta"], jobs["b"].name
    for where in (f"topic = '{ta}' -- \nOR job = '{b}'", f"topic = 'nope' /* */ OR job = '{b}' OR 1 = 1",
                  f"topic = '{ta}' /* OR job = '{b}' */", f"topic = '{ta}' -- ) OR (1=1"):
        got = objects_of(spark, jobs, where)
        assert len(got) == 4 and {o.topic for o in got} == {ta}, (where, got)


def test_where_still_reports_spark_errors_and_runs_array_functions(spark, jobs):
    msg = refused(spark, jobs, "no_such_column = 1")
    assert "no_such_column" in msg and "cannot be resolved" in msg, msg
    # sqlglot renders the array function `exists` as EXISTS(...): Spark must read it as that function
    assert len(objects_of(spark, jobs, "NOT exists(side_files, s -> s.size_bytes < 0) AND record_count > 0")) == 4


def test_cli_restore_with_the_union_where_exits_2_before_anything(spark, jobs, capsys):
    rc = main(["restore", "--config", jobs["file_a"], "--where", union(jobs), "--to-topic",
               f"{jobs['ta']}-copy", "--dry-run"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("lakesink: error: --where ") and "a set operation (UNION) is not allowed" in err[0]
