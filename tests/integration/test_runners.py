"""The task runners (lakesink.runners): one contract, run on every runner -- Spark tasks in the test session and
local worker processes -- and the notebook API's engine choice (``lakesink.run(engine=...)``)."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest
from support.archive_checks import base_config, check_chains, json_payloads, manifest_rows, produce

import lakesink
from lakesink.config import SinkConfig
from lakesink.errors import LakesinkError

SCHEMA = "line string"

# the task bodies below travel by value: Spark's Python workers and the local workers cannot import this module
# (Spark pickles them with pyspark's copy of cloudpickle, the local engine with cloudpickle itself)
import cloudpickle  # noqa: E402
from pyspark import cloudpickle as spark_cloudpickle  # noqa: E402

for _pickler in (cloudpickle, spark_cloudpickle):
    _pickler.register_pickle_by_value(__import__("sys").modules[__name__])


def numbered(ids):
    """A task body: for each id, one batch of two lines naming the id and the process that ran it."""
    for i in ids:
        yield pa.RecordBatch.from_pydict({"line": [f"{i}:a", f"{i}:b:{os.getpid()}"]})


def failing(ids):
    for i in ids:
        if i == 2:
            raise ValueError("task 2 fails on purpose")
        yield pa.RecordBatch.from_pydict({"line": [str(i)]})


def _id_and_part(line: str) -> str:
    return ":".join(line.split(":")[:2])


def test_run_gives_every_task_in_task_order(runner):
    done = []
    out = runner.run(numbered, 5, SCHEMA, on_done=done.append)
    assert [_id_and_part(line) for line in out] == [f"{i}:{x}" for i in range(5) for x in ("a", "b")]
    ran_in = {line.rsplit(":", 1)[1] for line in out if line.count(":") == 2}
    assert ran_in and str(os.getpid()) not in ran_in  # the tasks ran in other processes
    # on_done: each task's lines as it completes where the runner sees them (local workers); Spark's tasks report
    # through its accumulator instead (runner.track)
    assert sorted(x for rows in done for x in rows) == (sorted(out) if runner.name == "local" else [])


def test_frame_holds_every_batch(runner):
    schema = pa.schema([("line", pa.string())])
    table = runner.frame(numbered, 3, SCHEMA, schema)
    rows = table.to_pylist() if isinstance(table, pa.Table) else [r.asDict() for r in table.collect()]
    assert sorted(_id_and_part(r["line"]) for r in rows) == sorted(f"{i}:{x}" for i in range(3) for x in ("a", "b"))
    empty = runner.frame(numbered, 0, SCHEMA, schema)
    assert (empty.num_rows if isinstance(empty, pa.Table) else empty.count()) == 0


def test_a_failing_task_fails_the_run_naming_its_error(runner):
    with pytest.raises(Exception, match="task 2 fails on purpose"):
        runner.run(failing, 4, SCHEMA)


def test_parallelism_and_settings(runner):
    assert runner.parallelism() >= 1
    assert runner.setting("spark.lakesink.no.such.key") is None


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_the_notebook_api_takes_an_engine(spark, kafka, s3, bucket, topic_name, engine):
    """``lakesink.run(spark, config, engine=...)``: the same batch on local workers (no Spark task) or on Spark."""
    kafka.create_topic(topic_name, partitions=2)
    produce(kafka, topic_name, json_payloads(40), partition_of=lambda i: i % 2)
    cfg = base_config(kafka, s3, bucket, topic_name, **{"flush.size": "10"})
    before = spark.sparkContext.statusTracker().getJobIdsForGroup(None)
    results = lakesink.run(spark, cfg, engine=engine)
    spark_jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(None)) - len(before)
    assert (spark_jobs == 0) if engine == "local" else (spark_jobs > 0)
    assert [r.records for r in results] == [40] and results[0].committed
    check_chains(manifest_rows(spark, SinkConfig.from_dict(cfg)), {(topic_name, 0): 20, (topic_name, 1): 20})
    # the notebook API records its runs as `lakesink sink` does: status sees them
    [row] = runs_of(SinkConfig.from_dict(cfg))
    assert (row.command, row.outcome, row.exit_code, row.batches, row.records) == ("sink", "OK", 0, 1, 40)
    assert row.run_id == results[0].run_id


def runs_of(cfg: SinkConfig) -> list:
    from lakesink import wiring
    from lakesink.manifest.runs import RunsTable, runs_location

    return RunsTable(runs_location(cfg.manifest_location), wiring.s3_settings(cfg)).last(cfg.name)


def test_an_unknown_engine_is_refused(spark, kafka, s3, bucket, topic_name):
    cfg = base_config(kafka, s3, bucket, topic_name)
    with pytest.raises(LakesinkError, match="expected one of auto, spark, local"):
        lakesink.run(spark, cfg, engine="processes")
    # a run that failed is remembered with its exit code and line, as the CLI's are
    [row] = runs_of(SinkConfig.from_dict(cfg))
    assert (row.outcome, row.exit_code, row.batches) == ("FAILED", 2, 0) and "expected one of" in row.error
