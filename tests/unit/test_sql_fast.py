"""`lakesink sql` in about a second (issue #31 item 1): a DuckDB connection holds only what its statements read --
the views they name (and the views those read), the manifest columns those views read, the metrics and groups
tables only when named -- and grows when a later statement of the same session needs more; a local manifest needs
no S3 credentials, so the command never loads boto3. Timings: bench/sql.py, bench/results/sql.md."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lakesink.config import load_config
from lakesink.driver.sql import SqlSession, manifest_columns, open_duckdb, statement_names
from lakesink.manifest.deltars import DeltaRsManifest
from lakesink.manifest.rows import COLUMN_NAMES, SideFile, advance_row, object_row


def obj(topic: str, part: int, first: int, last: int):
    key = f"topics/{topic}/partition={part}/{topic}+{part}+{first:010d}.json"
    return object_row(topic, part, first, last, first_offset=first, last_offset=last, record_count=last - first + 1,
                      encoded_partition=f"partition={part}", object_key=key, object_uri=f"s3://b/{key}",
                      side_files=(SideFile("metadata", key.replace(".json", ".metadata.avro"), None, None, 10),),
                      format="json", compression=None, size_bytes=100, etag="e", version_id=None,
                      min_timestamp_ms=1_700_000_000_000, max_timestamp_ms=1_700_000_001_000)


@pytest.fixture(scope="module")
def job_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("sqlfast")
    m = DeltaRsManifest(str(d / "manifest"))
    m.ensure()
    m.commit("j", 0, "r1", [obj("orders", 0, 0, 3), obj("orders", 1, 0, 11)])
    m.commit("j", 1, "r1", [advance_row("orders", 0, 4, 5, "transaction markers")])
    f = d / "job.properties"
    # an S3 store whose credentials no preflight could find (none given, none in the environment needed): the
    # manifest is a local directory, so `lakesink sql` must not ask for them
    f.write_text(f"name=j\ntopics=orders\nformat.class=json\nflush.size=10\ns3.bucket.name=bucket\n"
                 f"s3.region=us-east-1\nstore.url=http://127.0.0.1:1\naws.access.key.id=testing\n"
                 f"aws.secret.access.key=testing\nmanifest.location={d / 'manifest'}\n"
                 f"kafka.bootstrap.servers=127.0.0.1:1\nmetrics.location=none\n")
    return str(f)


def test_names_a_statement_reads():
    assert statement_names(["SELECT count(*) FROM committed_offsets"]) == {"committed_offsets"}
    assert statement_names(["SELECT * FROM Objects o JOIN gaps g USING (job)", "SELECT 1"]) == {"objects", "gaps"}
    assert statement_names(["SELECT 1"]) == set()
    # committed_offsets' columns only: its own `objects` column is a word, not a read of the objects view
    assert manifest_columns({"committed_offsets"}) == [c for c in COLUMN_NAMES if c in {
        "job", "topic", "kafka_partition", "kind", "range_end", "committed_at", "batch_id", "record_count"}]
    assert "side_files" not in manifest_columns({"objects", "gaps", "schema_history", "lag", "erasures"})
    assert manifest_columns({"manifest", "objects"}) is None  # the manifest itself: every column


def test_only_the_views_a_statement_names_are_registered(job_file):
    cfg = load_config(job_file)
    with open_duckdb(cfg, with_lag=False, names={"committed_offsets"}) as db:
        assert db.names == ["manifest", "committed_offsets"]  # no metrics/groups table read, no other view
        assert db.query("SELECT next_offset FROM committed_offsets WHERE kafka_partition = 0")[1] == [(6,)]
        columns, _, _ = db.query("SELECT * FROM manifest")
        assert "side_files" not in columns and "object_uri" not in columns
    with open_duckdb(cfg, with_lag=False, names={"metrics"}) as db:
        assert "metrics" in db.names and "objects" not in db.names
    with open_duckdb(cfg, with_lag=False) as db:  # no names: everything, as before
        assert {"objects", "gaps", "schema_history", "metrics", "consumer_groups"} <= set(db.names)


def test_a_session_grows_when_a_later_statement_needs_more(job_file):
    """The interactive mode's one session: a statement naming a view (or the manifest's columns) the connection
    does not hold opens it again with both; what it held keeps working."""
    with SqlSession(load_config(job_file), engine="duckdb") as s:
        assert s.run("SELECT count(*) AS n FROM committed_offsets")[0].rows == [(2,)]
        assert "objects" not in s._db.names
        assert s.run("SELECT uri FROM objects WHERE kafka_partition = 1")[0].rows == [
            ("s3://b/topics/orders/partition=1/orders+1+0000000000.json",)]
        assert s.run("SELECT side_files[0].view AS v FROM manifest WHERE kind = 'object' LIMIT 1")[0].rows == [
            ("metadata",)]
        assert s.run("SELECT count(*) FROM committed_offsets; SELECT count(*) FROM gaps")[0].rows == [(2,)]
        assert {"committed_offsets", "objects", "gaps"} <= set(s._db.names)


def test_lag_still_reads_the_jobs_topics(job_file, monkeypatch):
    """The lag path converts delta-rs's table to pyarrow for the topics the broker is asked about."""
    import lakesink.driver.sql as sqlmod

    asked = []
    monkeypatch.setattr(sqlmod, "end_offset_rows", lambda cfg, topics: asked.append(topics) or [
        ("j", "orders", 0, 0, 9), ("j", "orders", 1, 0, 12)])
    with SqlSession(load_config(job_file), engine="duckdb") as s:
        assert s.run("SELECT kafka_partition, lag_records FROM lag")[0].rows == [(0, 3), (1, 0)]
    assert asked == [{"orders"}]


def test_a_local_manifest_needs_no_boto3_no_pyarrow_and_no_jvm(job_file):
    """A path manifest on this disk: no S3 credential lookup (boto3 alone costs 0.3 s), no PySpark, and no pyarrow
    (with numpy 0.2 s): delta-rs's table goes to DuckDB through the Arrow C stream interface."""
    code = ("import sys\nfrom lakesink.cli.main import main\n"
            f"rc = main(['--format', 'json', 'sql', '--config', {job_file!r}, "
            "'SELECT kafka_partition, next_offset FROM committed_offsets'])\n"
            "print(rc, *(m in sys.modules for m in ('boto3', 'pyspark', 'pyarrow')))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = r.stdout.splitlines()
    assert lines[-1] == "0 False False False", r.stderr
    assert json.loads(lines[0])["rows"] == [{"kafka_partition": 0, "next_offset": 6},
                                            {"kafka_partition": 1, "next_offset": 12}]


#: What the `lakesink sql` process on a local path manifest must not import: the Spark route, pandas and numpy (with
#: pyarrow), boto3, Great Expectations, the dev stack, the executor, and the other subcommands' modules.
HEAVY = ("pyspark", "py4j", "great_expectations", "pandas", "numpy", "pyarrow", "boto3", "botocore",
         "lakesink.devstack", "lakesink.executor", "lakesink.driver.archive", "lakesink.driver.validate")


def test_the_sql_command_imports_nothing_it_does_not_use(job_file):
    """The `lakesink sql` command in a process of its own, as the entry point runs it (:func:`main`, then the
    modules it left in ``sys.modules``): none of :data:`HEAVY`, and no other subcommand's module (the CLI imports
    only the command argv names). Each of them cost the one-query process 0.02-0.3 s."""
    from lakesink.cli.main import COMMANDS

    code = ("import json, sys\nfrom lakesink.cli.main import main\n"
            f"rc = main(['--format', 'json', 'sql', '--config', {job_file!r}, "
            "'SELECT kafka_partition, next_offset FROM committed_offsets'])\n"
            "print(json.dumps([rc, sorted(sys.modules)]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = r.stdout.splitlines()
    rc, modules = json.loads(lines[-1])
    assert rc == 0, r.stderr
    assert json.loads(lines[0])["rows"][0] == {"kafka_partition": 0, "next_offset": 6}
    assert {"lakesink.cli.sql", "duckdb", "deltalake", "sqlglot"} <= set(modules)
    others = {f"lakesink.cli.{c}" for c in COMMANDS if c != "sql"}
    assert [m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY) or m in others] == []


def test_every_doc_query_gives_the_same_rows_with_only_what_it_reads(job_file, monkeypatch):
    """Narrowing changes nothing a query sees: each docs/sql.md query (on its own connection holding only what it
    reads) returns the rows it returns on a connection holding every table, view and column."""
    import re
    from pathlib import Path

    import lakesink.driver.sql as sqlmod
    from lakesink.manifest.queries import orders_rows, query_statements

    monkeypatch.setattr(sqlmod, "end_offset_rows", lambda cfg, topics: [("j", "orders", 0, 0, 9)])
    doc = (Path(__file__).resolve().parents[2] / "docs" / "sql.md").read_text()
    queries = re.findall(r"^### \d+\. .+?\n\n```sql\n(.*?)```", doc, re.S | re.M)
    assert len(queries) >= 9
    cfg = load_config(job_file)
    with open_duckdb(cfg) as everything:
        for q in queries:
            (statement,) = query_statements(q, sqlmod.QUERY_NAMES)
            with SqlSession(cfg, engine="duckdb") as s:
                narrow = s.run(statement, None)[0]
            columns, rows, _ = everything.query(statement, None, order=not orders_rows(statement))
            assert narrow.columns == columns and len(narrow.rows) == len(rows), q
            # lag_seconds counts from the query's current_timestamp(): the two runs may fall in two seconds
            now_based = {i for i, c in enumerate(columns) if c == "lag_seconds"}
            for a, b in zip(narrow.rows, rows):
                assert [v for i, v in enumerate(a) if i not in now_based] == \
                       [v for i, v in enumerate(b) if i not in now_based], q
                assert all(abs(a[i] - b[i]) <= 1 for i in now_based if a[i] is not None), q


def test_a_refused_statement_is_the_error_before_a_missing_manifest(job_file, tmp_path, capsys):
    """The statements are checked before the manifest is read: a refused statement is the error a user sees (exit
    2) even when the manifest is missing too; a missing manifest is one line (exit 5) for a good statement."""
    from lakesink.cli.main import main

    missing = tmp_path / "job.properties"
    missing.write_text("\n".join(ln if not ln.startswith("manifest.location=") else
                                 f"manifest.location={tmp_path / 'none'}" for ln in open(job_file).read().splitlines()))
    assert main(["sql", "--config", str(missing), "DROP TABLE objects"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "DROP is not a query" in err[0], err
    assert main(["sql", "--config", str(missing), "SELECT count(*) FROM objects"]) == 5
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("lakesink: error: no manifest table at "), err
