"""The sink's local engine (lakesink.runners.local): tasks in local worker processes instead of Spark when
Spark would only schedule them; which runs pick it (lakesink.runtime.engine.local_workers); the worker's framing."""
from __future__ import annotations

import io
import os
import time

import pytest

from lakesink.runtime.engine import local_workers
from lakesink.config import SinkConfig
from lakesink.runners.local import LocalTasks, local_parallelism
from lakesink.runners.progress import DriverCounts, track
from lakesink.errors import InvalidArgumentError, LocalTaskError
from lakesink.executor.local_worker import read_frame, run_task, write_frame

BASE = {"name": "j", "topics": "t", "flush.size": "3", "s3.bucket.name": "bkt", "manifest.location": "/tmp/m",
        "kafka.bootstrap.servers": "k:9092"}


@pytest.mark.parametrize("master,n", [("local", 1), ("local[3]", 3), ("local[*]", 8), ("local[2,4]", 2),
                                      (" local[5] ", 5), ("spark://h:7077", None), ("yarn", None),
                                      ("local-cluster[2,1,1024]", None), ("sc://h:15002", None)])
def test_a_local_master_gives_its_task_slots(master, n):
    assert local_parallelism(master, cpus=8) == n


@pytest.fixture
def no_master_env(monkeypatch):
    monkeypatch.delenv("LAKESINK_SPARK_MASTER", raising=False)
    monkeypatch.delenv("LAKESINK_SPARK_CLUSTER", raising=False)
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    # no Spark session in this process either, whatever a test run before these made (the one test beside a session
    # says so itself): run after a module that started Spark, auto gave None here
    monkeypatch.setattr("lakesink.runtime.spark.starts_local_jvm", lambda: True)


@pytest.mark.parametrize("extra,engine,master,expected", [
    ({}, "auto", "local[2]", 2),                              # Spark would only schedule: local workers
    ({}, "auto", None, len(os.sched_getaffinity(0))),         # local[*]: the CPUs this process may use
    ({}, "local", "local[3]", 3),
    ({}, "spark", "local[2]", None),                          # asked for Spark
    ({}, "auto", "spark://h:7077", None),                     # a cluster
    ({"kafka.reader": "spark"}, "auto", "local[2]", None),    # Spark's Kafka source needs Spark
    ({"manifest.engine": "spark"}, "auto", None, None),       # delta-spark commits in the JVM
])
def test_which_runs_take_local_workers(no_master_env, extra, engine, master, expected):
    assert local_workers(SinkConfig.from_dict({**BASE, **extra}), engine, master) == expected


def test_the_master_may_come_from_the_environment(no_master_env, monkeypatch):
    monkeypatch.setenv("LAKESINK_SPARK_MASTER", "local[3]")
    assert local_workers(SinkConfig.from_dict(BASE), "auto", None) == 3
    monkeypatch.setenv("LAKESINK_SPARK_MASTER", "spark://h:7077")
    assert local_workers(SinkConfig.from_dict(BASE), "auto", None) is None


@pytest.mark.parametrize("extra,engine,master,why", [
    ({"kafka.reader": "spark"}, "local", None, "the config needs Spark"),
    ({}, "local", "spark://h:7077", "master 'spark://h:7077' is not local"),
    ({}, "processes", None, "expected one of auto, spark, local"),
])
def test_local_workers_that_cannot_be_are_an_error_naming_why(no_master_env, extra, engine, master, why):
    with pytest.raises(InvalidArgumentError, match=why):
        local_workers(SinkConfig.from_dict({**BASE, **extra}), engine, master)


@pytest.mark.parametrize("extra,why", [
    ({"kafka.reader": "spark"}, "kafka.reader=spark reads Kafka with Spark's Kafka source"),
    ({"manifest.engine": "spark"}, "the manifest '/tmp/m' is written by Spark"),
    ({"manifest.location": "main.ops.manifest"}, "the manifest 'main.ops.manifest' is written by Spark"),
    ({"metrics.location": "main.ops.metrics"}, "the metrics table 'main.ops.metrics' is a catalog table"),
])
def test_the_engine_choice_and_the_local_runner_give_one_reason(no_master_env, extra, why):
    """What needs Spark is worded once (wiring.why_spark_runs_tasks): --engine local and LocalRunner.cannot_run
    both name the key at fault."""
    from lakesink.runners.local import LocalRunner

    cfg = SinkConfig.from_dict({**BASE, **extra})
    with pytest.raises(InvalidArgumentError) as ei:
        local_workers(cfg, "local", "local[2]")
    assert str(ei.value).startswith(f"--engine local: the config needs Spark: {why}")
    assert why in LocalRunner.cannot_run(object.__new__(LocalRunner), cfg)
    assert LocalRunner.cannot_run(object.__new__(LocalRunner), SinkConfig.from_dict(BASE)) is None


def test_on_a_cluster_spark_runs_the_tasks(no_master_env, monkeypatch):
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "16.4")
    assert local_workers(SinkConfig.from_dict(BASE), "auto", None) is None
    with pytest.raises(InvalidArgumentError, match="--engine local: this process runs on a Spark cluster"):
        local_workers(SinkConfig.from_dict(BASE), "local", None)


def test_beside_a_session_auto_uses_it_and_local_still_may(no_master_env, monkeypatch):
    """A process that has a local session already (a notebook calling the CLI's main): auto lets that session run
    the tasks; --engine local runs them in local workers all the same."""
    monkeypatch.setattr("lakesink.runtime.spark.starts_local_jvm", lambda: False)
    assert local_workers(SinkConfig.from_dict(BASE), "auto", "local[2]") is None
    assert local_workers(SinkConfig.from_dict(BASE), "local", "local[2]") == 2


def test_frames_round_trip_and_a_cut_stream_is_an_error():
    buf = io.BytesIO()
    for payload in (b"", b"x", os.urandom(100_000)):
        write_frame(buf, payload)
    data = buf.getvalue()
    stream = io.BytesIO(data)
    assert [read_frame(stream) for _ in range(3)] == [b"", b"x", data[-100_000:]]
    assert read_frame(stream) is None
    for cut in (5, 20, 100):  # inside the first header, the third header, the third body
        stream = io.BytesIO(data[:cut])
        with pytest.raises(EOFError):
            while read_frame(stream) is not None:
                pass


def test_a_task_message_runs_and_an_error_comes_back_as_its_traceback():
    import pickle

    import cloudpickle

    k = 3
    ok = pickle.dumps((cloudpickle.dumps(lambda i: [f"{i}-{k}"] * 2), 7))
    assert run_task(ok) == ("ok", ["7-3", "7-3"])

    def fail(i):
        raise InvalidArgumentError(f"bad task {i}")

    status, text = run_task(pickle.dumps((cloudpickle.dumps(fail), 5)))
    assert status == "error" and text.splitlines()[-1] == "lakesink.errors.InvalidArgumentError: bad task 5"


@pytest.fixture(scope="module")
def tasks():
    with LocalTasks(2, fork=False) as t:  # never a fork of the test process (the forked start: a driver below)
        yield t


def test_a_worker_converts_python_lists_without_importing_pandas(tasks):
    """The workers skip pyarrow's pandas probe (lakesink.executor.pydaemon.skip_pandas_probe): no pandas import in
    the local engine's processes."""
    def converts(i: int) -> list[str]:  # defined here: pickled by value, as a task is
        import sys

        import pyarrow as pa

        pa.Table.from_pylist([{"k": b"x", "n": i}])
        return [f"{i}:{'pandas' in sys.modules}"]

    assert tasks.run(converts, 2) == ["0:False", "1:False"]


def test_tasks_run_on_the_workers_in_task_order(tasks):
    seen: list[list[str]] = []
    out = tasks.run(lambda i: [f"{i}:{os.getpid()}"], 5, seen.append)
    assert [r.split(":")[0] for r in out] == ["0", "1", "2", "3", "4"]
    pids = {int(r.split(":")[1]) for r in out}
    assert len(pids) == 2 and os.getpid() not in pids  # two worker processes, not this one
    assert sorted(r for rows in seen for r in rows) == sorted(out)  # each task's rows as it completed
    assert tasks.run(lambda i: [], 0) == []


@pytest.mark.timeout(120)  # a run that waited for the other task would hang here: a failure, not a measurement
def test_a_failed_task_fails_the_run_naming_its_error_and_stops_the_others(tasks, tmp_path):
    """Events, not timings: the other task is running (it said so) and would never end on its own; the run fails
    without waiting for it (a wait would end in the test's timeout), and its worker process is killed."""
    started, marker = tmp_path / "started", tmp_path / "late"

    def task(i):
        if i == 0:
            while not started.exists():  # fail only once the other task is surely running
                time.sleep(0.01)
            raise ValueError("record t-0@3 is bad")
        started.write_text(str(os.getpid()))
        time.sleep(600)
        marker.write_text("a stopped task went on")
        return ["x"]

    with pytest.raises(LocalTaskError, match=r"(?s)task 0 of 2 failed: .*\nValueError: record t-0@3 is bad$"):
        tasks.run(task, 2)
    other = int(started.read_text())
    for _ in range(1000):  # the kill is sent before run() raises; the process may take a moment to go
        if not _alive(other):
            break
        time.sleep(0.01)
    assert not _alive(other) and not marker.exists()  # its worker was killed, the task never finished
    assert tasks.run(lambda i: [str(i)], 3) == ["0", "1", "2"]  # new workers take the next batch


def test_a_worker_that_dies_fails_its_task(tasks):
    with pytest.raises(LocalTaskError, match=r"local worker \(pid \d+\) ended during its task"):
        tasks.run(lambda i: os._exit(7), 1)
    assert tasks.run(lambda i: ["ok"], 1) == ["ok"]


DRIVER = """
import os, sys, time
from lakesink.runners.local import LocalTasks
r, w = os.pipe()  # the driver's own pipe: no worker may hold either end of it
mine = os.readlink(f"/proc/self/fd/{w}")
t = LocalTasks(2, fork=FORK)

def probe(i):
    try:
        held = os.readlink(f"/proc/self/fd/{w}") == mine
    except OSError:
        held = False
    with open("/proc/self/comm") as f:
        name = f.read().strip()
    with open("/proc/self/cmdline", "rb") as f:
        spawned = f.read().split(b"\\0")[1:3] == [b"-m", b"lakesink.executor.local_worker"]
    return [f"{os.getpid()}:{os.getsid(0)}:{held}:{name}:{spawned}"]

print(*t.run(probe, 2), flush=True)
t.run(lambda i: time.sleep(120), 2)  # both workers mid-task when this driver is killed
"""


@pytest.mark.parametrize("fork", [True, False])
def test_workers_share_one_import_run_in_their_own_session_and_end_with_their_driver(fork):
    """One process imports and forks the other worker -- the driver itself forked (``fork``), or a new interpreter
    it started --; both are in a session of their own (a signal to the driver's process group does not reach
    them), hold none of the driver's other file descriptors, are named lakesink-worker; when the driver dies, even
    by SIGKILL mid-task, they end."""
    import signal
    import subprocess
    import sys

    driver = subprocess.Popen([sys.executable, "-c", DRIVER.replace("FORK", str(fork))], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        rows = [w.split(":") for w in driver.stdout.readline().split()]
        workers = [(int(pid), int(sid)) for pid, sid, *_ in rows]
        assert len(workers) == 2 and len({pid for pid, _ in workers}) == 2
        assert [tuple(r[2:]) for r in rows] == [("False", "lakesink-worker", str(not fork))] * 2, rows
        sessions = {sid for _, sid in workers}
        assert len(sessions) == 1 and sessions != {os.getsid(driver.pid)}  # one session, not the driver's
        assert sessions < {pid for pid, _ in workers}  # the worker that leads it forked the other
        leader = next(iter(sessions))
        with open(f"/proc/{leader}/stat") as f:
            assert int(f.read().rsplit(")", 1)[1].split()[1]) == driver.pid  # the driver's own child
        time.sleep(0.5)
        os.killpg(driver.pid, signal.SIGKILL)  # the driver's whole group: the workers are not in it
        driver.wait()
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid, _ in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid, _ in workers if _alive(pid)], "a worker outlived its driver"
    finally:
        if driver.poll() is None:
            driver.kill()


def test_only_a_single_threaded_process_forks_its_workers():
    """may_fork: a fresh interpreter (a CLI run when it starts its workers) forks; a process with another thread
    (a notebook's kernel) starts a new interpreter instead."""
    import subprocess
    import sys
    import threading

    from lakesink.runners.local import may_fork

    fresh = subprocess.run([sys.executable, "-c", "from lakesink.runners.local import may_fork; print(may_fork())"],
                           capture_output=True, text=True, check=True)
    assert fresh.stdout.strip() == "True"
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert may_fork() is False
    finally:
        stop.set()
        other.join()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_progress_counts_completed_local_tasks():
    """No accumulator without Spark: the driver adds each completed task's rows, and a task that read nothing
    still counts as a partition done."""
    from lakesink.executor.task import PartitionStatus, encode_result

    seen = []
    with track(seen.append, batch_id=4, partitions=3, counter=DriverCounts, host="127.0.0.1", poll_s=0.05) as tracking:
        assert tracking.live_to is not None and tracking.live_to[0] == "127.0.0.1"  # live datagrams: loopback
        tracking.done([encode_result(PartitionStatus("t", 0, 12, 0, 11))])
        tracking.done([encode_result(PartitionStatus("t", 1, 5, 0, 4))])
        time.sleep(0.2)
        during = seen[-1]
        tracking.done([])  # a range with no records
    assert (during.partitions_done, during.records_read, during.done) == (2, 17, False)
    assert (seen[-1].partitions_done, seen[-1].records_read, seen[-1].done) == (3, 17, True)
    counts = DriverCounts()
    counts.add_rows([encode_result(PartitionStatus("t", 0, 2, 0, 1))])
    assert counts.tasks == 1 and counts.value.records_read == 2


@pytest.mark.parametrize("extra,why", [
    ({"manifest.location": "main.ops.manifest"}, "the manifest 'main.ops.manifest' is written by Spark"),
    ({"metrics.location": "main.ops.metrics"}, "the metrics table 'main.ops.metrics' is a catalog table"),
])
def test_sql_asks_the_same_catalog_question(extra, why):
    """``lakesink sql`` picks DuckDB by the rule the runner uses (wiring.catalog_table): a catalog table goes to
    Spark, and --engine duckdb on one is a usage error naming it."""
    from lakesink.driver.sql import sql_engine

    cfg = SinkConfig.from_dict({**BASE, **extra})
    assert sql_engine(cfg, "auto") == "spark"
    with pytest.raises(InvalidArgumentError, match=f"--engine duckdb reads path tables only, and {why}"):
        sql_engine(cfg, "duckdb")
    assert sql_engine(SinkConfig.from_dict(BASE), "auto") == "duckdb"


def test_the_local_engines_driver_converts_python_lists_without_importing_pandas():
    """A process that runs its tasks on local workers has no Spark: its own pyarrow conversions (the manifest
    commit's rows) skip the pandas probe too. Run in a child: the probe's answer is kept for the process."""
    import subprocess
    import sys

    code = ("import sys; import pyarrow as pa; from lakesink.runners.local import LocalRunner; "
            "r = LocalRunner(1); pa.Table.from_pylist([{'a': 'x'}]); r.close(); "
            "print('pandas' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr[-2000:]


def test_asking_whether_a_local_jvm_would_start_does_not_import_pyspark():
    """A process that never imported pyspark has no JVM and no session: the engine's question is answered without
    importing it (a local-engine run never needs pyspark in its driver). Run in a child: imports are for good."""
    import subprocess
    import sys

    code = ("import sys; from lakesink.runtime.spark import starts_local_jvm; "
            "print(starts_local_jvm(), 'pyspark' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABRICKS_RUNTIME_VERSION", "LAKESINK_SPARK_CLUSTER")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and r.stdout.split() == ["True", "False"], r.stderr[-2000:]
