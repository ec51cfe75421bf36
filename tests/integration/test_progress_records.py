"""Progress in records through the CLI (issue #31 item 2, #29 item 5): `lakesink sink` and `lakesink restore` show
records done of the plan's total, bytes, rate and an ETA on stderr (nothing on stdout), as plain lines without a
terminal and as one redrawn line on a pty (python's pty module), never wider than the terminal.

The runs are throttled by the broker, not by lakesink: a Kafka client quota (consumer_byte_rate and
producer_byte_rate for the config's ``kafka.client.id``, set with Kafka's own ConfigCommand) with small fetches,
so the runs last long enough to print lines and redraws; stderr is stamped by the test as it arrives. A quota's
throughput is not steady (the broker lets a first window's worth through at once, then mutes the client for
seconds at a time), so no estimate of it can be held to 25%: the ETA is held to that bar against the real time on
a restore paced by ``--max-rate`` (a steady rate under the quota), and on a scripted clock in
tests/unit/test_progress_eta.py. The sink and the restores run on the local engine; one restore runs on Spark (its
tasks count through the accumulator and the live datagrams)."""
from __future__ import annotations

import os
import pty
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid

import fcntl
import pytest
import termios
from support.archive_checks import base_config, write_config
from support.progress_lines import eta_errors, parse

N = 1200  # records of VALUE bytes: 1.2 MB; at RATE a burst of 10 s worth (Kafka's quota window) then about 14 s
VALUE = 1000
RATE = 50_000  # bytes/s, consumer and producer quota of the runs' client id
COLUMNS = 72
FIELD = re.compile(r"restore|\[#*-*\]|\d+%|[\d,]+/[\d,]+ records|[\d.]+ (B|KiB|MiB)|[\d,]+ rec/s|ETA \d+(:\d\d)+|"
                   r"\d+:\d\d elapsed|\d+/\d+ partitions")


def set_quota(kafka, client_id: str, rate: int) -> None:
    """consumer_byte_rate and producer_byte_rate for ``client_id`` (Kafka's ConfigCommand: the Python client has
    no client-quota API)."""
    from lakesink.devstack import check_java, jars_dir
    from lakesink.devstack.kafka import KAFKA_JARS_ENV

    cp = os.path.join(str(jars_dir("kafka", KAFKA_JARS_ENV)), "*")
    r = subprocess.run([check_java(), "-Xmx128m", "-cp", cp, "kafka.admin.ConfigCommand", "--bootstrap-server",
                        kafka.bootstrap_servers, "--alter", "--add-config",
                        f"consumer_byte_rate={rate},producer_byte_rate={rate}", "--entity-type", "clients",
                        "--entity-name", client_id], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


class Run:
    """A CLI run whose stderr is stamped as it arrives: ``frames`` (time, text) split at newlines and carriage
    returns (a terminal line's redraws)."""

    def __init__(self, args: list[str], tty: bool):
        self.frames: list[tuple[float, str]] = []
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("COLUMNS", None)
        if tty:
            master, slave = pty.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
            err, self.fd = slave, master
        else:
            err, self.fd = subprocess.PIPE, None
        self.proc = subprocess.Popen([sys.executable, "-m", "lakesink.cli", *args], stdout=subprocess.PIPE,
                                     stderr=err, env=env, start_new_session=True)
        if tty:
            os.close(slave)
        else:
            self.fd = self.proc.stderr.fileno()
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self) -> None:
        """Frames split at newlines and carriage returns, each stamped when its first character arrived (a plain
        line when it is printed, a redraw when it is drawn, the clearing of the terminal line when it is cleared)."""
        text, at = "", None
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # the pty's other end closed
                break
            if not chunk:
                break
            now = time.monotonic()
            for ch in chunk.decode(errors="replace"):
                if ch in "\r\n":
                    if text:
                        self.frames.append((at, text))
                    text, at = "", None
                else:
                    at = now if at is None else at
                    text += ch
        if text:
            self.frames.append((at, text))

    def wait(self, timeout: float = 600) -> tuple[int, str]:
        out: list[bytes] = []
        stdout = threading.Thread(target=lambda: out.append(self.proc.stdout.read()), daemon=True)
        stdout.start()  # not communicate(): it would read stderr too, under the stamping reader
        try:
            self.proc.wait(timeout=timeout)
        finally:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # what the run left (workers, a JVM)
            except ProcessLookupError:
                pass
        stdout.join(timeout=30)
        self.reader.join(timeout=30)
        if self.proc.stderr is None:
            os.close(self.fd)
        return self.proc.returncode, b"".join(out).decode(errors="replace")

    def progress(self) -> list:
        return [ln for ln in (parse(t, f.replace("\x1b[K", "")) for t, f in self.frames) if ln is not None]

    def text(self) -> str:
        return "\n".join(f for _t, f in self.frames)


@pytest.fixture(scope="module")
def archived(kafka, s3, tmp_path_factory):
    """A throttled sink run through the CLI with plain lines (no terminal, local engine): the archive the restores
    read, and that run's output."""
    from confluent_kafka import Producer

    tmp = tmp_path_factory.mktemp("progress")
    topic = f"progress-{uuid.uuid4().hex[:8]}"
    bucket = s3.create_bucket(f"progress-{uuid.uuid4().hex[:8]}")
    kafka.create_topic(topic, partitions=2)
    # small record batches: a fetch returns at least one whole batch, and the runs fetch 4 KB per partition
    p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5, "batch.size": 2048})
    for i in range(N):
        p.produce(topic, value=(f'{{"i": {i}, "pad": "' + "x" * (VALUE - 30)).ljust(VALUE - 2) + '"}',
                  partition=i % 2)
    p.flush(30)
    client_id = f"throttled-{uuid.uuid4().hex[:8]}"
    set_quota(kafka, client_id, RATE)
    cfg = base_config(kafka, s3, bucket, topic, **{"flush.size": "400", "kafka.client.id": client_id,
                                                   "kafka.fetch.max.bytes": "8192",
                                                   "kafka.message.max.bytes": "8192",
                                                   "kafka.max.partition.fetch.bytes": "4096"})
    path = write_config(tmp, cfg)
    run = Run(["sink", "--config", path, "--once", "--flush-tail", "--engine", "local", "--master", "local[2]",
               "--progress", "auto", "--progress-every", "1s"], tty=False)
    rc, out = run.wait()
    assert rc == 0, (out[-2000:], run.text()[-3000:])
    return {"path": path, "topic": topic, "run": run, "stdout": out}


def test_sink_lines_without_a_terminal_count_records_of_the_plan_with_an_eta(archived):
    run, out = archived["run"], archived["stdout"]
    lines = run.progress()
    assert lines, run.text()[-3000:]
    assert all(ln.total == N for ln in lines), run.text()[-3000:]  # the plan's records from the first line on
    assert [ln.done for ln in lines] == sorted(ln.done for ln in lines) and lines[-1].done == N, \
        (run.text()[-3000:], out)
    last = [f for _t, f in run.frames if ", done, " in f]
    assert len(last) == 1 and f"{N:,}/{N:,} records" in last[0], run.text()[-3000:]  # the batch's last line
    assert "\x1b[" not in run.text() and "\r" not in run.text()  # plain lines: no terminal codes
    assert "records" in out and "ETA" not in out and "rec/s" not in out  # stdout: the batch line only
    assert any(ln.eta_s is not None for ln in lines), run.text()[-3000:]


def restore_args(archived, dest: str, engine: str) -> list[str]:
    return ["restore", "--config", archived["path"], "--to-topic", dest, "--engine", engine, "--master", "local[1]",
            "--progress-every", "1s"]


def test_restore_on_a_pty_redraws_one_line_as_wide_as_the_terminal(archived, kafka):
    dest = f"copy-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=2)
    run = Run(restore_args(archived, dest, "local"), tty=True)
    rc, out = run.wait()
    assert rc == 0, (out[-2000:], run.text()[-3000:])
    frames = [(t, f.replace("\x1b[K", "")) for t, f in run.frames]
    drawn = [(t, f) for t, f in frames if parse(t, f) is not None]
    assert len(drawn) >= 8 and all(f.startswith("restore") for _t, f in drawn), frames[-20:]
    assert all(len(f) < COLUMNS for _t, f in drawn)  # never wider than the terminal (one column spare)
    for _t, f in drawn:  # every field whole
        assert all(FIELD.fullmatch(x) for x in f.split("  ")), f
    lines = run.progress()
    assert all(ln.total == N for ln in lines)
    assert any(ln.eta_s is not None for ln in lines), frames[-20:]
    assert frames[-1][1] == "", frames[-5:]  # the line is cleared when the tasks end (the report follows, on stdout)
    assert f"{N} record(s) produced" in out and "ETA" not in out


def test_restore_on_spark_lines_without_a_terminal(archived, kafka):
    dest = f"copy-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=2)
    run = Run(restore_args(archived, dest, "spark"), tty=False)
    rc, out = run.wait()
    assert rc == 0, (out[-2000:], run.text()[-3000:])
    lines = run.progress()
    assert lines and all(ln.total == N for ln in lines), run.text()[-3000:]
    done = [t for t, f in run.frames if ", done, " in f]
    assert done and lines[-1].done == N, run.text()[-3000:]  # the tasks' results: every record produced
    # no ETA asserted here: a restore's count moves when a transaction commits (delivered records), and these
    # 600 records a partition are one transaction each, so the count may jump from 0 to the end in two steps
    # with no line between that has a rate (make test saw it); the local runs above assert the ETA
    assert f"{N} record(s) produced" in out and "ETA" not in out


def test_restore_eta_holds_against_the_real_time_at_a_steady_rate(archived, kafka):
    """``--max-rate`` gives a steady rate (25 records a second per task, under the client's quota: the broker never
    throttles it), so the ETA can be held to the issue's bar: after the first 20% of the run, every line's
    prediction of the run's length (time so far + ETA) is within 25% of the real one; the rate shown stays at
    the limit. 400 records (offsets 0..199 of each partition), one worker: about 16 s."""
    dest = f"copy-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=2)
    started = time.monotonic()
    run = Run(restore_args(archived, dest, "local") + ["--to-offset", "199", "--max-rate", "25", "--progress",
                                                       "lines"], tty=False)
    rc, out = run.wait()
    assert rc == 0, (out[-2000:], run.text()[-3000:])
    assert "400 record(s) produced" in out, out[-2000:]
    [ended] = [t for t, f in run.frames if ", done, " in f]
    lines = run.progress()
    assert all(ln.total == 400 for ln in lines), run.text()[-3000:]
    errors = eta_errors(lines, started, ended)
    assert len(errors) >= 5, run.text()[-3000:]
    assert max(e for _ln, e in errors) <= 0.25, ([(round(ln.at - started, 1), ln.done, ln.eta_s, round(e, 2))
                                                  for ln, e in errors], [(round(t - started, 2), f)
                                                                         for t, f in run.frames])
    rates = [int(m.group(1).replace(",", "")) for _t, f in run.frames for m in [re.search(r"([\d,]+) rec/s", f)] if m]
    assert rates and max(rates[len(rates) // 5:]) <= 30, rates  # the limit, not the broker, sets the pace
