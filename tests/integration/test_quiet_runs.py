"""The first commands are quiet (issue #28 item 6), for the two ways in that test_notebooks.py and
test_cli_commands.py::test_demo do not cover: a ``jobs/*.py`` entry point under ``spark-submit`` (the JVM runs
before lakesink does), and the Python API with ``LAKESINK_VERBOSE=1`` (what ``--verbose`` is to the CLI). Quiet:
no Spark banner, log4j/SLF4J line, stage progress bar, traceback or librdkafka line on stdout or stderr
(:func:`support.noise.noise_lines`); verbose: Spark's lines are back."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.archive_checks import base_config, json_payloads, produce, run_cli, write_config
from support.noise import noise_lines, spark_lines

REPO = Path(__file__).resolve().parents[2]

#: What the JVM itself prints when spark-submit starts it (Spark 4 opens the incubating vector module), before
#: any lakesink code or log4j configuration runs: only the caller of spark-submit can redirect it.
JVM_START = "WARNING: Using incubator modules: jdk.incubator.vector"


def spark_submit(script: str, args: list[str], env_extra: dict | None = None) -> tuple[int, str]:
    """``spark-submit`` (pyspark's own) of ``jobs/<script>`` on a local master with the project's jars, as
    docs/sink.md says; combined stdout and stderr."""
    from lakesink.runtime.spark import default_jars_dir

    jars = os.pathsep.join(sorted(str(p) for p in default_jars_dir().glob("*.jar")))
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[1]", "--driver-class-path", jars,
               str(REPO / "jobs" / script)]
    return run_cli(args, command=command, timeout=540,
                   env_extra={"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                              **(env_extra or {})})


@pytest.mark.timeout(1200)
def test_jobs_sink_under_spark_submit_is_quiet_and_verbose_brings_spark_back(kafka, s3, bucket, topic_name,
                                                                           tmp_path):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(10), headers=False)
    cfg = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{"flush.size": "5"}))
    logs = tmp_path / "logs"

    rc, out = spark_submit("sink.py", ["--config", cfg, "--once", "--engine", "spark"],
                           env_extra={"LAKESINK_LOG_DIR": str(logs)})
    assert rc == 0, out[-4000:]
    assert "batch 0: 2 objects, 10 records" in out, out[-4000:]
    assert [line for _, line in noise_lines(out) if line != JVM_START] == [], out[-4000:]
    # what Spark said went to the run's log file
    [log] = list(logs.iterdir())
    assert any(what == "log4j" for what, _ in noise_lines(log.read_text())), log.read_text()[-3000:]

    produce(kafka, topic_name, json_payloads(10, start=10), headers=False)
    rc, out = spark_submit("sink.py", ["--config", cfg, "--once", "--engine", "spark", "--verbose"])
    assert rc == 0, out[-4000:]
    assert "batch 1: 2 objects, 10 records" in out, out[-4000:]
    assert [line for line in spark_lines(out) if line != JVM_START], out[-4000:]


SCRIPT = """
import lakesink
spark = lakesink.get_spark(app_name="quiet-api", master="local[1]")
print("COUNT", spark.range(100).repartition(2).count())
spark.stop()
"""


@pytest.mark.timeout(600)
def test_the_api_session_with_lakesink_verbose_prints_sparks_lines(tmp_path):
    """The notebooks (test_notebooks.py) show the quiet default; LAKESINK_VERBOSE=1 brings Spark's lines back."""
    env = {**os.environ, "LAKESINK_VERBOSE": "1", "LAKESINK_LOG_DIR": str(tmp_path / "logs")}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=540, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0 and "COUNT 100" in proc.stdout, proc.stderr[-4000:]
    assert spark_lines(proc.stderr), proc.stderr[-4000:]
    assert not (tmp_path / "logs").exists()  # nothing went to a log file
