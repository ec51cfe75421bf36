"""The sink's progress display (plain lines and the bar), the executors' progress counts, and the metrics rows and
table (delta-rs on a local path)."""
import datetime as dt
import io

import pyarrow as pa
import pytest

from lakesink.cli.progress import ProgressDisplay, human_bytes, progress_line
from lakesink.config import SinkConfig
from lakesink.runners.progress import LiveReceiver, Progress, track
from lakesink.driver.sink import BatchResult, PartitionPlan
from lakesink.executor.archiver import ArchivedRow
from lakesink.executor.progress import Counts, counted, counts_of, live_counts
from lakesink.executor.task import PartitionStatus, encode_result
from lakesink.manifest.metrics import (MetricsTable, arrow_schema, metrics_ddl, metrics_location, metrics_row,
                                       write_batch_metrics)
from lakesink.manifest.rows import advance_row, object_row


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def p(batch=0, done=0, total=4, read=0, records=0, nbytes=0, objects=0, elapsed=0.0, finished=False):
    return Progress(batch, total, done, read, records, nbytes, objects, elapsed, finished)


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 1023, 1536, 5 * 2**20, 3 * 2**40)] == \
        ["0 B", "1023 B", "1.5 KiB", "5.0 MiB", "3.0 TiB"]


def test_plain_lines_every_interval_and_none_for_a_short_batch():
    out, clock = io.StringIO(), Clock()
    d = ProgressDisplay("lines", out, every_s=30, clock=clock)
    d(p(elapsed=0))
    clock.t = 10
    d(p(done=1, read=100, records=100, nbytes=2048, objects=1, elapsed=10))
    assert out.getvalue() == ""  # nothing before the first interval
    clock.t = 31
    d(p(done=2, read=300, records=250, nbytes=4096, objects=2, elapsed=31))
    clock.t = 40
    d(p(done=3, read=400, records=400, nbytes=8192, objects=3, elapsed=40))  # throttled
    clock.t = 62
    d(p(done=4, read=500, records=500, nbytes=8192, objects=4, elapsed=62))
    d(p(done=4, read=500, records=500, nbytes=8192, objects=4, elapsed=62.5, finished=True))  # done: its line
    assert out.getvalue().splitlines() == [
        "batch 0: 300 records, 4.0 KiB, 10 rec/s, 0:31 elapsed, 2/4 partitions",
        "batch 0: 500 records, 8.0 KiB, 6 rec/s, 1:02 elapsed, 4/4 partitions",  # rate of the last half
        "batch 0: 500 records, 8.0 KiB, 6 rec/s, done, 1:03 elapsed, 4/4 partitions"]
    # the next batch starts its own interval
    clock.t = 70
    d(p(batch=1, elapsed=0))
    clock.t = 80
    d(p(batch=1, done=1, elapsed=10))
    d(p(batch=1, done=4, elapsed=11, finished=True))  # a batch that printed no line prints no done line
    assert len(out.getvalue().splitlines()) == 3
    assert progress_line(p(batch=7, done=1, total=2, read=5, records=5, elapsed=3.4)) == \
        "batch 7: 5 records, 0:04 elapsed, 1/2 partitions"


def test_auto_is_lines_off_a_terminal_and_none_prints_nothing():
    assert ProgressDisplay("auto", io.StringIO()).mode == "lines"
    out, clock = io.StringIO(), Clock()
    d = ProgressDisplay("none", out, every_s=0, clock=clock)
    clock.t = 100
    d(p(elapsed=100))
    assert out.getvalue() == ""


def test_bar_shows_counts_and_is_cleared():
    out = io.StringIO()
    d = ProgressDisplay("bar", out, width=200)
    d(p(done=1, read=10, records=10, nbytes=100, objects=1))
    d(p(done=2, read=20, records=20, nbytes=200, objects=2, elapsed=1))
    text = out.getvalue()
    assert "batch 0" in text and "20 records" in text and "2/4 partitions" in text and "200 B" in text
    d(p(done=4, finished=True))
    assert out.getvalue().endswith("\r\x1b[K")  # cleared: the batch's line follows


# ----------------------------------------------------------------------------- executor counts


def rows():
    obj = object_row("t", 0, 0, 9, first_offset=0, last_offset=9, record_count=10, encoded_partition="partition=0",
                     object_key="k", object_uri="s3://b/k", size_bytes=123, etag="e", format="json",
                     compression="none", side_files=(), version_id=None, min_timestamp_ms=1, max_timestamp_ms=2)
    adv = advance_row("t", 1, 0, 4)
    return [encode_result(ArchivedRow(obj)), encode_result(ArchivedRow(adv)),
            encode_result(PartitionStatus("t", 0, 12, 0, 11))]


def test_counts_of_task_rows():
    assert counts_of(rows()) == Counts(partitions=1, records_read=12, records=10, bytes=123, objects=1)


def test_counted_passes_batches_through_and_adds():
    class Acc:
        value = Counts()

        def add(self, c):
            self.value = self.value + c

    acc = Acc()
    b = pa.RecordBatch.from_pydict({"row": rows()})
    assert list(counted(iter([b, b]), acc)) == [b, b]
    assert acc.value == Counts(2, 24, 20, 246, 2)


def test_track_without_a_listener_makes_no_counter():
    def counter():
        raise AssertionError("no listener: no counter")

    with track(None, 0, 3, counter, "127.0.0.1") as tracking:
        it = iter([1])
        assert tracking.count(it) is it and tracking.live_to is None


def test_live_counts_reach_the_receiver_over_udp():
    recv = LiveReceiver("127.0.0.1")
    try:
        clock = Clock()
        batches = [pa.RecordBatch.from_pydict({"value": pa.array([b"abcd"] * n, pa.binary()),
                                               "partition": pa.array([2] * n, pa.int32())}) for n in (3, 4, 5)]
        out = []
        for b in live_counts(iter(batches), recv.address, clock=clock):
            out.append(b)
            clock.t += 1  # every batch is past LIVE_EVERY_S
        assert out == batches
        # strays: another batch's token, garbage
        import socket

        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b'{"t": "other", "k": "-9", "r": 1000, "b": 1}', recv.address[:2])
        s.sendto(b"junk", recv.address[:2])
        s.close()
        import time

        deadline = time.monotonic() + 5
        while recv.records_read() < 12 and time.monotonic() < deadline:
            recv.sock.settimeout(0.2)
            recv.drain()
        assert recv.read == {"-2": 12}
        assert list(live_counts(iter(batches), None)) == batches
    finally:
        recv.close()


# ----------------------------------------------------------------------------- metrics


def result(**kw):
    r = BatchResult(batch_id=4, run_id="run-1", committed_rows=3, objects=2, records=90, bytes=5000,
                    partitions=[PartitionPlan("t", 0, 0, 50), PartitionPlan("t", 1, 0, 50)],
                    seconds={"plan": 0.1, "session": 2.0, "archive": 1.5, "commit": 0.2}, s3_retries=1)
    r.records_read = 100
    for k, v in kw.items():
        setattr(r, k, v)
    return r


BASE = {"name": "j", "topics": "t", "format.class": "json", "flush.size": "3", "s3.bucket.name": "bkt",
        "kafka.bootstrap.servers": "localhost:9"}


def test_metrics_location():
    assert metrics_location(SinkConfig.from_dict({**BASE, "manifest.location": "s3a://b/_lakesink/manifest/"})) \
        == "s3a://b/_lakesink/manifest_metrics"
    assert metrics_location(SinkConfig.from_dict({**BASE, "manifest.location": "db.manifest"})) == "db.manifest_metrics"
    assert metrics_location(SinkConfig.from_dict({**BASE, "manifest.location": "/m", "metrics.location": "/x"})) == "/x"
    assert metrics_location(SinkConfig.from_dict({**BASE, "manifest.location": "/m", "metrics.location": "none"})) \
        is None


def test_metrics_row():
    now = dt.datetime(2026, 11, 24, tzinfo=dt.timezone.utc)
    row = metrics_row("j", result(), now)
    assert (row.job, row.batch_id, row.run_id, row.committed_at, row.partitions, row.records_read, row.records,
            row.objects, row.bytes, row.manifest_rows, row.s3_retries) == \
        ("j", 4, "run-1", now, 2, 100, 90, 2, 5000, 3, 1)
    assert (row.seconds_plan, row.seconds_session, row.seconds_archive, row.seconds_commit) == (0.1, 2.0, 1.5, 0.2)
    assert row.seconds_total == pytest.approx(3.8) and row.records_per_second == pytest.approx(66.667)
    empty = metrics_row("j", result(seconds={"plan": 0.1, "commit": 0.2}))
    assert empty.seconds_archive is None and empty.records_per_second is None and empty.seconds_session is None
    assert [f.name for f in arrow_schema()] == [c.split(" ")[0] for c in metrics_ddl().split(", ")]


def test_metrics_table_appends_and_reads(tmp_path):
    cfg = SinkConfig.from_dict({**BASE, "manifest.location": str(tmp_path / "manifest")})
    table = MetricsTable(metrics_location(cfg))
    assert table.arrow().num_rows == 0 and table.arrow().schema == arrow_schema()
    assert write_batch_metrics(cfg, result()) is None
    assert write_batch_metrics(cfg, result(batch_id=5, records=7)) is None
    got = sorted(table.arrow().to_pylist(), key=lambda r: r["batch_id"])
    assert [(r["job"], r["batch_id"], r["records"], r["records_read"]) for r in got] == [("j", 4, 90, 100),
                                                                                       ("j", 5, 7, 100)]
    assert (tmp_path / "manifest_metrics" / "_delta_log").is_dir()


def test_a_failed_metrics_write_is_a_warning(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    cfg = SinkConfig.from_dict({**BASE, "manifest.location": str(tmp_path / "m"),
                                "metrics.location": str(tmp_path / "file" / "metrics")})
    msg = write_batch_metrics(cfg, result())
    assert msg.startswith(f"batch 4: metrics not written to {tmp_path / 'file' / 'metrics'}: ")
    assert write_batch_metrics(SinkConfig.from_dict({**cfg.raw, "metrics.location": "off"}), result()) is None


def test_track_without_a_spark_context_runs_the_batch_without_a_display():
    class Connect:  # Spark Connect sessions have no SparkContext
        @property
        def sparkContext(self):
            raise RuntimeError("not supported in Spark Connect")

    from lakesink.runners.spark import SparkRunner

    seen = []
    with SparkRunner(Connect()).track(seen.append, 0, 3) as tracking:
        it = iter([1])
        assert tracking.count(it) is it and tracking.live_to is None
    assert seen == []
