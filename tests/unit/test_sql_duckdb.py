"""The DuckDB route of ``lakesink sql`` (issue #31 item 1) on a local path manifest written by delta-rs: the views
give the rows the Spark SQL defines, the docs/sql.md queries run as written, and a query reaches nothing but the
job's tables (no file, path, table function, Java call or other job's rows). The same queries on Spark:
tests/integration/test_sql_views.py."""
from __future__ import annotations

import datetime as dt
import io
import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

from lakesink.errors import ArchiveQueryError
from lakesink.manifest.deltars import DeltaRsManifest
from lakesink.manifest.duck import DuckViews
from lakesink.manifest.queries import query_statements
from lakesink.manifest.rows import SideFile, advance_row, object_row

DOC = Path(__file__).resolve().parents[2] / "docs" / "sql.md"
NAMES = ("manifest", "end_offsets", "metrics", "committed_offsets", "objects", "schema_history", "gaps", "lag")
NOW_MS = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)


def doc_queries() -> dict[int, str]:
    found = re.findall(r"^### (\d+)\. (.+?)\n\n```sql\n(.*?)```", DOC.read_text(), re.S | re.M)
    return {int(n): sql.strip() for n, _title, sql in found}


def obj(topic: str, part: int, first: int, last: int, rs: int, re_: int, size: int = 100):
    key = f"topics/{topic}/partition={part}/{topic}+{part}+{first:010d}.json"
    return object_row(topic, part, rs, re_, first_offset=first, last_offset=last, record_count=last - first + 1,
                      encoded_partition=f"partition={part}", object_key=key, object_uri=f"s3://b/{key}",
                      side_files=(SideFile("metadata", key.replace(".json", ".metadata.avro"), None, None, 10),),
                      format="json", compression=None, size_bytes=size, etag="e", version_id=None,
                      min_timestamp_ms=NOW_MS - 1000, max_timestamp_ms=NOW_MS)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """orders-0: objects 0-3 and 4-12 (offsets 5-9 of the second commit range hold no record: 13-15 unarchived),
    an advance 16-17; orders-1: one object 0-11. Another job's rows in the same table must never show."""
    m = DeltaRsManifest(str(tmp_path_factory.mktemp("sql") / "manifest"))
    m.ensure()
    m.commit("j", 0, "r1", [obj("orders", 0, 0, 3, 0, 3), obj("orders", 0, 4, 12, 4, 15, size=300),
                            obj("orders", 1, 0, 11, 0, 11, size=200)])
    m.commit("j", 1, "r1", [advance_row("orders", 0, 16, 17, "transaction markers")])
    m.commit("other-job", 0, "r2", [obj("secret", 0, 0, 99, 0, 99)])
    end = pa.Table.from_pylist([{"job": "j", "topic": "orders", "kafka_partition": 0, "earliest_offset": 0,
                                 "end_offset": 18},
                                {"job": "j", "topic": "orders", "kafka_partition": 1, "earliest_offset": 0,
                                 "end_offset": 17}],
                               schema=pa.schema([("job", pa.string()), ("topic", pa.string()),
                                                 ("kafka_partition", pa.int32()), ("earliest_offset", pa.int64()),
                                                 ("end_offset", pa.int64())]))
    from lakesink.manifest.metrics import arrow_schema

    return {"manifest": m.arrow(job="j"), "metrics": arrow_schema().empty_table(), "end_offsets": end}


@pytest.fixture
def db(tables):
    with DuckViews(tables) as d:
        yield d


def rows(db, n: int) -> list[dict]:
    (sql,) = query_statements(doc_queries()[n], NAMES)
    columns, out, _ = db.query(sql)
    return [dict(zip(columns, r)) for r in out]


def test_doc_queries_on_duckdb(db):
    today = rows(db, 1)
    assert [(r["kafka_partition"], r["objects"], r["records"], r["bytes"]) for r in today] == [(0, 2, 13, 400),
                                                                                              (1, 1, 12, 200)]
    (holder,) = rows(db, 2)
    assert (holder["first_offset"], holder["last_offset"]) == (0, 3)
    assert [r["size_bytes"] for r in rows(db, 3)] == [300, 200, 100]
    assert {r["kafka_partition"]: r["small_objects"] for r in rows(db, 4)} == {0: 2, 1: 1}
    (history,) = rows(db, 5)
    assert (history["schema_version"], history["records"]) == (None, 25)
    assert {(r["kafka_partition"], r["next_offset"]) for r in rows(db, 6)} == {(0, 18), (1, 12)}
    gaps = rows(db, 7)
    assert [(r["start_offset"], r["end_offset"], r["kind"]) for r in gaps] == [(13, 15, "unarchived"),
                                                                                (16, 17, "advance")]
    assert all(isinstance(r["last_commit_at"], dt.datetime) and r["last_commit_at"].tzinfo is None  # naive UTC
               for r in rows(db, 6))
    proof = rows(db, 8)
    assert [(r["next_offset"], r["offsets_expected"], r["offsets_accounted"]) for r in proof] == [(18, 18, 18),
                                                                                                 (12, 12, 12)]
    lag = {r["kafka_partition"]: r for r in rows(db, 9)}
    assert (lag[0]["lag_records"], lag[0]["lag_seconds"]) == (0, 0)
    assert (lag[1]["lag_records"], lag[1]["committed_offset"]) == (5, 12) and 0 <= lag[1]["lag_seconds"] < 3600
    assert sum(r["records"] for r in rows(db, 10)) == 25


def test_schema_history_partitions_are_a_sorted_list(db):
    columns, out, _ = db.query(query_statements("SELECT partitions FROM schema_history", NAMES)[0])
    assert out == [([0, 1],)]


def test_limit_cuts_and_says_so(db):
    columns, out, truncated = db.query("SELECT * FROM objects", limit=2)
    assert len(out) == 2 and truncated and "object_key" in columns


def test_other_jobs_rows_are_not_there(db):
    _, out, _ = db.query("SELECT count(*) FROM manifest WHERE topic = 'secret' OR job <> 'j'")
    assert out == [(0,)]


@pytest.mark.parametrize("query, why", [
    ("SELECT * FROM read_csv('/etc/passwd')", "the table function"),
    ("SELECT * FROM read_files('s3://other-bucket/')", "the table function"),
    ("SELECT * FROM delta.`s3://other-bucket/manifest`", "outside this job's archive"),
    ("SELECT * FROM parquet.`/tmp`", "outside this job's archive"),
    ("SELECT * FROM default.objects", "outside this job's archive"),
    ("SELECT * FROM manifest__arrow", "TABLE_OR_VIEW_NOT_FOUND"),
    ("SELECT reflect('java.lang.System', 'getenv', 'AWS_SECRET_ACCESS_KEY')", "reflect() is not allowed"),
    ("SELECT 1 FROM objects WHERE java_method('java.lang.System', 'getenv', 'X') = 'a'", "java_method() is not"),
    ("DROP TABLE objects", "DROP is not a query"),
    ("INSERT INTO objects SELECT * FROM objects", "INSERT is not a query"),
    ("SET spark.sql.ansi.enabled = false", "is not a query"),
    ("SELECT 1; DELETE FROM manifest", "statement 2: DELETE is not a query"),
])
def test_a_query_reaches_only_the_jobs_tables(query, why):
    with pytest.raises(ArchiveQueryError, match=re.escape(why)):
        query_statements(query, NAMES)


def test_the_locked_connection_refuses_files_even_past_the_check(db):
    """Defence in depth: DuckDB itself can no longer read a file or change its settings."""
    for raw in ("SELECT * FROM read_csv('/etc/passwd')", "SET enable_external_access = true",
                "COPY objects TO '/tmp/lakesink-leak.csv'"):
        with pytest.raises(ArchiveQueryError, match=r"^query: (Permission Error|Invalid Input Error)"):
            _raw(db, raw)


def _raw(db, text: str) -> None:
    import duckdb

    try:
        db._con.execute(text)
    except duckdb.Error as e:
        raise ArchiveQueryError(f"query: {str(e).splitlines()[0]}") from None


def test_several_statements_and_comments():
    assert query_statements("-- count\nSELECT count(*) FROM objects; /* then */ SELECT 1;", NAMES) == [
        "SELECT COUNT(*) FROM objects", "SELECT 1"]


def test_unknown_column_is_one_line(db):
    with pytest.raises(ArchiveQueryError, match=r"^query: \[UNRESOLVED_COLUMN\] A column with name `no_such_column` cannot be resolved \(Candidate bindings: "):
        db.query("SELECT no_such_column FROM objects")


# ------------------------------------------------------------------------------------------ the command

@pytest.fixture(scope="module")
def job_file(tables, tmp_path_factory):
    """A config whose path manifest holds the fixture's rows (same table: the fixture wrote it)."""
    d = tmp_path_factory.mktemp("cfg")
    m = DeltaRsManifest(str(d / "manifest"))
    m.ensure()
    m.commit("j", 0, "r1", [obj("orders", 0, 0, 3, 0, 3), obj("orders", 1, 0, 11, 0, 11, size=200)])
    m.commit("other-job", 0, "r2", [obj("secret", 0, 0, 99, 0, 99)])
    f = d / "job.properties"
    f.write_text(f"name=j\ntopics=orders\nformat.class=json\nflush.size=10\ns3.bucket.name=bucket\n"
                 f"s3.region=us-east-1\nstore.url=http://127.0.0.1:1\naws.access.key.id=testing\n"
                 f"aws.secret.access.key=testing\nmanifest.location={d / 'manifest'}\n"
                 f"kafka.bootstrap.servers=127.0.0.1:1\nmetrics.location=none\n")
    return str(f)


def test_cli_sql_runs_on_duckdb_with_no_jvm(job_file, capsys, monkeypatch):
    """The default engine for a path manifest is DuckDB: a session factory that is never called proves it."""
    from lakesink.cli.main import main
    from lakesink.runtime import session as runtime_session

    monkeypatch.setattr(runtime_session, "session", lambda *a, **k: pytest.fail("Spark was started"))
    assert main(["sql", "--config", job_file,
                 "SELECT topic, kafka_partition, records, records / 7 AS per_day FROM committed_offsets "
                 "ORDER BY kafka_partition"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["topic", "kafka_partition", "records", "per_day"]
    assert out[2].split() == ["orders", "0", "4", "0.571429"] and out[-1] == "(2 rows)"  # rounded for display
    assert main(["--format", "json", "sql", "--config", job_file,
                 "SELECT records / 7 AS per_day FROM committed_offsets WHERE kafka_partition = 0"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == [{"per_day": 4 / 7}]  # exact in JSON


def test_cli_sql_file_and_stdin_run_every_statement(job_file, tmp_path, capsys, monkeypatch):
    from lakesink.cli.main import main

    q = tmp_path / "q.sql"
    q.write_text("SELECT count(*) AS n FROM objects;\n-- the other job's rows are not there\n"
                 "SELECT count(*) AS n FROM manifest WHERE job <> 'j';\n")
    assert main(["--format", "json", "sql", "--config", job_file, "--file", str(q)]) == 0
    assert [json.loads(line)["rows"] for line in capsys.readouterr().out.splitlines()] == [[{"n": 2}], [{"n": 0}]]
    monkeypatch.setattr("sys.stdin", io.StringIO("SELECT 1 AS one; SELECT 2 AS two"))
    assert main(["--format", "csv", "sql", "--config", job_file]) == 0
    assert capsys.readouterr().out.splitlines() == ["one", "1", "two", "2"]


def test_cli_sql_interactive_keeps_going_after_a_bad_statement(job_file, capsys, monkeypatch):
    from lakesink.cli.main import main

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Tty("SELECT count(*) AS n\nFROM objects;\nSELECT nope FROM objects;\n"
                                         "SELECT 3 AS three;\n\\q\n"))
    assert main(["sql", "--config", job_file]) == 0
    cap = capsys.readouterr()
    assert cap.out.splitlines() == ["n", "-", "2", "(1 row)", "three", "-----", "    3", "(1 row)"]
    assert "lakesink: error: query: [UNRESOLVED_COLUMN] A column with name `nope` cannot be resolved" in cap.err


@pytest.mark.parametrize("argv, why", [
    (["--engine", "duckdb", "--limit", "-1", "SELECT 1"], "--limit -1: must be 0 (all rows) or more"),
    (["--file", "/no/such/file.sql"], "--file /no/such/file.sql: No such file or directory"),
    (["--file", "x.sql", "SELECT 1"], "give a query or --file, not both"),
    (["   "], "the SQL query is empty"),
    (["SELECT * FROM parquet.`/etc`"], "the table parquet.`/etc` is outside this job's archive"),
])
def test_cli_sql_usage_errors_are_one_line(job_file, capsys, argv, why):
    from lakesink.cli.main import main

    assert main(["sql", "--config", job_file, *argv]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("lakesink: error: ") and why in err[0], err


# ------------------------------------------------------------------------------------------ --where, no JVM

@pytest.fixture(scope="module")
def where_manifest(tmp_path_factory):
    from lakesink.config import SinkConfig

    d = tmp_path_factory.mktemp("where")
    m = DeltaRsManifest(str(d / "manifest"))
    m.ensure()
    m.commit("j", 0, "r1", [obj("orders", 0, 0, 3, 0, 3), obj("orders", 0, 4, 9, 4, 9, size=300),
                            obj("orders", 1, 0, 11, 0, 11, size=200), obj("refunds", 0, 0, 1, 0, 1)])
    m.commit("j", 1, "r1", [advance_row("orders", 0, 10, 11, "markers")])
    m.commit("other", 0, "r2", [obj("orders", 0, 0, 99, 0, 99)])
    cfg = SinkConfig.from_dict({"name": "j", "topics": "orders,refunds", "format.class": "json", "flush.size": "10",
                                "s3.bucket.name": "bucket", "manifest.location": str(d / "manifest"),
                                "kafka.bootstrap.servers": "127.0.0.1:1"})
    return cfg, m


@pytest.mark.parametrize("where, chosen", [
    (None, {("orders", 0, 0), ("orders", 0, 4), ("orders", 1, 0), ("refunds", 0, 0)}),
    ("topic = 'orders' AND kafka_partition = 0", {("orders", 0, 0), ("orders", 0, 4)}),
    ("size_bytes >= 200 AND first_offset <= 4", {("orders", 0, 4), ("orders", 1, 0)}),
    ("max_timestamp >= '2000-01-01' AND topic RLIKE '^ref'", {("refunds", 0, 0)}),
    ("schema_id = 3", set()),  # NULL = 3 is NULL: not selected
])
def test_where_selects_objects_without_spark(where_manifest, where, chosen):
    """The job's object rows only (another job's row for orders-0 is never there), the predicate evaluated in
    DuckDB: select_objects gets no Spark session at all."""
    from lakesink.driver.archive import split_objects

    cfg, m = where_manifest
    picked, left = split_objects(None, cfg, m, where)
    assert {(o.topic, o.kafka_partition, o.first_offset) for o in picked} == chosen
    assert len(picked) + len(left) == 4 and all(o.etag == "e" for o in picked + left)


@pytest.mark.parametrize("where, why", [
    ("topic", "is a string, not a boolean expression"),
    ("record_count + 1", "is a bigint, not a boolean expression"),
    ("no_such_column = 1", "no_such_column"),
    ("topic IN (SELECT topic FROM objects)", "a subquery is not allowed"),
    ("reflect('java.lang.System', 'getenv', 'HOME') = 'x'", "reflect() is not allowed"),
])
def test_a_bad_where_is_one_line_without_spark(where_manifest, where, why):
    from lakesink.driver.archive import split_objects

    cfg, m = where_manifest
    with pytest.raises(ArchiveQueryError, match=re.escape(why)) as e:
        split_objects(None, cfg, m, where)
    assert str(e.value).startswith(f"--where {where!r}: ") and "\n" not in str(e.value)


def test_spark_array_predicates_keep_their_meaning_on_duckdb(where_manifest):
    """sqlglot alone renders Spark's exists(array, x -> ...) as EXISTS(array), dropping the lambda, and has no
    forall for DuckDB: both are rewritten (an empty array: exists false, forall true, as in Spark)."""
    from lakesink.driver.archive import split_objects

    cfg, m = where_manifest
    every = split_objects(None, cfg, m, None)[0]
    assert split_objects(None, cfg, m, "NOT exists(side_files, s -> s.size_bytes < 0) AND record_count > 0")[0] == every
    assert split_objects(None, cfg, m, "exists(side_files, s -> s.view = 'metadata')")[0] == every
    assert split_objects(None, cfg, m, "forall(side_files, s -> s.size_bytes > 10)")[0] == []
    assert split_objects(None, cfg, m, "forall(filter(side_files, s -> s.view = 'keys'), s -> false)")[0] == every


def test_rows_come_in_the_views_natural_order_unless_the_query_orders_them(job_file, capsys):
    from lakesink.cli.main import main
    from lakesink.manifest.queries import orders_rows

    assert not orders_rows("SELECT * FROM objects") and orders_rows("SELECT * FROM objects ORDER BY size_bytes")
    assert not orders_rows("SELECT * FROM (SELECT * FROM objects ORDER BY size_bytes)")  # inner order: not the rows'
    assert main(["--format", "json", "sql", "--config", job_file, "SELECT kafka_partition, first_offset FROM objects"]) == 0
    assert [(r["kafka_partition"], r["first_offset"]) for r in json.loads(capsys.readouterr().out)["rows"]] == [
        (0, 0), (1, 0)]
    assert main(["--format", "json", "sql", "--config", job_file, "SELECT 2 AS x UNION ALL SELECT 1 UNION ALL SELECT 3"]) == 0
    assert [r["x"] for r in json.loads(capsys.readouterr().out)["rows"]] == [1, 2, 3]
    assert main(["--format", "json", "sql", "--config", job_file,
                 "SELECT kafka_partition FROM objects ORDER BY kafka_partition DESC"]) == 0
    assert [r["kafka_partition"] for r in json.loads(capsys.readouterr().out)["rows"]] == [1, 0]


def test_manifest_arrow_reads_typed_filtered_rows(tmp_path):
    """DeltaRsManifest.arrow (status, validate, schema check, restore's topics) reads through delta-rs's own
    engine like scan, yet answers in the manifest's column types (plain strings, not string views) and filters
    by job and kind, a quote in the job name included."""
    from lakesink.manifest.deltars import arrow_schema

    m = DeltaRsManifest(str(tmp_path / "manifest"))
    m.ensure()
    m.commit("j'1", 0, "r1", [obj("orders", 0, 0, 3, 0, 3), advance_row("orders", 0, 4, 5, "markers")])
    m.commit("other", 0, "r2", [obj("secret", 0, 0, 9, 0, 9)])
    everything = m.arrow()
    assert everything.schema == arrow_schema() and everything.num_rows == 3
    t = m.arrow(["object_key", "side_files"], job="j'1", kind="object")
    assert t.schema == pa.schema([arrow_schema().field("object_key"), arrow_schema().field("side_files")])
    assert t.column("object_key").to_pylist() == ["topics/orders/partition=0/orders+0+0000000000.json"]
    assert t.column("side_files").to_pylist()[0][0]["view"] == "metadata"
    assert sorted(m.arrow(["kind"], job="j'1").column("kind").to_pylist()) == ["advance", "object"]
