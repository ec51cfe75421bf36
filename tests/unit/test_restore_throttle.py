"""lakesink.executor.throttle: ``restore --max-rate``'s schedule (a scripted clock)."""
import pytest

from lakesink.executor.throttle import Throttle


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_each_record_waits_for_its_slot_on_the_schedule():
    clock = Clock()
    t = Throttle(4, clock)  # a record every 0.25 s from the first call on
    assert t.delay(0) == 0.0
    assert t.delay(1) == pytest.approx(0.25)
    clock.now += 0.25
    assert t.delay(1) == 0.0 and t.delay(2) == pytest.approx(0.25)


def test_a_pause_is_caught_up_without_a_burst_past_the_schedule():
    clock = Clock()
    t = Throttle(10, clock)
    t.delay(0)
    clock.now += 2.0  # a slow read: 20 records' worth of time went by with 5 sent
    assert t.delay(5) == 0.0 and t.delay(19) == 0.0  # behind the schedule: no wait
    assert t.delay(25) == pytest.approx(0.5)  # but never ahead of it


@pytest.mark.parametrize("rate", [0, -1, float("nan")])
def test_a_rate_that_is_not_positive_is_refused(rate):
    with pytest.raises(ValueError, match="a rate limit is > 0 records per second"):
        Throttle(rate)


@pytest.mark.parametrize("rate", [0, -5, "fast"])
def test_restore_refuses_a_max_rate_that_is_not_a_positive_number_before_reading_anything(rate):
    from lakesink.driver.restore import restore
    from lakesink.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=r"--max-rate \(max_rate\) is a number of records a second > 0"):
        restore(None, {"no": "config needed: refused first"}, to_topic="t", max_rate=rate)


def test_a_paced_transaction_holds_at_most_ten_seconds_of_records():
    """50,000 records at --max-rate 25 would keep a transaction open 2,000 s, past the broker's timeout."""
    from lakesink.executor.restore import DEFAULT_RECORDS_PER_TXN, THROTTLED_TXN_S, paced_records_per_txn

    assert THROTTLED_TXN_S == 10
    assert paced_records_per_txn(DEFAULT_RECORDS_PER_TXN, 25) == 250
    assert paced_records_per_txn(DEFAULT_RECORDS_PER_TXN, 0.05) == 1
    assert paced_records_per_txn(100, 1_000_000) == 100  # the given bound when it is the smaller
