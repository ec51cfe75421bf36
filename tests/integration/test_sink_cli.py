"""The `lakesink` command: continuous mode stops cleanly on SIGTERM; config errors exit 1 with a message."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import pytest
from support.archive_checks import (base_config, check_chains, local_worker_alive, local_workers_of, manifest_rows,
                                    produce)

from lakesink.config import load_config


def test_continuous_mode_finishes_the_batch_and_exits_0_on_sigterm(spark, kafka, s3, bucket, topic_name, tmp_path):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, [json.dumps({"i": i}).encode() for i in range(20)])
    raw = base_config(kafka, s3, bucket, topic_name, **{"flush.size": "5"})
    cfg_file = tmp_path / "sink.json"
    cfg_file.write_text(json.dumps(raw))
    proc = subprocess.Popen([sys.executable, "-m", "lakesink.cli", "sink", "--config", str(cfg_file),
                             "--continuous", "--interval", "1s", "--master", "local[1]"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        first = proc.stdout.readline()  # printed after batch 0 committed
        assert first.startswith("batch 0:"), first + proc.stderr.read()[-2000:]
        produce(kafka, topic_name, [json.dumps({"i": i}).encode() for i in range(20, 30)])
        archived, deadline = 0, time.monotonic() + 180
        while archived < 10 and time.monotonic() < deadline:  # later batches archive the new records
            lines.append(proc.stdout.readline())
            m = re.match(r"batch \d+: \d+ objects, (\d+) records", lines[-1])
            archived += int(m.group(1)) if m else 0
        assert archived == 10
        # then polls that find nothing: the last iteration before the signal commits nothing (issue 26 item 6b)
        while lines[-1] and not lines[-1].startswith("poll ") and time.monotonic() < deadline:
            lines.append(proc.stdout.readline())
        assert re.fullmatch(r"poll \d+: nothing new to archive, nothing committed \(.*\)\n", lines[-1]), lines
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    assert rc == 0, err[-2000:]
    lines += proc.stdout.read().splitlines(keepends=True)
    # a batch id is printed once, by the batch that committed it; the polls count on without naming one
    batches = [(int(m.group(1)), int(m.group(2))) for ln in [first, *lines]
               if (m := re.match(r"batch (\d+): \d+ objects, (\d+) records", ln))]
    assert [b for b, _ in batches] == list(range(len(batches))) and len(batches) >= 2, lines
    polls = [int(m.group(1)) for ln in lines if (m := re.match(r"poll (\d+): ", ln))]
    assert polls == sorted(set(polls)), lines
    # the run's last word says what it committed: not "after batch N committed" for a poll that committed nothing
    last, records = batches[-1]
    assert err.strip().splitlines()[-1] == (f"lakesink: warning: SIGTERM received: stopped; the last committed "
                                            f"batch is {last} ({records} records); nothing committed after it"), err
    cfg = load_config(cfg_file)
    check_chains(manifest_rows(spark, cfg), {(topic_name, 0): 30})


def test_bad_config_exits_3_naming_every_problem(tmp_path):
    f = tmp_path / "bad.properties"
    f.write_text("name=j\ntopics=t\nflush.size=zero\nformat.class=avro\nformatt.class=json\n"
                 "s3.bucket.name=b\nmanifest.location=/tmp/m\nkafka.bootstrap.servers=x:1\n")
    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "check", str(f)], capture_output=True, text=True)
    assert r.returncode == 3  # config error
    assert "flush.size='zero'" in r.stderr and "did you mean 'format.class'" in r.stderr
    assert str(f) in r.stderr


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_bad_record_is_one_stderr_line_and_the_details_go_to_the_log_file(kafka, s3, bucket, topic_name, tmp_path,
                                                                            engine):
    """Spark's task-failure log (or the local worker's) and the Python traceback go to the run's log file; stderr
    has the one `lakesink: error:` line naming the record, its cause and the log file; exit 6 (bad record)."""
    from support.archive_checks import json_payloads, write_config

    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(3) + [b"{not json"] + json_payloads(2, start=4))
    cfg = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{"flush.size": "2"}))
    log = tmp_path / "run.log"
    env = {**__import__("os").environ, "LAKESINK_SPARK_LOG_FILE": str(log)}
    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "sink", "--config", cfg, "--once", "--master",
                        "local[1]", "--engine", engine], capture_output=True, text=True, timeout=540, env=env,
                       cwd=tmp_path)
    assert r.returncode == 6, r.stderr[-3000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr[-5000:]
    assert lines[0].startswith("lakesink: error: batch 0 of job") and "nothing was committed" in lines[0]
    assert f"{topic_name}-0@3" in lines[0] and f"(log: {log})" in lines[0]
    text = log.read_text()
    assert "Traceback" in text and f"{topic_name}-0@3" in text
    assert "s3.bucket.name" not in r.stdout  # the results only


def _jvms_logging_to(log) -> list[int]:
    """Pids of live JVMs whose command line names ``log`` (a CLI run's Spark JVM: ``-Dlakesink.log.file=``)."""
    import os

    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            argv = cmd.split(b"\0")
            if (argv[0].endswith(b"java") and f"-Dlakesink.log.file={log}".encode() in cmd
                    and b"org.apache.spark.launcher.Main" not in argv):  # not spark-submit's launcher JVM
                pids.append(int(d))
    return pids


def test_the_session_starts_in_advance_writes_to_its_log_and_ends_with_the_run(kafka, s3, bucket, topic_name,
                                                                                 tmp_path):
    """The sink starts Spark while it plans (lakesink.runtime.session.SessionInAdvance): the JVM appears before the
    batch line, its stdout and stderr are the run's log file (so a caller reading the run's stdout through a pipe
    is not held until the JVM exits), and it is gone after the run -- also after a run with nothing to archive,
    which never asks for it."""
    import os

    from support.archive_checks import json_payloads, write_config

    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(5))
    cfg = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{"flush.size": "5"}))
    for run, records in ((0, 5), (1, 0)):
        log = tmp_path / f"run{run}.log"
        env = {**os.environ, "LAKESINK_SPARK_LOG_FILE": str(log)}
        proc = subprocess.Popen([sys.executable, "-m", "lakesink.cli", "--format", "json", "sink", "--config", cfg,
                                 "--once", "--master", "local[1]", "--engine", "spark"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
        seen: set[str] = set()
        while proc.poll() is None:  # the JVM's stdout and stderr, while it lives
            for pid in _jvms_logging_to(log):
                try:
                    seen |= {os.readlink(f"/proc/{pid}/fd/1"), os.readlink(f"/proc/{pid}/fd/2")}
                except OSError:
                    pass
            time.sleep(0.05)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-3000:]
        batch = json.loads(out.splitlines()[-1])
        assert batch["records"] == records and not err.strip(), err
        # started in advance (also for the empty run), writing to the log only; a quick empty run can start and end
        # its JVM between two looks at /proc (even before it writes a line): then the log file the run opened for
        # the JVM's output is the evidence (a run that starts no JVM opens none)
        assert seen == {str(log)} or (not seen and records == 0 and log.exists()), seen
        assert ("session" in batch["seconds"]) is (records > 0)  # only a batch with records asks for it
        deadline = time.monotonic() + 60
        while _jvms_logging_to(log) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _jvms_logging_to(log), "the run's JVM outlived it"


def test_the_local_engine_starts_workers_in_advance_and_no_jvm(kafka, s3, bucket, topic_name, tmp_path):
    """Spark would only schedule this config's tasks on a local master, so `--engine auto` (the default) runs
    them in local worker processes: they appear before the batch line (also for a run with nothing new), in their
    own session, writing to the run's log file; no JVM starts; they are gone after the run. The archive is the
    one the Spark engine writes (tests/integration/test_sink_direct.py compares them byte for byte)."""
    import os

    from support.archive_checks import json_payloads, write_config

    kafka.create_topic(topic_name, partitions=2)
    produce(kafka, topic_name, json_payloads(10), partition_of=lambda i: i % 2)
    cfg = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{"flush.size": "5"}))
    for run, records in ((0, 10), (1, 0)):
        log = tmp_path / f"run{run}.log"
        env = {**os.environ, "LAKESINK_SPARK_LOG_FILE": str(log)}
        proc = subprocess.Popen([sys.executable, "-m", "lakesink.cli", "--format", "json", "sink", "--config", cfg,
                                 "--once", "--master", "local[2]"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, cwd=tmp_path)
        workers: set[int] = set()
        stderr_of: set[str] = set()
        while proc.poll() is None:
            found = local_workers_of(proc.pid)
            workers |= set(found)
            for pid in found:
                try:
                    stderr_of.add(os.readlink(f"/proc/{pid}/fd/2"))
                    # a session of their own (the first worker's): a signal to the run's group spares them
                    assert os.getsid(pid) in workers and os.getsid(pid) != os.getsid(proc.pid)
                except OSError:
                    pass
            assert not _jvms_logging_to(log)
            time.sleep(0.02)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-3000:]
        batch = json.loads(out.splitlines()[-1])
        assert batch["records"] == records and not err.strip(), err
        # local[2]: two workers, started in advance; a run with nothing new may end before the first has
        # imported and forked the second (it is then killed: no task ever ran)
        assert len(workers) == 2 if records else 1 <= len(workers) <= 2, workers
        assert stderr_of == {str(log)}, stderr_of
        assert "session" not in batch["seconds"]  # no Spark to wait for
        assert not [p for p in workers if local_worker_alive(p)], "a local worker outlived the run"
        assert batch["objects"] == (2 if records else 0)  # flush.size 5: one object per partition


def test_engine_local_for_a_config_that_needs_spark_is_one_line(kafka, s3, bucket, topic_name, tmp_path):
    from support.archive_checks import write_config

    cfg = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{"kafka.reader": "spark"}))
    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "sink", "--config", cfg, "--once", "--engine", "local"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert lines[0].startswith("lakesink: error: --engine local: the config needs Spark: kafka.reader=spark"), lines
