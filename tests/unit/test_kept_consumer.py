"""A local worker's Kafka consumers kept from one read to the next (lakesink.executor.kept_consumer): reused only
for the same settings and topic after a clean read, once the fetch its last read left at the broker has come back,
never carrying a message of its previous assignment into the next read. Scripted consumers stand in for
librdkafka (the real broker's case is in tests/integration/test_kept_consumer_broker.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from confluent_kafka import KafkaError
from support.consumers import Msg

from lakesink.errors import KafkaReadError
from lakesink.executor import kept_consumer
from lakesink.executor.kafka_reader import read_range


class _Scripted:
    """Answers each ``consume`` with the next scripted list (then nothing); records its calls."""

    def __init__(self, script: list[list[Msg]]):
        self.script = list(script)
        self.assigned: list = []
        self.unassigned = 0
        self.closed = False

    def assign(self, parts):
        self.assigned.append([(p.topic, p.partition, p.offset) for p in parts])

    def unassign(self):
        self.unassigned += 1

    def consume(self, num_messages: int, timeout: float):
        return self.script.pop(0) if self.script else []

    def close(self):
        self.closed = True


class _Factory:
    """A consumer factory that hands out the given consumers in turn, each given a script for each read."""

    def __init__(self, *consumers: _Scripted):
        self.consumers, self.made = list(consumers), []

    def __call__(self, conf):
        c = self.consumers.pop(0)
        self.made.append((c, conf))
        return c


class _Tick:
    """A clock that moves ``step`` seconds each time it is read (reads far apart: every kept consumer is ready)."""

    def __init__(self, step: float = 1.0):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


_TICK = _Tick()  # one clock for every read that gives none: it only moves on


def _read(conf, topic, part, start, end, factory, clock=None, **kw):
    return _offsets(read_range(conf, topic, part, start, end, consumer_factory=factory, clock=clock or _TICK, **kw))


@pytest.fixture
def keeping():
    kept_consumer.keep_consumers()
    yield
    kept_consumer.keep_consumers(False)


def _offsets(batches) -> list[tuple[int, int]]:
    return [(p, o) for b in batches for p, o in zip(b.column("partition").to_pylist(), b.column("offset").to_pylist())]


def test_a_clean_read_gives_its_consumer_to_the_next_read_of_the_same_topic(keeping):
    c = _Scripted([[Msg(0), Msg(1)], [Msg(5, partition=1), Msg(6, partition=1)]])
    factory = _Factory(c)
    assert _read({}, "t", 0, 0, 2, factory) == [(0, 0), (0, 1)]
    assert kept_consumer.kept() == 1 and c.unassigned == 1 and not c.closed
    assert _read({}, "t", 1, 5, 7, factory) == [(1, 5), (1, 6)]
    assert len(factory.made) == 1 and c.assigned == [[("t", 0, 0)], [("t", 1, 5)]]
    kept_consumer.keep_consumers(False)  # stopping closes what is kept
    assert c.closed and kept_consumer.kept() == 0


def test_messages_of_the_previous_assignment_are_never_taken(keeping):
    # the consumer read t-0 [0, 3); its fetch of t-0 went on past 3, and those messages (and t-0's end event, at
    # an offset past the next range's end) may still come after it is reassigned to t-1 [0, 3)
    c = _Scripted([[Msg(0), Msg(1), Msg(2)],
                   [Msg(3), Msg(4)],  # t-0's, in a batch of their own: the batch path
                   [Msg(5), Msg(0, partition=1), Msg(1, partition=1)],  # mixed: the per-message loop
                   [Msg(9, KafkaError(KafkaError._PARTITION_EOF))],  # t-0's end event: must not end t-1's read
                   [Msg(2, partition=1)]])
    factory = _Factory(c)
    assert _read({}, "t", 0, 0, 3, factory) == [(0, 0), (0, 1), (0, 2)]
    assert _read({}, "t", 1, 0, 3, factory) == [(1, 0), (1, 1), (1, 2)]
    assert len(factory.made) == 1


def test_another_topic_gets_its_own_consumer_and_other_settings_close_the_kept_ones(keeping):
    a, b, c = _Scripted([[Msg(0)], [Msg(1)]]), _Scripted([[Msg(0)]]), _Scripted([[Msg(0)]])
    factory = _Factory(a, b, c)
    assert _read({"group.id": "g"}, "t", 0, 0, 1, factory) == [(0, 0)]
    assert _read({"group.id": "g"}, "u", 0, 0, 1, factory) == [(0, 0)]  # another topic: a consumer of its own
    assert kept_consumer.kept() == 2 and not a.closed
    assert _read({"group.id": "g"}, "t", 0, 1, 2, factory) == [(0, 1)]  # t's consumer again
    assert len(factory.made) == 2
    assert _read({"group.id": "h"}, "u", 0, 0, 1, factory) == [(0, 0)]  # other settings (a new run): a new one
    assert a.closed and b.closed and len(factory.made) == 3 and kept_consumer.kept() == 1


def test_a_consumer_is_lent_again_only_once_its_last_fetch_has_come_back(keeping):
    # the broker holds the fetch a read left at the end of the log up to fetch.wait.max.ms (here 200 ms), and the
    # consumer's next fetch waits for it: until then a read gets another consumer, and a thread keeps a few at most
    consumers = [_Scripted([[Msg(0)], [Msg(1)]]) for _ in range(kept_consumer.MAX_KEPT + 1)]
    factory = _Factory(*consumers)
    clock = _Tick(step=0.001)  # reads 1 ms apart on this clock
    conf = {"fetch.wait.max.ms": 200}
    for _ in range(kept_consumer.MAX_KEPT + 1):
        assert _read(conf, "t", 0, 0, 1, factory, clock) == [(0, 0)]
    assert len(factory.made) == kept_consumer.MAX_KEPT + 1  # none was ready: a new consumer each
    assert consumers[0].closed and kept_consumer.kept() == kept_consumer.MAX_KEPT  # the oldest closed
    clock.now += 0.25  # past 200 ms and the margin for every kept one
    assert _read(conf, "t", 0, 1, 2, factory, clock) == [(0, 1)]
    assert len(factory.made) == kept_consumer.MAX_KEPT + 1 and consumers[1].assigned[-1] == [("t", 0, 1)]


def test_a_failed_read_closes_its_consumer_and_the_next_read_gets_a_new_one(keeping):
    bad = _Scripted([[Msg(0), Msg(1)], [Msg(7, KafkaError(KafkaError.OFFSET_OUT_OF_RANGE))]])
    good = _Scripted([[Msg(0), Msg(1), Msg(2)]])
    factory = _Factory(bad, good)
    with pytest.raises(KafkaReadError, match=r"^t-0: reading \[0, 3\) failed at offset 2"):
        _read({}, "t", 0, 0, 3, factory)
    assert bad.closed and kept_consumer.kept() == 0
    assert _read({}, "t", 0, 0, 3, factory) == [(0, 0), (0, 1), (0, 2)]
    assert len(factory.made) == 2


def test_an_abandoned_read_closes_its_consumer(keeping):
    c = _Scripted([[Msg(i) for i in range(10)]])
    reader = read_range({}, "t", 0, 0, 100, rows_per_batch=5, consumer_factory=_Factory(c))
    next(reader)
    reader.close()  # the archiver stopped taking batches (its own failure)
    assert c.closed and kept_consumer.kept() == 0


def test_a_consumer_that_saw_a_fatal_error_while_kept_is_not_lent_again(keeping):
    first, second = _Scripted([[Msg(0)]]), _Scripted([[Msg(1)]])
    factory = _Factory(first, second)
    _read({}, "t", 0, 0, 1, factory)
    error_cb = factory.made[0][1]["error_cb"]
    error_cb(KafkaError(KafkaError._FENCED, fatal=True))  # between reads: nobody holds the consumer
    _read({}, "t", 0, 1, 2, factory)
    assert first.closed and len(factory.made) == 2


def test_without_keeping_every_read_closes_its_consumer():
    a, b = _Scripted([[Msg(0)]]), _Scripted([[Msg(0)]])
    factory = _Factory(a, b)
    for _ in range(2):
        _read({}, "t", 0, 0, 1, factory)
    assert a.closed and b.closed and len(factory.made) == 2 and kept_consumer.kept() == 0


def test_a_forked_child_does_not_inherit_the_kept_consumer(keeping):
    c = _Scripted([[Msg(0)]])
    _read({}, "t", 0, 0, 1, _Factory(c))
    assert kept_consumer.kept() == 1
    pid = os.fork()
    if pid == 0:  # the child: its parent's consumer (librdkafka's threads are the parent's) is not its to use
        os._exit(0 if kept_consumer.kept() == 0 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert kept_consumer.kept() == 1  # the parent keeps it


def test_a_kept_read_gives_freed_memory_back_at_most_once_a_second(keeping, monkeypatch):
    # a kept consumer's threads keep the fetch buffers a read freed (tens of MB after a large read), where a closed
    # consumer's went back with its threads: after kept reads the process trims, but not after every one
    calls = []
    monkeypatch.setattr(kept_consumer, "release_freed_memory", lambda: calls.append(1))
    clock = _Tick(step=0.1)
    factory = _Factory(_Scripted([[Msg(0)]] * 20))  # one consumer, kept and lent again for each read
    for _ in range(20):
        _read({"fetch.wait.max.ms": 0}, "t", 0, 0, 1, factory, clock)
    assert len(factory.made) == 1
    assert 2 <= len(calls) <= 1 + int(clock.now / kept_consumer.TRIM_INTERVAL_S) < 20


def test_without_keeping_nothing_is_trimmed(monkeypatch):
    calls = []
    monkeypatch.setattr(kept_consumer, "release_freed_memory", lambda: calls.append(1))
    _read({}, "t", 0, 0, 1, _Factory(_Scripted([[Msg(0)]])))
    assert calls == []


def test_giving_memory_back_starts_no_process():
    # ctypes.util.find_library runs ldconfig in a child: a fork of the local worker, once a second, that a look at
    # the run's processes took for a third worker. The trim must use what the process has loaded.
    code = ("import os, subprocess\n"
            "def refuse(*a, **k):\n"
            "    raise AssertionError('a child process')\n"
            "subprocess.Popen = os.fork = os.posix_spawn = refuse\n"
            "from lakesink.executor.kept_consumer import release_freed_memory\n"
            "release_freed_memory(); release_freed_memory()\n"
            "print('trimmed')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "trimmed", done.stderr[-2000:]
