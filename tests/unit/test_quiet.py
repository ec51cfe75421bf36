"""Issue #28 item 6 without a JVM: the noise predicate the integration tests use (on lines captured from a notebook
run before the fix), ``$LAKESINK_VERBOSE``, and the settings a local JVM lakesink starts gets
(:func:`lakesink.runtime.logs.quiet_jvm`). tests/integration/test_quiet_runs.py, test_notebooks.py and
test_cli_commands.py::test_demo check the real runs."""
from __future__ import annotations

import os

import pytest
from support.noise import noise_lines, spark_lines

from lakesink.runtime import logs

# stderr of notebooks/quickstart.ipynb run headless on main before the fix (abridged, verbatim lines)
BEFORE = """\
WARNING: Using incubator modules: jdk.incubator.vector
Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties
Setting default log level to "WARN".
To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).
26/11/26 23:13:50 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform... using builtin-java \
classes where applicable

[Stage 0:>                                                          (0 + 2) / 2]\r\
[Stage 0:=============================>                             (1 + 1) / 2]
SLF4J: Failed to load class "org.slf4j.impl.StaticLoggerBinder".
SLF4J: Defaulting to no-operation (NOP) logger implementation
%6|1795734858.670|FAIL|rdkafka#producer-3| [thrd:127.0.0.1:36653/1]: 127.0.0.1:36653/1: Disconnected
Traceback (most recent call last):
  File "/work/main/lakesink/driver/sink.py", line 265, in run_batch
2026-11-26 23:13:50.123 WARN TaskSetManager: Lost task 0.0 in stage 1.0 (TID 1)
"""

OURS = """\
127.0.0.1:39533 http://127.0.0.1:44499 None s3a://archive/_lakesink/qs-ci
batch 0: 12 objects, 500 records, 10240 bytes, 13 manifest rows (start 0.1s, plan 0.2s)
== manifest query:
lakesink: error: the config names topic 'orders', which does not exist (exit 3)
+-----------------+-------+-------+
|encoded_partition|objects|records|
would restore 4 objects, 400 records, 12000 bytes
"""


def test_noise_lines_finds_every_kind_of_line_the_notebooks_printed():
    found = noise_lines(BEFORE)
    assert [what for what, _ in found] == ["jvm", "spark", "spark", "spark", "log4j", "stage-bar", "stage-bar",
                                           "slf4j", "slf4j", "librdkafka", "traceback", "log4j"]
    assert noise_lines(BEFORE.encode()) == found
    assert len(spark_lines(BEFORE)) == 10


def test_lakesinks_own_lines_are_not_noise():
    assert noise_lines(OURS) == []
    assert noise_lines("") == []


def test_verbose_by_env_var_or_set_verbose(monkeypatch):
    monkeypatch.delenv(logs.VERBOSE_ENV, raising=False)
    monkeypatch.setattr(logs, "_verbose", False)
    assert not logs.verbose()
    for value, want in (("1", True), ("true", True), ("YES", True), ("0", False), ("", False)):
        monkeypatch.setenv(logs.VERBOSE_ENV, value)
        assert logs.verbose() is want, value
    monkeypatch.delenv(logs.VERBOSE_ENV)
    import lakesink

    lakesink.set_verbose(True)  # the notebook API's spelling
    try:
        assert logs.verbose()
    finally:
        lakesink.set_verbose(False)
    assert not logs.verbose()


@pytest.fixture
def quiet(monkeypatch, tmp_path):
    monkeypatch.delenv(logs.VERBOSE_ENV, raising=False)
    monkeypatch.delenv(logs.LOG_FILE_ENV, raising=False)
    monkeypatch.setenv("LAKESINK_LOG_DIR", str(tmp_path))
    monkeypatch.setattr(logs, "_verbose", False)
    return tmp_path


def test_a_new_jvm_logs_to_a_file_with_the_log4j_config_and_no_progress_bar(quiet):
    given = {"spark.driver.extraJavaOptions": "-Dmine=1", "spark.sql.shuffle.partitions": 2}
    with logs.quiet_jvm("nb", given, None, starts=True) as (conf, fd):
        assert fd is not None and os.fstat(fd).st_size == 0
        os.write(fd, b"WARNING: Using incubator modules: jdk.incubator.vector\n")
    with pytest.raises(OSError):  # closed when the block ends (the JVM holds its own copy)
        os.fstat(fd)
    [log] = list(quiet.iterdir())
    assert log.name.startswith("nb-") and log.read_text().startswith("WARNING: Using incubator")
    assert logs.run_log_file() == str(log)
    config = os.path.join(os.path.dirname(logs.__file__), logs.LOG4J_CONFIG)
    assert os.path.isfile(config)
    assert conf == {"spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "2",
                    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{config} "
                                                     f"-Dlakesink.log.file={log} -Dmine=1"}


def test_verbose_leaves_the_terminal_but_keeps_progress_bars_off(quiet, monkeypatch):
    monkeypatch.setenv(logs.VERBOSE_ENV, "1")
    with logs.quiet_jvm("nb", {"a": "b"}, None, starts=True) as (conf, fd):
        assert fd is None and conf == {"spark.ui.showConsoleProgress": "false", "a": "b"}
    assert list(quiet.iterdir()) == []


def test_no_new_jvm_or_a_given_output_is_left_as_it_is(quiet):
    with logs.quiet_jvm("nb", {"a": "b"}, None, starts=False) as (conf, fd):
        assert (conf, fd) == ({"a": "b"}, None)
    with logs.quiet_jvm("nb", None, 7, starts=True) as (conf, fd):
        assert (conf, fd) == ({}, 7)
    assert list(quiet.iterdir()) == []


def test_a_start_that_fails_before_the_jvm_leaves_no_empty_log_file(quiet):
    with pytest.raises(RuntimeError, match="no jars"):
        with logs.quiet_jvm("nb", None, None, starts=True):
            raise RuntimeError("no jars")
    assert list(quiet.iterdir()) == [] and logs.run_log_file() is None
