"""Restore's column-at-a-time reading (issue #30 item 2): :func:`read_produce_columns` gives what
:func:`read_records` gives, record for record (and the bytes restore counts per record), whatever the cut; a
dry run counts the records a cut takes inside an object exactly from its metadata side file."""
from __future__ import annotations

import pytest

from lakesink import wiring
from lakesink.executor.readback import (ArchivedObject, Cut, count_in_cut, read_produce_columns, read_records)
from lakesink.executor.restore import RestoreSummary, dry_run
from lakesink.store import open_store

from support.archive_helpers import BASE_TS, archive, batch, config, headers_of, value_bytes


def sample(n: int = 23):
    offsets = [10 + i + (3 if i >= 5 else 0) for i in range(n)]  # a gap of 3 after the 5th record
    timestamps = [None if i == 4 else BASE_TS + 1000 * i - (50_000 if i == 2 else 0) for i in range(n)]
    types = [-1 if i == 4 else 0 for i in range(n)]
    values = [value_bytes("json", i) for i in range(n)]
    keys = [b"k\x00%d" % i for i in range(n)]
    headers = [headers_of(i) for i in range(n)]
    return offsets, timestamps, types, values, keys, headers


@pytest.fixture(scope="module")
def archived(tmp_path_factory):
    cfg = config(tmp_path_factory.mktemp("cols"), "json", store_kafka_keys="true", store_kafka_headers="true")
    offsets, tss, types, values, keys, headers = sample()
    rows = archive(cfg, [batch(values, offsets, tss, types, keys, headers)], 10, offsets[-1] + 1)
    assert len(rows) > 1
    objs = [ArchivedObject.from_row(r) for r in sorted(rows, key=lambda r: r.first_offset)]
    return cfg, objs, open_store(wiring.store_settings(cfg))


CUTS = [Cut(), Cut(from_offset=12, to_offset=25), Cut(from_ts=BASE_TS + 3000, to_ts=BASE_TS + 15_000),
        Cut(from_offset=11, to_ts=BASE_TS + 8000), Cut(from_ts=BASE_TS + 10**9)]


@pytest.fixture(scope="module")
def archived_one_header(tmp_path_factory):
    """Records of one header each (the usual shape, which the columns build without slicing), one of them
    null-valued; and the same with a record of two headers among them (the general path)."""
    out = {}
    for shape in ("one each", "one of two"):
        cfg = config(tmp_path_factory.mktemp("one"), "json", store_kafka_keys="true", store_kafka_headers="true")
        offsets, tss, types, values, keys, _ = sample()
        headers = [[("h", None if i == 3 else b"%d" % i)] for i in range(len(offsets))]
        if shape != "one each":
            headers[6] = [("h", b"6"), ("h2", b"")]
        rows = archive(cfg, [batch(values, offsets, tss, types, keys, headers)], 10, offsets[-1] + 1)
        out[shape] = (cfg, [ArchivedObject.from_row(r) for r in sorted(rows, key=lambda r: r.first_offset)],
                      open_store(wiring.store_settings(cfg)))
    return out


@pytest.mark.parametrize("shape", ["one each", "one of two"])
@pytest.mark.parametrize("cut", CUTS, ids=str)
def test_columns_of_one_header_each_are_the_records(archived_one_header, shape, cut):
    test_columns_are_the_records(archived_one_header[shape], cut)


@pytest.mark.parametrize("cut", CUTS, ids=str)
def test_columns_are_the_records(archived, cut):
    cfg, objs, store = archived
    kw = dict(keys_format=wiring.keys_format(cfg), headers_format=wiring.headers_format(cfg), cut=cut,
              key_decoder=cfg.key_decoder)
    fmt = wiring.value_format(cfg)
    for obj in objs:
        recs = read_records(store, fmt, obj, **kw)
        cols = read_produce_columns(store, fmt, obj, **kw)
        if not recs:
            assert cols is None
            continue
        assert cols.offsets.tolist() == [r.offset for r in recs]
        assert cols.timestamps == [r.timestamp or 0 for r in recs]
        assert cols.timestamps_arrow.to_pylist() == [r.timestamp for r in recs]
        assert cols.values == [r.value for r in recs] and cols.keys == [r.key for r in recs]
        assert cols.headers == [r.headers or None for r in recs]
        # the bytes restore counts toward a transaction's size, as the record loop counts them
        sizes = [len(r.value or b"") + len(r.key or b"") + sum(len(k) + len(v or b"") for k, v in r.headers)
                 for r in recs]
        assert cols.sizes.tolist() == [sum(sizes[:i]) for i in range(len(sizes) + 1)]


def test_dry_run_counts_a_time_window_exactly_from_the_metadata_side_file(archived):
    _cfg, objs, store = archived
    cut = Cut(from_ts=BASE_TS + 3000, to_ts=BASE_TS + 15_000)
    offsets, tss, *_ = sample()
    inside = sum(1 for t in tss if t is not None and BASE_TS + 3000 <= t <= BASE_TS + 15_000)
    # from the manifest rows alone: the objects the window falls inside counted whole, an upper bound
    rough = dry_run(objs, cut)
    assert not rough.exact and rough.records > inside
    exact = dry_run(objs, cut, lambda o: count_in_cut(store, o, cut))
    assert exact == RestoreSummary(rough.objects, inside, rough.bytes, True)
    # an offset cut inside an object with an offset gap, too
    cut = Cut(from_offset=12, to_offset=20)
    assert dry_run(objs, cut, lambda o: count_in_cut(store, o, cut)).records == sum(12 <= o <= 20 for o in offsets)


def test_dry_run_without_a_metadata_side_file_stays_an_upper_bound(tmp_path):
    cfg = config(tmp_path, "json", store_kafka_metadata="false")
    rows = archive(cfg, [batch([b"1", b"2", b"3"], [0, 1, 2], [BASE_TS, BASE_TS + 1, BASE_TS + 2], [0, 0, 0])], 0, 3)
    objs = [ArchivedObject.from_row(r) for r in rows]
    store = open_store(wiring.store_settings(cfg))
    cut = Cut(from_ts=BASE_TS + 1)
    assert count_in_cut(store, objs[0], cut) is None
    assert dry_run(objs, cut, lambda o: count_in_cut(store, o, cut)) == RestoreSummary(1, 3, objs[0].size_bytes, False)


def test_a_cut_inside_avro_files_decodes_only_the_blocks_holding_its_records(tmp_path):
    """Values, keys and headers in Avro containers of several blocks each (64 kB blocks): a time cut inside the
    object decodes only the blocks that hold its records (counted), and gives the same records as a full read."""
    import io

    import fastavro

    from lakesink.executor.blockcut import BlockCounts, avro_blocks
    from support.archive_helpers import PARSED

    n = 600
    cfg = config(tmp_path, "avro", store_kafka_keys="true", store_kafka_headers="true", flush_size=str(n),
                 keys_format_class="avro", headers_format_class="avro")

    def datum(i: int) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, PARSED, {"id": i, "s": "x" * 500, "tags": [], "opt": None})
        return out.getvalue()

    offsets = list(range(n))
    tss = [BASE_TS + 1000 * i for i in range(n)]
    rows = archive(cfg, [batch([datum(i) for i in offsets], offsets, tss, [0] * n, [b"k" * 200 + b"%d" % i for i in offsets],
                               [[("h", b"v" * 300)] for _ in offsets])], 0, n)
    (obj,) = [ArchivedObject.from_row(r) for r in rows]
    store = open_store(wiring.store_settings(cfg))
    files = [obj.object_key, obj.side("keys")["key"], obj.side("headers")["key"]]
    per_file = [len(avro_blocks(store.read(k))[1]) for k in files]
    assert min(per_file) >= 2, per_file  # several blocks in every file, or the test tests nothing
    kw = dict(keys_format=wiring.keys_format(cfg), headers_format=wiring.headers_format(cfg),
              key_decoder=cfg.key_decoder)
    fmt = wiring.value_format(cfg)
    everything = read_records(store, fmt, obj, **kw)
    cut = Cut(from_ts=BASE_TS + 1000 * 290, to_ts=BASE_TS + 1000 * 309)  # 20 records in the middle
    counts = BlockCounts()
    got = read_records(store, fmt, obj, cut=cut, blocks=counts, **kw)
    assert got == [r for r in everything if 290 <= r.offset <= 309]
    assert counts.read <= 6 and counts.read + counts.skipped == sum(per_file) and counts.skipped >= sum(per_file) - 6
    cols_counts = BlockCounts()
    cols = read_produce_columns(store, fmt, obj, cut=cut, blocks=cols_counts, **kw)
    assert cols.values == [r.value for r in got] and cols.headers == [r.headers for r in got]
    assert cols_counts == counts
    # no cut inside the object: every block decoded, none counted as skipped
    whole = BlockCounts()
    assert read_records(store, fmt, obj, blocks=whole, **kw) == everything and whole == BlockCounts()


class _FakeProducer:
    """Records what the worker hands over (a unit test of the transaction rules; the real producer is in the
    integration tests)."""

    def __init__(self):
        self.produced = []

    def produce(self, topic, value, key, partition, _callback, on_delivery, timestamp, headers):
        self.produced.append((value, key, partition, timestamp, headers))

    def poll(self, _timeout):
        return 0


class _FakeTxn:
    def __init__(self):
        self.producer, self.errors, self.records, self.bytes, self.open = _FakeProducer(), [], 0, 0, False
        self.aborted = False

    def on_delivery(self, err, msg):
        pass

    def begin(self):
        if not self.open:
            self.open, self.records, self.bytes = True, 0, 0

    def abort(self):
        self.open, self.aborted = False, True


def _columns(offsets, sizes, timestamps=None):
    import numpy as np
    import pyarrow as pa

    from lakesink.executor.readback import ProduceColumns

    n = len(offsets)
    ts = timestamps or [BASE_TS] * n
    values = [b"v" * s for s in sizes]
    run = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=run[1:])
    return ProduceColumns(np.asarray(offsets, np.int64), ts, [None] * n, values, [None] * n, run,
                          pa.array(ts, pa.int64()))


def _run(cols, records_per_txn, bytes_per_txn, txn=None):
    from lakesink.executor.restore import RestoreResult, produce_columns

    txn = txn or _FakeTxn()
    commits, events = [], []

    def commit(upto):
        commits.append((upto, txn.records, txn.bytes))
        txn.open = False

    obj = ArchivedObject("t", 0, "k", "e", None, int(cols.offsets[0]), int(cols.offsets[-1]), len(cols.offsets))
    result = RestoreResult()
    produce_columns(txn, cols, "dest", 0, obj, commit, result, lambda p, i: events.append((p, i.get("offset"))),
                     False, True, records_per_txn, bytes_per_txn, 3_600_000, "restore into dest-0")
    return txn, commits, events, result


def test_transactions_close_where_the_record_loop_closed_them():
    """Every records_per_txn records or bytes_per_txn bytes, whichever first, but never between records sharing an
    offset (a transform's records of one Kafka record); the open rest stays open for the caller's last commit."""
    offsets = [0, 1, 2, 2, 2, 3, 4, 5, 6, 7]
    txn, commits, events, result = _run(_columns(offsets, [10] * 10), 2, 10**6)
    assert [c[0] for c in commits] == [1, 2, 4, 6] and txn.open and txn.records == 1
    assert [c[1] for c in commits] == [2, 3, 2, 2]  # the offset-2 group is closed as one
    assert result.produced == 10 and len(txn.producer.produced) == 10 and result.bytes == 100
    assert [e for e in events if e[0] == "begin"] == [("begin", 0), ("begin", 2), ("begin", 3), ("begin", 5),
                                                      ("begin", 7)]
    assert [e[1] for e in events if e[0] == "produced"] == offsets  # per record without coarse events
    _txn, commits, _e, _r = _run(_columns(list(range(6)), [5, 5, 30, 1, 1, 40]), 100, 40)
    assert [c[:2] for c in commits] == [(2, 3), (5, 3)]  # 40 bytes reached at the 3rd and at the 6th record
    # a transaction left open by the previous object counts on
    txn = _FakeTxn()
    txn.begin()
    txn.records, txn.bytes = 1, 0
    _t, commits, _e, _r = _run(_columns(list(range(4)), [1] * 4), 2, 10**6, txn)
    assert [c[:2] for c in commits] == [(0, 2), (2, 2)]


def test_a_record_too_far_in_the_future_stops_the_restore_before_it_is_produced():
    from lakesink.errors import RestoreTimestampError

    import time

    far = int(time.time() * 1000) + 2 * 3_600_000
    cols = _columns(list(range(5)), [1] * 5, [BASE_TS, BASE_TS, BASE_TS, far, BASE_TS])
    with pytest.raises(RestoreTimestampError, match=r"t-0@3 has timestamp"):
        _run(cols, 2, 10**6)
    txn = _FakeTxn()
    with pytest.raises(RestoreTimestampError):
        _run(cols, 2, 10**6, txn)
    assert len(txn.producer.produced) == 3 and txn.aborted  # records 0-2 handed over, the open one aborted


def test_a_failed_delivery_reaches_the_worker():
    """The delivery callback goes where librdkafka calls it (a None ``callback`` would win over ``on_delivery``,
    and no report would come): a real producer whose messages time out (no broker) reports each failure."""
    from confluent_kafka import Producer

    from lakesink.executor.restore import RestoreResult, produce_columns

    txn = _FakeTxn()
    txn.producer = Producer({"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 50, "log_level": 0,
                             "delivery.report.only.error": True})
    txn.on_delivery = lambda err, msg: txn.errors.append((err, msg.offset()))
    obj = ArchivedObject("t", 0, "k", "e", None, 0, 299, 300)
    produce_columns(txn, _columns(list(range(300)), [1] * 300), "dest", 0, obj, lambda upto: None, RestoreResult(),
                    lambda p, i: None, False, False, 10**6, 10**9, 3_600_000, "restore into dest-0")
    assert txn.producer.flush(10) == 0
    assert len(txn.errors) == 300
