"""lakesink-native's side-file kernels (native/src/side_files.rs, lakesink.objects.formats.native): each gives the
bytes of its Python twin in lakesink.objects.formats.side_columns and lakesink.executor.kafka_reader, on any input
(Hypothesis), declines what the twin hands to the record path, and is skipped when turned off or absent.
``tests/unit/test_side_columns.py`` runs its byte-for-byte oracles with the kernels and without them."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from lakesink.executor import kafka_reader
from lakesink.objects.formats import native, side_columns

HEADERS_TYPE = kafka_reader.arrow_schema(False, False, True).field("headers").type

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)  # no lone surrogate: UTF-8 encodable
plain = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters='"\\',
                              min_codepoint=0x20), max_size=40)
values = st.one_of(st.none(), st.binary(max_size=300), texts.map(str.encode))
header_lists = st.lists(st.one_of(st.none(), st.lists(st.tuples(texts, values), max_size=5)), max_size=30)


@pytest.fixture(autouse=True)
def installed():
    assert native.native_module() is not None, "lakesink-native is not installed: scripts/bootstrap builds it"


def python_twin(fn, *args):
    """``fn(*args)`` with the kernels turned off (what a process without lakesink-native computes)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(native, "native_module", lambda: None)
        return fn(*args)


@settings(max_examples=300, deadline=None)
@given(hdrs=header_lists)
def test_the_headers_column_is_the_one_pyarrow_converts(hdrs):
    got = native.header_column(hdrs, HEADERS_TYPE)
    want = pa.array([h if h else None for h in hdrs], HEADERS_TYPE)
    assert got is not None
    got.validate(full=True)
    assert got.equals(want) and got.to_pylist() == want.to_pylist()


@pytest.mark.parametrize("hdrs", [
    [[("k", "text, not bytes")]],
    [[(b"bytes key", b"v")]],
    [[("k", b"v", b"extra")]],
    [(("k", b"v"),)],                   # a tuple of headers, not confluent-kafka's list
    [[["k", b"v"]]],                    # a header as a list
    [[("\ud800", b"v")]],               # a key UTF-8 cannot hold
    [42],
])
def test_headers_of_another_shape_are_left_to_pyarrow(hdrs):
    assert native.header_column(hdrs, HEADERS_TYPE) is None


def test_the_headers_column_of_another_type_is_left_to_pyarrow():
    other = pa.list_(pa.struct([("key", pa.large_string()), ("value", pa.binary())]))
    assert native.header_column([[("k", b"v")]], other) is None
    assert native.header_column(([("k", b"v")],), HEADERS_TYPE) is None  # a tuple of records


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.binary(max_size=300), max_size=40), start=st.integers(0, 3))
def test_key_datums_and_base64_lines_are_the_twins(keys, start):
    column = pa.array([b"x"] * start + keys, pa.binary())[start:]  # a slice: offsets not from 0
    for fn, args in ((side_columns.avro_bytes_datums, (column,)), (side_columns.json_key_lines, (column, True))):
        got = fn(*args)
        assert got.equals(python_twin(fn, *args))
    assert native.avro_bytes_datums(column) is not None and native.json_base64_strings(column) is not None


def _parts(hdrs):
    return side_columns.headers_parts(pa.array(hdrs, HEADERS_TYPE))


@settings(max_examples=300, deadline=None)
@given(hdrs=st.lists(st.lists(st.tuples(texts, st.one_of(st.none(), texts.map(str.encode))), min_size=1, max_size=5),
                     min_size=1, max_size=30))
def test_header_datums_and_lines_are_the_twins(hdrs):
    column = pa.array(hdrs, HEADERS_TYPE)
    for fn in (side_columns.avro_headers_datums, side_columns.json_header_lines):
        got = fn(column)
        want = python_twin(fn, column)
        if isinstance(want, list):  # an escape: both write each line with the JSON encoder
            assert got == want
        else:
            assert got.equals(want)
    assert native.avro_headers(*_parts(hdrs)) is not None


@settings(max_examples=200, deadline=None)
@given(hdrs=st.lists(st.lists(st.tuples(plain, st.one_of(st.none(), plain.map(str.encode))), min_size=1, max_size=4),
                     min_size=1, max_size=20))
def test_json_lines_without_an_escape_are_built_natively(hdrs):
    got = native.json_headers(*_parts(hdrs))
    assert got is not None
    assert got.to_pylist() == python_twin_lines(hdrs)


def python_twin_lines(hdrs):
    from lakesink.objects.formats.jsontext import compact_json

    return [compact_json({"headers": [{"key": k, "value": None if v is None else v.decode()} for k, v in pairs]})
            .encode() for pairs in hdrs]


@pytest.mark.parametrize("text", ['q"', "back\\slash", "tab\t", "\x00", "\x1f"])
def test_json_lines_that_need_an_escape_are_declined(text):
    assert native.json_headers(*_parts([[("k", b"v")], [(text, b"v")]])) is None
    assert native.json_headers(*_parts([[("k", text.encode())]])) is None


def test_the_kernels_refuse_headers_they_cannot_describe():
    module = native.native_module()
    counts = np.array([2], np.int64).tobytes()
    keys, key_offsets = b"ab", np.array([0, 1, 2], np.int64).tobytes()
    one = np.array([0, 1], np.int64).tobytes()
    for kernel in (module.avro_headers, module.json_headers):
        kernel(counts, keys, key_offsets, b"xy", key_offsets)  # well formed
        with pytest.raises(ValueError, match="same headers"):
            kernel(counts, keys, key_offsets, b"x", one)  # one value for two keys
        with pytest.raises(ValueError, match="same headers"):
            kernel(counts, keys, key_offsets, b"xy", key_offsets, b"\x01")  # present for one of two
        with pytest.raises(ValueError, match="without headers"):
            kernel(np.array([0, 2], np.int64).tobytes(), keys, key_offsets, b"xy", key_offsets)
        with pytest.raises(ValueError, match="not UTF-8"):
            kernel(counts, b"a\xff", key_offsets, b"xy", key_offsets)
        with pytest.raises(ValueError, match="not ascending"):
            kernel(counts, keys, np.array([0, 2, 1], np.int64).tobytes(), b"xy", key_offsets)
    with pytest.raises(ValueError, match="8-byte offsets"):
        module.avro_bytes_datums(b"ab", b"\x00" * 7)


@pytest.mark.parametrize("value,expected", [("0", "True None None None"), ("1", "False True True True")])
def test_the_switch_turns_the_side_kernels_off(value, expected):
    """LAKESINK_NATIVE=0: every kernel answers None and the twins run."""
    code = ("from lakesink.objects.formats import native\n"
            "import pyarrow as pa\n"
            "t = pa.list_(pa.struct([('key', pa.string()), ('value', pa.binary())]))\n"
            "c = native.header_column([[('k', b'v')]], t)\n"
            "a = native.avro_bytes_datums(pa.array([b'k']))\n"
            "j = native.json_base64_strings(pa.array([b'k']))\n"
            "print(native.native_module() is None,"
            " c if c is None else c.to_pylist() == [[{'key': 'k', 'value': b'v'}]],"
            " a if a is None else a.to_pylist() == [b'\\x02k'], j if j is None else j.to_pylist() == [b'\"aw==\"'])\n")
    import os

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, native.ENV: value})
    assert out.returncode == 0 and out.stdout.split() == expected.split(), out.stderr[-2000:]


def test_an_older_lakesink_native_runs_the_kernels_it_has(monkeypatch):
    """A node with lakesink-native 0.1.0 (the JSON check only): the side files come from the Python twins."""
    import types

    old = types.SimpleNamespace(proven_mask=native.native_module().proven_mask)
    hdrs = [[("k", b"v")], None]
    monkeypatch.setattr(native, "native_module", lambda: old)
    assert native.header_column(hdrs, HEADERS_TYPE) is None and native.avro_bytes_datums(pa.array([b"k"])) is None
    assert kafka_reader.headers_column(hdrs, HEADERS_TYPE).to_pylist() == [[{"key": "k", "value": b"v"}], None]
    one = pa.array([[("k", b"v")]], HEADERS_TYPE)
    assert native.avro_headers(*side_columns.headers_parts(one)) is None  # the twin writes it
    assert side_columns.avro_headers_datums(one).to_pylist() == [b"\x02\x02k\x02\x02v\x00"]
    assert native.proven_canonical(pa.array([b"{}"])).tolist() == [True]
