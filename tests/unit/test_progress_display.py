"""The progress display's terminal line: records of the plan's total first, fields left out (never cut) when the
terminal is narrow, its width measured at every draw (a pty with 0 columns counts as 80); restore's counts."""
import fcntl
import io
import os
import pty
import struct
import termios
import time

import pytest

from lakesink.cli.progress import DEFAULT_WIDTH, Eta, ProgressDisplay, bar_line, fields, fit, progress_line, terminal_width
from lakesink.executor.progress import Counts, counts_of, produced_counts
from lakesink.runners.progress import LiveReceiver, Progress, with_total


def progress(**kw):
    base = dict(batch_id=12, partitions_total=8, partitions_done=3, records_read=123_456, bytes_read=45 * 2**20,
                elapsed_s=75.0, records_total=320_000)
    return Progress(**{**base, **kw})


def steady_eta():
    eta = Eta()
    eta.update(0.0, 0)
    for i in range(1, 21):
        eta.update(i * 0.5, i * 1000)
    return eta  # 2000 rec/s, 20,000 done: ETA 2:30 to 320,000


def test_every_field_when_the_terminal_is_wide():
    line = bar_line(progress(), steady_eta(), 200)
    assert line.startswith("batch 12  [")
    for text in ("38%", "123,456/320,000 records", "45.0 MiB", "2,000 rec/s", "ETA 2:30", "1:15 elapsed",
                 "3/8 partitions"):
        assert text in line


@pytest.mark.parametrize("width", range(8, 130, 3))
def test_narrow_terminals_drop_fields_never_cut_them(width):
    p, eta = progress(), steady_eta()
    whole = [t for _r, t in fields(p, eta)]
    line = bar_line(p, eta, width)
    shown = [t for t in line.split("  ") if not t.startswith("[")]
    assert all(t in whole for t in shown), (line, whole)  # each field whole, or absent
    assert "123,456/320,000 records" in shown  # the count stays, whatever the width
    if len(line) > width:
        assert shown == ["123,456/320,000 records"]  # only the count alone may be wider than the terminal
    if width >= len("123,456/320,000 records  ETA 2:30"):
        assert "ETA 2:30" in shown  # the ETA is the last to go after the count


def test_fit_leaves_out_the_widest_rank_first():
    parts = [(2, "bb"), (0, "aaaa"), (3, "ccc"), (1, "d")]
    assert fit(parts, 100) == ["bb", "aaaa", "ccc", "d"]
    assert fit(parts, len("bb  aaaa  d")) == ["bb", "aaaa", "d"]
    assert fit(parts, 7) == ["aaaa", "d"]
    assert fit(parts, 2) == ["aaaa"]


def test_a_restore_is_labelled_and_a_plan_without_a_total_shows_no_percentage_or_eta():
    got = []
    listener = with_total(got.append, 900, "restore")
    listener(Progress(0, 2, 1, 300, elapsed_s=3.0))
    assert got[0].records_total == 900 and got[0].name == "restore"
    assert progress_line(got[0]).startswith("restore: 33%, 300/900 records")
    assert with_total(None, 900) is None
    line = progress_line(Progress(4, 2, 1, 300, elapsed_s=3.0), steady_eta())
    assert line == "batch 4: 300 records, 2,000 rec/s, 0:03 elapsed, 1/2 partitions"


def set_winsize(fd, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))


def _read_pty(master: int, until: str) -> str:
    """What the pty's other side wrote, up to its end ``until``: the kernel moves written bytes to the master
    side on its own time (a busy machine gave a first read only part of them)."""
    import select

    got = b""
    for _ in range(100):  # bounded: at most 100 reads of up to 0.1 s each
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            got += os.read(master, 65536)
            if got.decode(errors="replace").endswith(until):
                break
    return got.decode()


def test_width_is_measured_on_the_terminal_at_every_draw_and_zero_columns_count_as_80(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    master, slave = pty.openpty()
    try:
        stream = os.fdopen(slave, "w", closefd=False)
        d = ProgressDisplay("auto", stream)
        assert d.mode == "bar"  # a terminal
        set_winsize(slave, 0)
        assert terminal_width(stream) == DEFAULT_WIDTH  # the pty showed nothing at 0 columns
        set_winsize(slave, 50)
        assert terminal_width(stream) == 50
        d(progress())
        set_winsize(slave, 120)
        d(progress(records_read=200_000))
        d(progress(done=True))
        drawn = _read_pty(master, until="\r\x1b[K")
        frames = [f.replace("\x1b[K", "") for f in drawn.replace("\r\n", "\n").split("\r") if f.replace("\x1b[K", "")]
        assert len(frames[0]) <= 49 and "123,456/320,000 records" in frames[0]  # drawn at 50 columns
        assert "200,000/320,000 records" in frames[1] and 49 < len(frames[1]) <= 119  # then at 120
        assert drawn.endswith("\r\x1b[K")  # cleared when the batch ended
        monkeypatch.setenv("COLUMNS", "33")
        assert terminal_width(stream) == 33  # COLUMNS wins, as for other tools
    finally:
        os.close(master)
        os.close(slave)


def test_nothing_reaches_a_non_terminal_before_the_interval_and_none_prints_nothing():
    out = io.StringIO()
    d = ProgressDisplay("auto", out, every_s=30, clock=lambda: 0.0)
    assert d.mode == "lines"
    d(progress())
    assert out.getvalue() == ""
    quiet = io.StringIO()
    ProgressDisplay("none", quiet)(progress())
    assert quiet.getvalue() == ""


def test_restore_results_count_as_records_done_and_produced():
    row = ('{"id": 1, "produced": 70, "skipped": 20, "superseded": 5, "tombstones_dropped": 1, "bytes": 7000, '
           '"transactions": 2}')
    assert counts_of([row]) == Counts(partitions=1, records_read=96, records=70, bytes=7000)


def test_a_restore_worker_sends_records_produced_to_the_driver():
    recv = LiveReceiver("127.0.0.1")
    try:
        t = [0.0]
        seen = []
        on_event, sender = produced_counts(recv.address, "dest-3", clock=lambda: t[0])
        for i in range(5):
            t[0] += 1.0
            on_event("produced", {"offset": i})
            on_event("committed", {"next_offset": i + 1})
        sender.close()
        deadline = time.monotonic() + 5
        while recv.records_read() < 5 and time.monotonic() < deadline:  # UDP on the loopback: a bounded wait
            recv.sock.settimeout(0.2)
            recv.drain()
        seen.append(recv.read)
        assert recv.read == {"dest-3": 5}
    finally:
        recv.close()


def test_a_restore_worker_counts_records_delivered_not_handed_to_the_producer():
    class Producer:  # what len() of a confluent_kafka.Producer tells: records it still holds
        held = 0

        def __len__(self):
            return self.held

    producer, t = Producer(), [0.0]
    on_event, sender = produced_counts(None, "dest-0", clock=lambda: t[0])
    for i in range(10):
        producer.held = min(4, i + 1)  # the producer runs up to 4 records ahead of the broker
        on_event("produced", {"producer": producer, "offset": i})
    assert sender.read == 6  # 10 handed over, 4 not delivered yet
    producer.held = 0
    on_event("committed", {"next_offset": 10})
    assert sender.read == 10


def test_a_bad_progress_interval_is_one_line_and_exit_2_before_anything_starts():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "lakesink.cli", "restore", "--config", "/nonexistent/job.json",
                        "--to-topic", "x", "--progress-every", "soon"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == ("lakesink: error: --progress-every 'soon': expected a duration like 30s, 5m, 1h or "
                                "250ms") and r.stdout == ""
