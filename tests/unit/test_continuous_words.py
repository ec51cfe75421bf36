"""The words of a `lakesink sink` run (issue 26 item 6b): a batch id is taken only by a commit, so a batch line
``batch N: ...`` is printed only for a batch that committed; a poll that committed nothing says so under its poll
number; the line a stopped run ends with says what this run actually committed."""
from __future__ import annotations

from lakesink.cli.sink import stop_words
from lakesink.driver.sink import BatchResult, PartitionPlan

TIMES = {"plan": 0.5, "commit": 0.0}


def committed(batch_id: int, records: int, poll: int = 1) -> BatchResult:
    return BatchResult(batch_id, "run", committed_rows=2, objects=2, records=records, bytes=100, poll=poll,
                       partitions=[PartitionPlan("t", 0, 0, records)], seconds=dict(TIMES))


def empty(batch_id: int, poll: int, read: int = 0) -> BatchResult:
    """A poll that committed nothing: nothing new (no partition planned), or ``read`` records into open files."""
    plans = [PartitionPlan("t", 0, 10, 10 + read)] if read else []
    return BatchResult(batch_id, "run", poll=poll, partitions=plans, records_read=read, seconds=dict(TIMES))


def test_a_committed_batch_keeps_its_batch_line():
    b = committed(3, 25, poll=4)
    assert b.committed
    assert b.summary() == "batch 3: 2 objects, 25 records, 100 bytes, 2 manifest rows (plan 0.50s, commit 0.00s)"


def test_a_poll_with_nothing_new_names_no_batch():
    b = empty(3, poll=7)
    assert not b.committed
    assert b.summary() == "poll 7: nothing new to archive, nothing committed (plan 0.50s, commit 0.00s)"
    # polls that commit nothing do not repeat the next batch's id: only the poll number moves on
    lines = [empty(3, poll=p).summary() for p in (7, 8, 9)]
    assert len(set(lines)) == 3 and not any("batch" in line for line in lines), lines


def test_a_poll_that_read_records_into_open_files_says_why_nothing_committed():
    line = empty(3, poll=2, read=4).summary()
    assert line.startswith("poll 2: 4 records read, nothing committed: their files are not closed yet "), line
    assert "flush.size" in line and "the next poll reads them again" in line and "batch" not in line, line


def test_stop_after_a_batch_that_committed_says_its_records():
    assert stop_words("SIGTERM", [committed(0, 20), committed(1, 10, poll=2)]) == \
        "SIGTERM received: stopped after batch 1 committed (10 records)"


def test_stop_after_polls_that_committed_nothing_names_the_last_committed_batch():
    batches = [committed(2, 20), empty(3, poll=2), empty(3, poll=3)]
    words = stop_words("SIGTERM", batches)
    assert words == ("SIGTERM received: stopped; the last committed batch is 2 (20 records); "
                     "nothing committed after it"), words
    assert "batch 3" not in words


def test_stop_when_this_run_committed_nothing():
    assert stop_words("SIGINT", [empty(5, poll=1), empty(5, poll=2)]) == \
        "SIGINT received: stopped; nothing committed in this run"
    assert stop_words("SIGTERM", []) == "SIGTERM received: stopped before the first batch; nothing committed in this run"
