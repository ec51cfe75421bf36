"""JSON copy-through (#9 item 7): a value already in JsonFormat's form is copied, any other is
re-encoded, and the line is byte-identical to re-encoding either way."""
from __future__ import annotations

import io
import json
import random

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from lakesink.objects.formats import native
from lakesink.objects.formats.json import JsonFormat, compact_json, is_canonical, value_column, value_lines


@pytest.fixture(params=["native", "python"])
def check(request, monkeypatch):
    """value_column with the native check (lakesink-native, built by scripts/bootstrap) and without it."""
    import lakesink.objects.formats.json as jf

    if request.param == "python":
        monkeypatch.setattr(jf, "proven_canonical", lambda values: None)
    else:
        assert native.native_module() is not None, "lakesink-native is not installed: scripts/bootstrap builds it"
    return request.param


def reencoded(raw: bytes) -> str:
    """What the record path writes: parse, then compact_json."""
    return compact_json(json.loads(raw.decode("utf-8")))


COPIED = [
    b'{"a":1,"b":"x","c":true,"d":false,"e":null}',
    b'{"order_id":10000001,"amount":1.37,"items":["sku-1","sku-2"],"nested":{"k":[1,2,{"z":[]}]}}',
    '{"name":"Zoë 東京 🚀","dash":"—"}'.encode(),           # raw UTF-8 stays raw
    b'{"s":"tab\\there\\nnew \\"q\\" back\\\\slash \\b\\f\\r"}',  # the short escapes Python writes
    b'{"c":"\\u0000\\u0001\\u001f\\u000b\\u000e"}',           # other controls: lowercase \u00xx
    b'{"del":"\x7f","ls":"\xe2\x80\xa8"}',                    # DEL and U+2028 are written raw
    b'[0,-1,12345678901234567890123,0.0,-0.0,1.5,0.0001,123456.789,-2.25,10.0]',
    b'"just a string"', b'42', b'true', b'[]', b'{}', b'{"s":"a:b,c{d}[e] 1.50 -0"}',
]

REENCODED = [
    b'{"a": 1}', b' {"a":1}', b'{"a":1}\n', b'{\n  "a" : [1, 2]\n}\t',      # whitespace
    b'{"e":"\\u00e9"}', b'{"s":"\\/"}', b'{"c":"\\u001F"}', b'{"t":"\\u0009"}',  # escapes Python writes otherwise
    b'{"x":1e5}', b'{"x":1E5}', b'{"x":1.0e2}',    # exponents
    b'{"x":1.50}', b'{"x":2.0000}', b'{"x":0.00001}', b'{"x":-0}',               # non-shortest numbers
    b'{"x":0.1000000000000000055511}',
    b'{"a":1,"a":2}', b'{"o":{"k":1,"k":1}}',                                   # duplicate keys
]


@pytest.mark.parametrize("raw", COPIED, ids=range(len(COPIED)))
def test_canonical_values_are_copied_and_identical(raw):
    assert is_canonical(raw.decode("utf-8"))
    assert value_lines([raw]) == [raw.decode("utf-8")] == [reencoded(raw)]


@pytest.mark.parametrize("raw", REENCODED, ids=range(len(REENCODED)))
def test_other_values_take_the_reencode_path(raw):
    text = raw.decode("utf-8")
    line = value_lines([raw])[0]
    assert line == reencoded(raw)
    assert line != text  # each of these differs once re-encoded, so copying it would have been wrong
    if b'"a":1,"a"' not in raw and b'"k":1,"k"' not in raw:
        assert not is_canonical(text)


@pytest.mark.parametrize("raw", [b'{"x":1e+16}', b'{"x":1e-05}', b'[1.2345678901234567]',
                                 b'{"x":0.30000000000000004}', b'{"x":1234567890123456.0}'])
def test_canonical_but_unproven_floats_are_reencoded_identically(raw):
    """Exponent and 16-17-digit floats are re-encoded even when already in repr's form (the copy test
    only vouches for <= 15 significant digits in fixed notation); the bytes are the same."""
    assert not is_canonical(raw.decode())
    assert value_lines([raw]) == [reencoded(raw)] == [raw.decode()]


@pytest.mark.parametrize("raw", [b'{"a":', b"nul", b"\xff\xfe", b"null", b'{"x":NaN}', b"[Infinity]"])
def test_invalid_null_or_unwritable_values_raise(raw):
    with pytest.raises(ValueError):
        value_lines([raw])


def test_floats_fuzz_byte_identical():
    rnd = random.Random(9)
    floats = ([rnd.uniform(-1e6, 1e6) for _ in range(3000)] + [rnd.random() * 10 ** rnd.randint(-8, 18) for _ in range(3000)]
              + [round(rnd.uniform(0, 1000), rnd.randint(0, 6)) for _ in range(3000)])
    for f in floats:
        for tok in (repr(f), "%.15g" % f, "%.17g" % f, "%.6f" % f, "%.2f" % f):
            raw = f'{{"x":{tok}}}'.encode()
            assert value_lines([raw]) == [reencoded(raw)], tok


def test_every_single_character_string_byte_identical():
    for cp in list(range(0, 0x800)) + list(range(0x2000, 0x2100)) + [0xFEFF, 0xFFFD, 0x1F680, 0x10FFFF]:
        ch = chr(cp)
        for raw in (json.dumps(ch, ensure_ascii=False).encode(), json.dumps(ch).encode()):
            assert value_lines([raw]) == [reencoded(raw)], hex(cp)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4), max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(json_values, st.sampled_from([(",", ":"), (", ", ": "), (",", ": ")]), st.booleans())
def test_any_json_text_byte_identical(value, separators, ascii_):
    raw = json.dumps(value, separators=separators, ensure_ascii=ascii_).encode()
    if value is None:
        return  # a null is a tombstone: test_invalid_null_or_unwritable_values_raise
    assert value_lines([raw]) == [reencoded(raw)]


def test_writer_objects_identical_whichever_path():
    """The same records through write_payloads(value_lines) and through write() give the same object."""
    from lakesink.objects.records import SinkRecord

    raws = COPIED + REENCODED
    a, b = io.BytesIO(), io.BytesIO()
    w = JsonFormat(buffer_size=64).open_writer(a)
    w.write_payloads(value_lines(raws))
    w.close()
    w = JsonFormat(buffer_size=64).open_writer(b)
    for i, raw in enumerate(raws):
        w.write(SinkRecord(topic="t", partition=0, offset=i, timestamp=0, key=None,
                           value=json.loads(raw), headers=()))
    w.close()
    assert a.getvalue() == b.getvalue()
    assert a.getvalue().count(b"\n") == len(raws)


@pytest.mark.parametrize("buffer_size", [64, 1 << 20])
def test_a_canonical_column_is_written_as_the_column_itself(buffer_size, check):
    """value_column hands the writer the Arrow column itself when every value is copied through (no str per line),
    and the object is byte for byte the record path's; a column with a value to re-encode comes back as lines."""
    from lakesink.objects.records import SinkRecord

    fast = [raw for raw in COPIED if b"12345678901234567890123" not in raw] * 3
    column = pa.array(fast, pa.binary())
    assert value_column(column) is column
    mixed = pa.array(fast + REENCODED, pa.binary())
    assert value_column(mixed) == [reencoded(r) for r in fast + REENCODED]
    def pushed(w):
        pushes, target = [], w._gz or w._sink  # what the writer pushes its text to  # noqa: SLF001
        write = target.write
        target.write = lambda data: (pushes.append(len(data)), write(data))[1]
        return pushes

    for raws, payloads in ((fast, column), (fast + REENCODED, value_column(mixed))):
        a, b = io.BytesIO(), io.BytesIO()
        w = JsonFormat(buffer_size=buffer_size).open_writer(a)
        pa_pushes = pushed(w)
        w.write_payloads(payloads)
        w.close()
        w = JsonFormat(buffer_size=buffer_size).open_writer(b)
        rec_pushes = pushed(w)
        for i, raw in enumerate(raws):
            w.write(SinkRecord(topic="t", partition=0, offset=i, timestamp=0, key=None,
                               value=json.loads(raw), headers=()))
        w.close()
        # uncompressed, the column's run goes to the sink at once (where a push falls changes no byte; compressed
        # pushes are compared in test_side_columns)
        assert sum(pa_pushes) == sum(rec_pushes) and len(rec_pushes) > (1 if buffer_size == 64 else 0)
        assert a.getvalue() == b.getvalue() == b"".join(reencoded(r).encode() + b"\n" for r in raws)


def test_every_double_bit_pattern_and_big_ints_byte_identical():
    """orjson writes |x| < 1e-4 differently from repr (0.0000… / e-N): those, and integers beyond 64 bits (which
    orjson reads as floats), must never be copied on orjson's word."""
    import struct

    import orjson

    rnd = random.Random(11)
    toks = []
    for _ in range(20000):
        f = struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0]
        if f == f and abs(f) != float("inf"):
            toks += [repr(f), orjson.dumps(f).decode()]
    toks += [orjson.dumps(x).decode() for x in (1e-5, 9.99e-5, 1.5e-7, 5e-324, 1e16, 1e-4)]
    toks += [str(2 ** 64), str(-(2 ** 63) - 1), str(2 ** 64 - 1), str(10 ** 30)]
    for tok in toks:
        raw = f'{{"x":{tok},"s":"e-5"}}'.encode()
        assert value_lines([raw]) == [reencoded(raw)], tok


def test_canonical_values_take_the_orjson_check(monkeypatch):
    """The json-module check (regex, then a parse) is only for what orjson cannot vouch for."""
    import lakesink.objects.formats.json as jf

    def untouched(text):
        raise AssertionError(f"json-module path taken for {text!r}")

    monkeypatch.setattr(jf, "_CANONICAL", untouched)
    fast = [raw for raw in COPIED if b"12345678901234567890123" not in raw]  # a big int: the slow path
    assert value_lines(fast) == [raw.decode("utf-8") for raw in fast]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(COPIED + REENCODED + [b'{"x":1e-05}', b'{"x":0.00001}', b'{"s":"e-5"}', b'1', b'2']),
                min_size=1, max_size=12))
def test_a_column_is_decided_as_its_values_are(raws):
    """The whole-column test (one orjson serialisation of every value) gives, value for value, what the values
    alone give: a column with any value that is not canonical falls back to deciding each one."""
    assert value_lines(raws) == [value_lines([r])[0] for r in raws] == [reencoded(r) for r in raws]


@pytest.mark.parametrize("raws", [
    [b"[1", b"2]"],                    # joined, a canonical [[1,2]], but neither value is JSON
    [b'{"a":"x', b'y"}'],              # a comma inside what the join would read as one string
    [b'"a"', b' "b"'], [b"1 ", b"2"],  # whitespace where a value meets the comma
    [b'{"a":1}', b"null"],             # a canonical column but for a tombstone
])
def test_a_column_whose_join_misleads_is_still_decided_per_value(raws, check):
    import lakesink.objects.formats.json as jf

    try:
        lines = value_lines(raws)
    except ValueError:
        with pytest.raises(ValueError):
            [value_lines([r]) for r in raws]  # noqa: B018 - one of them raises alone too
        return
    assert lines == [reencoded(r) for r in raws]
    import orjson

    assert jf._all_copied(raws, [orjson.loads(r) for r in raws]) is False  # noqa: SLF001
    column = pa.array(raws, pa.binary())
    try:
        got = value_column(column)
    except ValueError:
        return
    assert got is not column and got == lines


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(COPIED + REENCODED + [b'{"x":1e-05}', b'{"x":0.30000000000000004}', b'{"s":"e-5"}']),
                min_size=1, max_size=12), st.booleans())
def test_a_column_gives_its_values_lines_with_either_check(raws, use_native):
    import lakesink.objects.formats.json as jf

    column = pa.array(raws, pa.binary())
    with pytest.MonkeyPatch.context() as mp:
        if not use_native:
            mp.setattr(jf, "proven_canonical", lambda values: None)
        got = value_column(column)
    want = [reencoded(r) for r in raws]
    if got is column:
        assert [r.decode("utf-8") for r in raws] == want
    else:
        assert got == want


def test_python_parses_only_the_values_the_native_check_left(monkeypatch):
    import lakesink.objects.formats.json as jf

    assert native.native_module() is not None, "lakesink-native is not installed: scripts/bootstrap builds it"
    calls = []
    real = jf._orjson_loads  # noqa: SLF001
    monkeypatch.setattr(jf, "_orjson_loads", lambda v: calls.append(v) or real(v))
    left = [b'{"x":0.30000000000000004}', b'{"a": 1}']  # repr's own 17 digits; whitespace
    raws = COPIED * 3 + left
    got = value_column(pa.array(raws, pa.binary()))
    assert got == [reencoded(r) for r in raws]
    assert calls == left
    calls.clear()
    copied = COPIED + left[:1]
    column = pa.array(copied, pa.binary())
    assert value_column(column) is column and calls == left[:1]  # all canonical: the column itself


def test_canonical_column_is_decided_at_once(monkeypatch):
    """An all-canonical column never reaches the per-value loop: each value is parsed once, serialised once."""
    import lakesink.objects.formats.json as jf

    calls = []
    real = jf._orjson_dumps  # noqa: SLF001
    monkeypatch.setattr(jf, "_orjson_dumps", lambda v: calls.append(1) or real(v))
    fast = [raw for raw in COPIED if b"12345678901234567890123" not in raw] * 50
    assert value_lines(fast) == [raw.decode("utf-8") for raw in fast]
    assert len(calls) == 1


def test_exponent_pattern_finds_what_the_plain_pattern_finds():
    """The exponent check is written literal-first for speed: it must match exactly where ``[0-9]e-[0-9]``, not
    followed by a digit, does."""
    import re

    import lakesink.objects.formats.json as jf

    plain = re.compile(rb"[0-9]e-[0-9](?![0-9])").search
    rnd = random.Random(5)
    for _ in range(20000):
        s = bytes(rnd.choice(b"0123456789e-.,x") for _ in range(rnd.randint(0, 12)))
        assert (jf._ORJSON_E(s) is None) == (plain(s) is None), s  # noqa: SLF001
