"""What a cold ``lakesink sink`` does to start sooner: the session starts in advance, alongside the plan
(lakesink.runtime.session.SessionInAdvance), and a session that only schedules Python tasks gets a JVM built to start
quickly (lakesink.wiring.spark_schedules_only, lakesink.runtime.spark.local_settings)."""
from __future__ import annotations

import threading

import pytest

from lakesink import wiring
from lakesink.runtime.session import SessionInAdvance
from lakesink.config import SinkConfig
from lakesink.runtime.spark import SCHEDULER_JVM_OPTIONS, local_settings

BASE = {"name": "j", "topics": "t", "flush.size": "3", "s3.bucket.name": "bkt", "manifest.location": "/tmp/m",
        "kafka.bootstrap.servers": "k:9092"}


@pytest.mark.parametrize("extra,only", [
    ({}, True),                                                       # direct reader, delta-rs path manifest
    ({"metrics.location": "none"}, True),
    ({"metrics.location": "s3a://bkt/metrics"}, True),                # a path metrics table: delta-rs too
    ({"kafka.reader": "spark"}, False),                               # Spark's Kafka source reads in the JVM
    ({"manifest.engine": "spark"}, False),                            # delta-spark commits in the JVM
    ({"manifest.location": "main.archive.manifest"}, False),          # a catalog table: Spark's engine
    ({"metrics.location": "main.archive.metrics"}, False),            # a catalog metrics table
])
def test_a_session_only_schedules_when_no_data_passes_through_the_jvm(extra, only):
    assert wiring.spark_schedules_only(SinkConfig.from_dict({**BASE, **extra})) is only


@pytest.fixture
def jars(tmp_path, monkeypatch):
    d = tmp_path / "jars" / "spark"
    d.mkdir(parents=True)
    (d / "a.jar").write_bytes(b"PK")
    monkeypatch.setattr("lakesink.runtime.spark.default_jars_dir", lambda: d)
    monkeypatch.setenv("LAKESINK_CLASS_ARCHIVE", "0")
    return d


@pytest.mark.parametrize("master", ["local[2]", "spark://127.0.0.1:7077"])
def test_a_scheduler_only_driver_jvm_compiles_with_c1_alone(jars, master):
    given = {"spark.driver.extraJavaOptions": "-Dx=1"}
    plain = local_settings("a", master, conf=given)
    light = local_settings("a", master, conf=given, scheduler_only=True)
    assert plain["spark.driver.extraJavaOptions"] == "-Dx=1"
    assert light["spark.driver.extraJavaOptions"] == f"{SCHEDULER_JVM_OPTIONS} -Dx=1"  # given options still last
    assert {k: v for k, v in light.items() if k != "spark.driver.extraJavaOptions"} == \
        {k: v for k, v in plain.items() if k != "spark.driver.extraJavaOptions"}
    assert "TieredStopAtLevel=1" in SCHEDULER_JVM_OPTIONS


def test_the_session_starts_before_anyone_asks_for_it():
    started, release = threading.Event(), threading.Event()

    def start():
        started.set()
        release.wait(10)
        return "session"

    spark = SessionInAdvance(start)
    assert started.wait(10)  # already starting, while the caller goes on planning
    release.set()
    assert spark() == "session" and spark() == "session"


def test_a_failed_start_raises_where_the_session_is_asked_for():
    def start():
        raise RuntimeError("no jars")

    spark = SessionInAdvance(start)
    with pytest.raises(RuntimeError, match="no jars"):
        spark()


def test_a_run_that_never_asks_never_sees_the_start_fail():
    done = threading.Event()

    def start():
        done.set()
        raise RuntimeError("no jars")

    SessionInAdvance(start)
    assert done.wait(10)  # nothing raised here: a run with nothing to archive needs no session


class _Session:
    def __init__(self, master: str | None):
        self._master = master

    @property
    def sparkContext(self):  # noqa: N802 - pyspark's name
        if self._master is None:
            raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported in Spark Connect")
        return type("SC", (), {"master": self._master})()


def test_the_direct_reader_runs_python_rdd_tasks_only_on_a_local_master():
    """A cold local JVM plans no SQL query for the direct reader (a Python RDD); a cluster or Spark Connect session
    keeps ``spark.range(...).mapInArrow`` (both are run by the integration suite: local sessions, the standalone
    cluster test)."""
    from lakesink.runners.spark import local_context

    assert local_context(_Session("local[2]")).master == "local[2]"
    assert local_context(_Session("spark://127.0.0.1:7077")) is None
    assert local_context(_Session(None)) is None


def test_both_routes_hand_the_reader_the_same_ids_and_get_the_same_rows():
    """The RDD route gives read_and_archive its partition's ints; the mapInArrow route the ids of its range batches
    and the rows of the Arrow result batches are taken out the same way: both are first_column."""
    import pyarrow as pa

    from lakesink.runners import first_column

    assert list(first_column([pa.RecordBatch.from_pydict({"id": [3, 4]}), pa.RecordBatch.from_pydict({"id": [5]})])) \
        == [3, 4, 5]
    out = [pa.RecordBatch.from_pydict({"row": ["a", "b"]}), pa.RecordBatch.from_pydict({"row": ["c"]})]
    assert list(first_column(out)) == ["a", "b", "c"]
