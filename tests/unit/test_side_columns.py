"""Keys and headers side files a column at a time (issue #30 item 1: lakesink.objects.formats.side_columns, the
Avro writer's datum path, the columnar plan's side payloads): byte for byte the files of the writers before them.

The oracle for Avro is what the keys/headers writer was until then: fastavro's ``Writer`` encoding one datum per
record (``record_key`` / ``header_pairs`` of each record) with the file's codec, sync interval and sync marker. For
JSON the record path's writer is unchanged (``JsonWriter.write`` per record) and is the oracle. Every test runs with
lakesink-native's side-file kernels and with their Python twins (the ``kernels`` fixture)."""
from __future__ import annotations

import base64
import gzip
import io
import json

import fastavro
import pyarrow as pa
import pytest
from fastavro.write import Writer

from lakesink.config import SinkConfig
from lakesink.errors import EncodeError
from lakesink.executor.archiver import ArchivedRow, BatchContext
from lakesink.executor.columnar import ColumnarPlan
from lakesink.executor.task import archive_partitions, decode_result
from lakesink.objects.formats.avro import HEADERS_SCHEMA, AvroFormat, sync_marker_for
from lakesink.objects.formats.base import RecordView, header_pairs
from lakesink.objects.formats.bytearray import ByteArrayFormat
from lakesink.objects.formats import native
from lakesink.objects.formats.json import JsonFormat
from lakesink.objects.formats.side_columns import b64_array
from lakesink.objects.records import SinkRecord
from lakesink.wiring import task_parts

@pytest.fixture(autouse=True, params=["native", "python"])
def kernels(request, monkeypatch):
    """The side columns built by lakesink-native's kernels (scripts/bootstrap builds it) and by their Python twins."""
    if request.param == "python":
        monkeypatch.setattr(native, "native_module", lambda: None)
    else:
        assert native.native_module() is not None, "lakesink-native is not installed: scripts/bootstrap builds it"
    return request.param


HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

BYTES_KEYS = [b"k", b"", b"\x00\xff" * 40, bytes(range(256)) * 40, b"customer-00042", b"\n\"\\", b"ab", b"abc"]
STRING_KEYS = ["k", "", "é" * 70, "日本語" * 1000, "customer-00042", "quote\"back\\slash", "tab\tnl\n\x01", "\u2028"]
HEADERS = [
    [("h", b"v")],                                   # one
    [("trace", b"0af7651916cd43dd"), ("n", None)],   # a null value
    [("dup", b"a"), ("dup", b"b"), ("dup", None)],   # duplicate keys, kept in order
    [("", b"")],                                     # empty key and value
    [("é" * 80, "日本".encode() * 3000)],             # multi-byte lengths and text
    [("q\"", b"back\\slash"), ("ctl", b"\x01\n")],   # what JSON escapes
]
# without a character JSON escapes: the JSON lines go to the writer as one Arrow array (multi-byte text: the writer
# counts characters, not bytes, where it pushes)
PLAIN_STRING_KEYS = ["k", "", "é" * 70, "日本語" * 1000, "customer-00042", "\u2028", "😀" * 9]
PLAIN_HEADERS = [[("h", b"v")], [("trace", b"0af7651916cd43dd"), ("n", None)], [("é" * 80, "日本".encode() * 300)],
                 [("", b"")], [("dup", b"a"), ("dup", None), ("dup", "😀".encode())]]
# no null header value (the Avro datums then take every union branch as a string's)
STRING_HEADERS = [[("h", b"v")], [("é" * 80, "日本".encode() * 300)], [("", b""), ("dup", "😀".encode())]]


def _records(keys=None, headers=None, n=None):
    n = n or len(keys if keys is not None else headers)
    return [SinkRecord("t", 0, i, 1000 + i, None if keys is None else keys[i % len(keys)], b"v",
                       () if headers is None else tuple(headers[i % len(headers)]))
            for i in range(n)]


def avro_oracle(fmt: AvroFormat, view: RecordView, records, key: str) -> bytes:
    """The Avro keys/headers file as the writer wrote it before (fastavro's Writer, one datum per record)."""
    out = io.BytesIO()
    if view is RecordView.KEYS:
        schema = "bytes" if isinstance(records[0].key, bytes) else "string"
        datums = [r.key for r in records]
    else:
        schema = HEADERS_SCHEMA
        datums = [[{"key": k, "value": v} for k, v in header_pairs(r)] for r in records]
    w = Writer(out, json.loads(json.dumps(schema)), codec=fmt.codec, sync_interval=fmt.sync_interval,
               compression_level=fmt.codec_level, sync_marker=sync_marker_for(key), metadata=None)
    for d in datums:
        w.write(d)
    w.flush()
    return out.getvalue()


def _key_column(records):
    return pa.array([r.key.encode() if isinstance(r.key, str) else r.key for r in records], pa.binary())


def _header_column(records):
    return pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], HEADERS_TYPE)


def _write(fmt, view, key, steps):
    """A file written by ``steps``: ("records", records) through write_many, ("column", payloads) through
    write_payloads."""
    out = io.BytesIO()
    w = fmt.open_object_writer(out, view, key)
    for how, arg in steps:
        if how == "records":
            w.write_many(arg)
        else:
            w.write_payloads(*arg)
    w.close()
    return out.getvalue(), w.record_count


def _payloads(fmt, view, records, key_decoder):
    if view is RecordView.KEYS:
        return fmt.key_payloads(_key_column(records), key_decoder)
    return fmt.header_payloads(_header_column(records))


CASES = [(RecordView.KEYS, BYTES_KEYS, "bytes"), (RecordView.KEYS, STRING_KEYS, "string"),
         (RecordView.HEADERS, HEADERS, None), (RecordView.KEYS, PLAIN_STRING_KEYS, "string"),
         (RecordView.HEADERS, PLAIN_HEADERS, None), (RecordView.HEADERS, STRING_HEADERS, None)]


@pytest.mark.parametrize("codec", ["null", "deflate"])
@pytest.mark.parametrize("sync", [1, 300, 64000])
@pytest.mark.parametrize("view,values,key_decoder", CASES)
def test_avro_side_files_are_the_bytes_fastavro_wrote(view, values, key_decoder, sync, codec):
    fmt = AvroFormat(codec=codec, sync_interval=sync)
    records = _records(keys=values, n=150) if view is RecordView.KEYS else _records(headers=values, n=150)
    want = avro_oracle(fmt, view, records, "obj.keys.avro")
    assert len(list(fastavro.block_reader(io.BytesIO(want)))) > (1 if sync < 64000 else 0)
    # the record path, one record at a time and in runs
    assert _write(fmt, view, "obj.keys.avro", [("records", records[i:i + 1]) for i in range(150)]) == (want, 150)
    assert _write(fmt, view, "obj.keys.avro", [("records", records)]) == (want, 150)
    # the columnar path, in runs that end mid-block, and mixed with the record path
    cuts = [0, 1, 40, 41, 99, 150]
    steps = [("column", _payloads(fmt, view, records[a:b], key_decoder)) for a, b in zip(cuts, cuts[1:])]
    assert _write(fmt, view, "obj.keys.avro", steps) == (want, 150)
    mixed = [("records", records[:13]), ("column", _payloads(fmt, view, records[13:90], key_decoder)),
             ("records", records[90:91]), ("column", _payloads(fmt, view, records[91:], key_decoder))]
    assert _write(fmt, view, "obj.keys.avro", mixed) == (want, 150)


@pytest.mark.parametrize("compression", ["none", "gzip"])
@pytest.mark.parametrize("view,values,key_decoder", CASES)
def test_json_side_files_are_the_bytes_of_the_record_path(view, values, key_decoder, compression):
    fmt = JsonFormat(compression=compression, buffer_size=500)
    records = _records(keys=values, n=150) if view is RecordView.KEYS else _records(headers=values, n=150)
    want, count = _write(fmt, view, "k", [("records", records[i:i + 1]) for i in range(150)])
    assert count == 150
    cuts = [0, 1, 40, 41, 99, 150]
    got = _write(fmt, view, "k", [("column", _payloads(fmt, view, records[a:b], key_decoder))
                                  for a, b in zip(cuts, cuts[1:])])
    assert got == (want, 150)
    text = gzip.decompress(want) if compression == "gzip" else want
    first = json.loads(text.split(b"\n")[0])
    if view is RecordView.HEADERS:
        assert first == {"headers": [{"key": "h", "value": "v"}]}
    else:
        assert first == (base64.b64encode(BYTES_KEYS[0]).decode() if key_decoder == "bytes" else STRING_KEYS[0])
    # the columnar path mixed with the record path, in one file
    mixed = [("records", records[:13]), ("column", _payloads(fmt, view, records[13:90], key_decoder)),
             ("records", records[90:91]), ("column", _payloads(fmt, view, records[91:], key_decoder))]
    assert _write(fmt, view, "k", mixed) == (want, 150)


def test_plain_json_side_columns_are_one_arrow_array():
    """Keys and headers without a character JSON escapes reach the writer as an Arrow array (no str per line)."""
    fmt = JsonFormat()
    assert isinstance(_payloads(fmt, RecordView.KEYS, _records(keys=BYTES_KEYS), "bytes")[0], pa.Array)
    assert isinstance(_payloads(fmt, RecordView.KEYS, _records(keys=PLAIN_STRING_KEYS), "string")[0], pa.Array)
    assert isinstance(_payloads(fmt, RecordView.HEADERS, _records(headers=PLAIN_HEADERS), None)[0], pa.Array)


@pytest.mark.parametrize("compression", ["none", "gzip"])
@pytest.mark.parametrize("buffer_size", [1, 7, 64, 100_000])
@pytest.mark.parametrize("type_", [pa.string(), pa.binary(), pa.large_binary()])
def test_json_lines_as_an_arrow_array_are_pushed_where_str_lines_are(compression, buffer_size, type_):
    """``JsonWriter.write_payloads`` of an Arrow array of lines writes the bytes and record count of the same lines
    as str, one at a time, also mixed with runs of str lines, in sliced arrays and with multi-byte characters.
    Compressed, also the same pushes (each write to the gzip stream: where it flushes; a push is due after
    ``buffer_size`` characters, not bytes); uncompressed, an array's run is pushed at once, in order."""
    texts = ["a", "", "é" * 5, "日本語", "x" * 30, "ok\u2028", "😀" * 3, "plain ascii line"] * 9
    lines = [json.dumps(t, ensure_ascii=False) for t in texts]
    fmt = JsonFormat(compression=compression, buffer_size=buffer_size)

    def write(steps):
        out, pushes = io.BytesIO(), []
        w = fmt.open_writer(out, RecordView.KEYS)
        target = w._gz or w._sink  # what the writer pushes its text to
        push = target.write
        target.write = lambda data: (pushes.append(bytes(data)), push(data))[1]
        for payloads in steps:
            w.write_payloads(payloads)
        w.close()
        # ISA-L's gzip stream is not byte-stable from run to run (make test once saw the same text compressed to a
        # different tail), so a gzip object is compared by its text; the pushes are the text itself
        body = gzip.decompress(out.getvalue()) if compression == "gzip" else out.getvalue()
        return body, pushes, w.record_count

    want = write([[x] for x in lines])
    assert want[2] == len(lines) and (buffer_size > 100 or len(want[1]) > 3)
    column = pa.array([x.encode() for x in lines], pa.binary()).cast(type_)
    cuts = [0, 1, 5, 20, 21, 40, 63, len(lines)]
    runs = [column.slice(a, b - a) if i % 2 else lines[a:b] for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    for steps in ([column], runs):
        body, pushes, count = write(steps)
        assert (body, count) == (want[0], want[2])
        if compression == "gzip":
            assert pushes == want[1]
        else:
            assert b"".join(pushes) == body


def test_bytearray_keys_column_is_the_record_path():
    fmt = ByteArrayFormat(separator=b"|", buffer_size=100)
    records = _records(keys=BYTES_KEYS, n=60)
    want = _write(fmt, RecordView.KEYS, "k", [("records", records)])
    got = _write(fmt, RecordView.KEYS, "k", [("column", _payloads(fmt, RecordView.KEYS, records[:7], "bytes")),
                                             ("column", _payloads(fmt, RecordView.KEYS, records[7:], "bytes"))])
    assert got == want


def test_base64_of_every_length_and_byte():
    values = [bytes((i * 7 + j) % 256 for j in range(i)) for i in range(70)]
    assert b64_array(pa.array(values, pa.binary())).to_pylist() == [base64.b64encode(v) for v in values]
    assert b64_array(pa.array(values, pa.binary()).slice(5, 9)).to_pylist() == \
        [base64.b64encode(v) for v in values[5:14]]
    # no key to zero-fill (every length a multiple of 3), and no key at all
    assert b64_array(pa.array(values[::3], pa.binary())).to_pylist() == [base64.b64encode(v) for v in values[::3]]
    assert b64_array(pa.array([], pa.binary())).to_pylist() == []


@pytest.mark.parametrize("fmt", [AvroFormat(), JsonFormat()])
def test_columns_the_record_path_must_handle_are_declined(fmt):
    """No headers, empty headers or a header value that is not UTF-8 (the record path rejects the first two and
    writes U+FFFD for the third); a string key that is not UTF-8 (the string decoder rejects it)."""
    assert fmt.header_payloads(pa.array([[{"key": "a", "value": b"x"}], None], HEADERS_TYPE)) is None
    assert fmt.header_payloads(pa.array([[{"key": "a", "value": b"x"}], []], HEADERS_TYPE)) is None
    assert fmt.header_payloads(pa.array([[{"key": "a", "value": b"\xff"}]], HEADERS_TYPE)) is None
    assert fmt.header_payloads(pa.array([[{"key": "a", "value": b"x"}]], HEADERS_TYPE)) is not None
    assert fmt.key_payloads(pa.array([b"ok", b"\xc3"], pa.binary()), "string") is None
    assert fmt.key_payloads(pa.array([b"ok", b"\xc3"], pa.binary()), "bytes") is not None


def test_the_avro_record_path_still_names_a_bad_record_and_keeps_the_ones_before():
    fmt = AvroFormat(sync_interval=1)
    records = _records(keys=[b"a", b"b", b"c"], n=6)
    records[4].key = None
    out = io.BytesIO()
    w = fmt.open_object_writer(out, RecordView.KEYS, "x")
    with pytest.raises(EncodeError, match="key is null") as ei:
        w.write_many(records)
    assert ei.value.offset == 4 and w.record_count == 4
    w.write_many(records[5:])  # the writer stays usable
    w.close()
    assert list(fastavro.reader(io.BytesIO(out.getvalue()))) == [b"a", b"b", b"c", b"a", b"c"]
    headers = _records(headers=HEADERS, n=4)
    headers[2].headers = ()
    w = fmt.open_object_writer(io.BytesIO(), RecordView.HEADERS, "y")
    with pytest.raises(EncodeError, match="no headers") as ei:
        w.write_many(headers)
    assert ei.value.offset == 2 and w.record_count == 2


# ------------------------------------------------------------------------------------- through the task


def config(tmp_path, fmt: str, **extra) -> SinkConfig:
    cfg = {"name": "j", "topics": "t", "format.class": fmt, "flush.size": "7", "s3.bucket.name": "bkt",
           "store.url": f"file://{tmp_path}/store", "manifest.location": str(tmp_path / "m"),
           "kafka.bootstrap.servers": "localhost:9", "store.kafka.keys": "true", "store.kafka.headers": "true"}
    if fmt == "bytearray":
        cfg["value.decoder"] = "bytes"
    cfg.update(extra)
    return SinkConfig.from_dict(cfg)


def batches(n: int, chunk: int, keys, headers):
    out = []
    for s in range(0, n, chunk):
        m = min(chunk, n - s)
        out.append(pa.RecordBatch.from_pydict({
            "value": pa.array([json.dumps({"i": i, "s": "é" * (i % 3)}).encode() for i in range(s, s + m)], pa.binary()),
            "partition": pa.array([3] * m, pa.int32()),
            "offset": pa.array(range(10 + s, 10 + s + m), pa.int64()),
            "ts": pa.array([1_700_000_000_000 + i for i in range(s, s + m)], pa.int64()),
            "key": pa.array([keys[i % len(keys)] for i in range(s, s + m)], pa.binary()),
            "headers": pa.array([None if headers[i % len(headers)] is None else
                                 [{"key": k, "value": v} for k, v in headers[i % len(headers)]]
                                 for i in range(s, s + m)], HEADERS_TYPE),
        }))
    return out


def run(cfg, batch_list, columnar: bool, calls: list | None = None):
    """(manifest rows, {key: bytes}) of one archive_partitions call with or without the columnar plan; ``calls``
    collects the side payloads the plan gave per batch (None: the batch took the record path)."""
    ctx = BatchContext(job="j", run_id="r", batch_id=0, cluster_id=None, topic_ids={}, flush_tail=True)
    plan = ColumnarPlan.for_parts(task_parts(cfg)) if columnar else None
    assert (plan is not None) == columnar
    if plan is not None and calls is not None:
        plan = _Recording(plan, calls)
    n = sum(b.num_rows for b in batch_list)
    out = list(archive_partitions(iter(batch_list), task_parts(cfg), ctx, {("t", 3): (10, 10 + n)}, plan))
    rows = [r.row.to_json() for r in (decode_result(x) for x in out[0].column("row").to_pylist())
            if isinstance(r, ArchivedRow)]
    store = cfg.store_url[len("file://"):]
    objects = {}
    for r in rows:
        r.pop("object_uri")
        for key in [r["object_key"]] + [s["key"] for s in r.get("side_files") or []]:
            objects[key] = open(f"{store}/bkt/{key}", "rb").read()
    return rows, objects


class _Recording:
    """A ColumnarPlan that records what ``side_payloads`` gave."""

    def __init__(self, plan, calls):
        self._plan, self._calls = plan, calls

    def __getattr__(self, name):
        return getattr(self._plan, name)

    def side_payloads(self, *args):
        got = self._plan.side_payloads(*args)
        self._calls.append(got)
        return got


@pytest.mark.parametrize("fmt,extra,keys", [
    ("json", {}, BYTES_KEYS),                                                       # Avro side files
    ("json", {"keys.format.class": "json", "headers.format.class": "json"}, BYTES_KEYS),
    ("json", {"key.decoder": "string"}, [k.encode() for k in STRING_KEYS]),
    ("json", {"key.decoder": "string", "keys.format.class": "json", "headers.format.class": "json",
              "s3.compression.type": "gzip"}, [k.encode() for k in STRING_KEYS]),
    ("bytearray", {"keys.format.class": "bytearray"}, BYTES_KEYS),
    ("json", {"avro.codec": "deflate"}, BYTES_KEYS),
])
def test_the_task_writes_the_side_files_of_the_record_path(tmp_path, fmt, extra, keys):
    n, chunk = 100, 9
    want = run(config(tmp_path / "r", fmt, **extra), batches(n, chunk, keys, HEADERS), columnar=False)
    calls: list = []
    got = run(config(tmp_path / "c", fmt, **extra), batches(n, chunk, keys, HEADERS), columnar=True, calls=calls)
    assert got == want
    assert len(calls) == -(-n // chunk) and all(c is not None for c in calls)  # every batch took the column path
    assert sum(1 for k in want[1] if ".keys." in k) == sum(1 for k in want[1] if ".headers." in k) == -(-n // 7)


def test_a_batch_the_columns_cannot_take_goes_through_the_record_path(tmp_path):
    """A header value that is not UTF-8 (the record path writes U+FFFD) sends its batch to the record path; the
    files are still the record path's throughout, and the other batches stay columnar."""
    headers = [HEADERS[i % len(HEADERS)] for i in range(60)]
    headers[56] = [("bad", b"caf\xe9")]
    want = run(config(tmp_path / "r", "json"), batches(60, 10, BYTES_KEYS, headers), columnar=False)
    calls: list = []
    got = run(config(tmp_path / "c", "json"), batches(60, 10, BYTES_KEYS, headers), columnar=True, calls=calls)
    assert got == want
    assert [c is None for c in calls] == [False, False, False, False, False, True]  # record 56
    headers_file = [v for k, v in got[1].items() if ".headers." in k][-1]
    assert "caf\ufffd" in json.dumps(list(fastavro.reader(io.BytesIO(headers_file))), ensure_ascii=False)


@pytest.mark.parametrize("keys,headers,error", [
    ([b"a", None], HEADERS, "key is null"),
    (BYTES_KEYS, HEADERS + [None], "no headers"),
    (BYTES_KEYS, HEADERS + [[]], "no headers"),
])
def test_a_record_the_side_files_cannot_hold_is_named(tmp_path, keys, headers, error):
    with pytest.raises(EncodeError, match=error) as ei:
        run(config(tmp_path, "json"), batches(40, 10, keys, headers), columnar=True)
    bad = next(i for i in range(40) if keys[i % len(keys)] is None or not headers[i % len(headers)])
    assert ei.value.offset == 10 + bad


@pytest.mark.parametrize("hdrs", [
    [[("source", b"bench"), ("trace-id", b"0af7")], None, [], [("n", None)], [("é", b"\xff"), ("dup", b"1"), ("dup", b"2")]],
    [], [None, None], [[("k", b"")]],
])
def test_the_direct_readers_headers_column_is_the_one_built_from_dicts(hdrs):
    """kafka_reader.headers_column (flat key and value columns) gives the column the reader built from a dict per
    header: null for a record with no headers or an empty list, as Spark's read."""
    from lakesink.executor.kafka_reader import headers_column

    want = pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in hdrs], HEADERS_TYPE)
    got = headers_column(hdrs, HEADERS_TYPE)
    assert got.equals(want) and got.to_pylist() == want.to_pylist()


# ------------------------------------------------------------------------------------- JSON keys read back


def _record_path_keys(fmt: JsonFormat, data: bytes, decoder: str) -> list:
    from lakesink.objects.formats.base import Format

    return list(Format.key_bytes(fmt, data, decoder))  # the record-by-record reader the column path replaces


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_json_keys_are_read_a_column_at_a_time_as_the_record_path_reads_them(compression):
    fmt = JsonFormat(compression=compression)
    raw = [bytes([i % 256, 255 - i % 256]) * (i % 5) for i in range(300)]
    lines = ["null" if i % 11 == 0 else json.dumps(base64.b64encode(k).decode()) for i, k in enumerate(raw)]
    data = ("\n".join(lines) + "\n").encode()
    data = gzip.compress(data) if compression == "gzip" else data
    fast = fmt.key_bytes(data, "bytes")
    assert isinstance(fast, pa.Array) and fast.to_pylist() == _record_path_keys(fmt, data, "bytes")
    assert fast.to_pylist()[1:4] == raw[1:4] and fast.to_pylist()[0] is None

    texts = ["null" if i % 7 == 0 else json.dumps(f"k{i}-é€", ensure_ascii=False) for i in range(120)]
    sdata = ("\n".join(texts) + "\n").encode()
    sdata = gzip.compress(sdata) if compression == "gzip" else sdata
    col = fmt.key_bytes(sdata, "string")
    assert isinstance(col, pa.Array) and col.to_pylist() == _record_path_keys(fmt, sdata, "string")


@pytest.mark.parametrize("line", ['"a\\"b"', '"\\u00e9"', "42", '{"id": 1}', '"YQ="', '"Y=Q="', '"YQ*="'])
def test_json_keys_the_column_path_cannot_read_go_record_by_record(line):
    """An escape, a key that is not a string, base64 that is not canonical: the record path's answer (or error)."""
    fmt = JsonFormat()
    data = f'"YWI="\n{line}\n'.encode()
    for decoder in ("bytes", "string"):
        try:
            want = _record_path_keys(fmt, data, decoder)
        except Exception as e:  # noqa: BLE001 - the record path's error must be the column path's too
            with pytest.raises(type(e)):
                fmt.key_bytes(data, decoder)
            continue
        got = fmt.key_bytes(data, decoder)
        assert list(got.to_pylist() if isinstance(got, pa.Array) else got) == want


def test_base64_decoded_a_column_at_a_time():
    from lakesink.objects.formats.side_columns import b64_decode_array

    raw = [bytes(range(i % 256)) for i in range(0, 300, 7)] + [b""]
    assert b64_decode_array(b64_array(pa.array(raw, pa.binary()))).to_pylist() == raw
    for bad in (b"YQ=", b"Y=Q=", b"YQ*=", b"=YQ=", b"YQ=Y", b"===="):
        assert b64_decode_array(pa.array([b"YWI=", bad])) is None, bad
