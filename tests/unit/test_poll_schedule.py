"""When a continuous sink polls next (lakesink.driver.poll_schedule), and the facts it is timed by: the rotator's
due time for open files (Rotator.due_ms) and the status row that carries it to the driver."""
from lakesink.driver.poll_schedule import DUE, INTERVAL, NextPoll, next_poll
from lakesink.executor.results import PartitionStatus, decode_result, encode_result
from lakesink.objects.partitioners import DefaultPartitioner, RecordExtractor, TimeBasedPartitioner
from lakesink.objects.records import SinkRecord
from lakesink.objects.rotation import Commit, RotationPolicy, Rotator

H = 3_600_000
T = 1_800_000_000_000  # a wall-clock instant (epoch ms)


def poll(**kw) -> NextPoll:
    args = dict(interval_s=30.0, started=100.0, now=102.0, due_ms=None, snapshot_ms=T, wall_now_ms=T + 2000)
    args.update(kw)
    return next_poll(**args)


def test_no_open_file_waits_for_the_interval() -> None:
    assert poll() == NextPoll(28.0, INTERVAL)


def test_a_file_due_before_the_interval_polls_then_plus_slack() -> None:
    # the batch began at T, ended 2 s later; its open file closes on a record stamped T + 5 s
    nxt = poll(due_ms=T + 5000)
    assert nxt == NextPoll(4.0, DUE)  # 3 s to the due time + 1 s slack
    assert nxt.words() == "next poll in 4.0 s: a file is due"


def test_a_file_due_after_the_interval_keeps_the_interval() -> None:
    assert poll(due_ms=T + 40_000) == NextPoll(28.0, INTERVAL)  # never later than the interval's schedule


def test_a_file_due_now_waits_the_minimum_gap() -> None:
    # due while the batch ran (after its snapshot): poll again, but not sooner than min_gap_s after it ended
    assert poll(due_ms=T + 500) == NextPoll(1.0, DUE)
    assert poll(due_ms=T + 500, min_gap_s=2.5) == NextPoll(2.5, DUE)


def test_a_file_overdue_at_the_snapshot_keeps_the_interval() -> None:
    # its closing record was due before the snapshot and was not there: its arrival does not follow the clock
    # (old record timestamps, an idle partition), so polling sooner would only re-read the open tail
    assert poll(due_ms=T - 60_000) == NextPoll(28.0, INTERVAL)
    assert poll(due_ms=T - 1000) == NextPoll(28.0, INTERVAL)  # due + slack <= snapshot


def test_a_long_batch_polls_at_once_whatever_is_due() -> None:
    # the batch took longer than the interval: today's schedule is "now", and the due time cannot delay it
    assert poll(now=140.0, due_ms=T + 5000) == NextPoll(0.0, INTERVAL)
    assert poll(now=140.0) == NextPoll(0.0, INTERVAL)


def test_slack_is_added_to_the_due_time() -> None:
    assert poll(due_ms=T + 5000, slack_s=0.5) == NextPoll(3.5, DUE)


def rec(offset: int, ts: int) -> SinkRecord:
    return SinkRecord("t", 0, offset, ts, None, {"n": offset})


def time_rotator(interval_ms: int = 10_000) -> Rotator:
    partitioner = TimeBasedPartitioner("YYYY-MM-dd-HH", H, "UTC", "en", RecordExtractor())
    return Rotator(RotationPolicy(flush_size=1000, rotate_interval_ms=interval_ms), partitioner, 0, clock=lambda: T)


def test_rotator_due_is_the_open_files_base_plus_the_interval() -> None:
    rot = time_rotator()
    assert rot.due_ms is None  # nothing open
    for ev in (rot.process(rec(0, T + 100)), rot.process(rec(1, T + 4000))):
        assert not any(isinstance(e, Commit) for e in ev)
    rot.finish()
    assert rot.due_ms == T + 100 + 10_000
    # the record that reaches it closes the file; the next one opens a file due an interval after its own time
    assert any(isinstance(e, Commit) for e in rot.process(rec(2, T + 10_100)))
    assert rot.due_ms == T + 10_100 + 10_000


def test_rotator_without_periodic_rotation_has_no_due_time() -> None:
    rot = Rotator(RotationPolicy(flush_size=1000), DefaultPartitioner(), 0, clock=lambda: T)
    rot.process(rec(0, T))
    rot.finish()
    assert rot.due_ms is None


def test_status_row_carries_the_due_time() -> None:
    st = PartitionStatus("t", 0, 2, 0, 1, due_ms=T + 10_100)
    assert decode_result(encode_result(st)) == st
    assert decode_result(encode_result(PartitionStatus("t", 0, 2, 0, 1))).due_ms is None
