"""The direct reader hands on what it read at least every FLUSH_EVERY_S: a slow (throttled) read's records reach
the archiver and the progress display's live counts as they come, not in one batch at the end of the range."""
from confluent_kafka import KafkaError
from support.clock import FakeClock
from support.consumers import Msg

from lakesink.executor.kafka_reader import FLUSH_EVERY_S, read_range


class Slow:
    """One record per ``consume``, each ``pause`` seconds on the scripted clock, then the end of the partition."""

    def __init__(self, n, pause, clock):
        self.script = [[Msg(i)] for i in range(n)] + [[Msg(n, KafkaError(KafkaError._PARTITION_EOF))]]
        self.pause, self.clock = pause, clock

    def assign(self, parts):
        pass

    def consume(self, num_messages, timeout):
        self.clock.advance(self.pause)
        return self.script.pop(0) if self.script else []

    def close(self):
        pass


def test_a_slow_read_is_handed_on_every_flush_interval():
    clock = FakeClock()
    batches = list(read_range({}, "t", 0, 0, 20, consumer_factory=lambda conf: Slow(20, 0.1, clock), clock=clock))
    sizes = [b.num_rows for b in batches]
    assert sum(sizes) == 20 and [o for b in batches for o in b.column("offset").to_pylist()] == list(range(20))
    # 0.1 s per record: a batch about every FLUSH_EVERY_S (5 records), not one of 20 at the end
    assert len(batches) >= 20 * 0.1 / FLUSH_EVERY_S - 1 and max(sizes) <= FLUSH_EVERY_S / 0.1 + 1, sizes


def test_a_fast_read_still_makes_full_batches():
    clock = FakeClock()
    batches = list(read_range({}, "t", 0, 0, 20, rows_per_batch=10,
                              consumer_factory=lambda conf: Slow(20, 0.001, clock), clock=clock))
    assert [b.num_rows for b in batches] == [10, 10]
