"""The native JSON copy-through check (native/, lakesink.objects.formats.native): what it proves is always true --
a value it calls canonical is byte for byte what lakesink's re-encoding writes --, and it proves the values a
producer's compact JSON holds (so the sink's JSON path skips the Python parse)."""
from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from lakesink.objects.formats import native
from lakesink.objects.formats.jsontext import compact_json

try:
    import lakesink_native
except ImportError:  # a checkout's scripts/bootstrap builds it (native/, needs Rust): a missing build is a failure
    lakesink_native = None


@pytest.fixture(autouse=True)
def built():
    assert lakesink_native is not None, "lakesink-native is not installed: scripts/bootstrap builds it (needs cargo)"


def _no_duplicates(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError("duplicate key")
    return d


def _no_constant(name):
    raise ValueError(name)


def written(raw: bytes) -> bool:
    """The reference: whether lakesink's re-encoding of ``raw`` (json.loads, then compact_json) is ``raw`` itself,
    for a value the record path would write (valid UTF-8 JSON, not null, no NaN)."""
    try:
        value = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        return value is not None and compact_json(value).encode("utf-8") == raw
    except (ValueError, RecursionError, UnicodeDecodeError):
        return False


def proven(raw: bytes) -> bool:
    """The native check's word on one value: a column of it alone."""
    return lakesink_native.proven_mask(raw, struct.pack("<2q", 0, len(raw))) == b"\x01"


CANONICAL = [
    b'{"a":1,"b":"x","c":true,"d":false,"e":null}', b'{"o":{"p":[1,{"q":[]}]},"r":{}}', b'[]', b'{}', b'"s"',
    b'42', b'-7', b'true', b'false', b'[null]', b'0.0', b'-0.0', b'1.5', b'0.0001', b'10.0', b'123456.789',
    b'99999999999999.9', b'0.1', b'0.0001234567891', b'12345678901234567890123',
    '{"name":"Zoë 東京 🚀"}'.encode(), b'{"s":"\\"\\\\\\b\\f\\n\\r\\t"}', b'{"c":"\\u0000\\u001f\\u000b\\u000e"}',
    b'{"del":"\x7f","ls":"\xe2\x80\xa8"}', b'{"a":1,"A":2,"a ":3,"\\n":4,"\\u0001":5}',
    b'{' + b",".join(b'"k%d":%d' % (i, i) for i in range(40)) + b'}',  # more keys than the short comparison
    b'[' * 200 + b']' * 200, b'9' * 4300,
]

NOT_PROVEN = [
    b'null', b'', b' ', b'{"a": 1}', b' {"a":1}', b'{"a":1}\n', b'{"a":1} ', b'{"a":1}x', b'{"a":1}}', b'[1,]',
    b'{"a":1,}', b'{,}', b'{"a"}', b'{"a":}', b'[1 ,2]', b'\xef\xbb\xbf{}', b'{"a":1,"a":2}',
    b'{"o":{"k":1,"k":1}}', b'[{"k":1},{"k":1,"k":2}]',
    b'{' + b",".join(b'"k%d":1' % (i % 39) for i in range(40)) + b'}',  # a repeat among more than 16 keys
    b'{"e":"\\u00e9"}', b'{"s":"\\/"}', b'{"c":"\\u001F"}', b'{"t":"\\u0009"}', b'{"n":"\\u000a"}', b'"\\x"',
    b'"\\u12"', b'"a\tb"', b'"\x01"', b'"\xff"', b'"\xc3"', b'"\xed\xa0\x80"', b'"abc', b'"\\',
    b'1e5', b'1E5', b'1.0e2', b'1e-05', b'1e+16', b'1.50', b'2.0000', b'0.00001', b'-0', b'00', b'01', b'-', b'1.',
    b'.5', b'+1', b'0.1000000000000000055511', b'10000000000000000.0', b'NaN', b'Infinity', b'-Infinity',
    b'0.30000000000000004', b'1234567890123456.0',  # repr's own, but of 16+ digits: left to Python
    b'nul', b'tru', b'True', b'[' * 300 + b']' * 300, b'9' * 4301,
]


@pytest.mark.parametrize("raw", CANONICAL, ids=range(len(CANONICAL)))
def test_what_the_sink_writes_as_it_stands_is_proven(raw):
    assert written(raw), raw  # the table itself: each is its own re-encoding
    assert proven(raw)


@pytest.mark.parametrize("raw", NOT_PROVEN, ids=range(len(NOT_PROVEN)))
def test_what_is_not_proven_goes_to_the_python_check(raw):
    assert not proven(raw)


def test_a_deep_canonical_value_is_left_to_python():
    # sound, not complete: past 256 levels the native check declines a value Python would copy
    raw = b'[' * 300 + b']' * 300
    assert written(raw) and not proven(raw)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12)


def _plain(value) -> bool:
    """Whether every float in ``value`` is one the native check proves: repr writes it without an exponent, in at
    most 15 digits."""
    if isinstance(value, float):
        return (value == 0 or 1e-4 <= abs(value) < 1e16) and len(repr(abs(value))) <= 16
    if isinstance(value, list):
        return all(map(_plain, value))
    if isinstance(value, dict):
        return all(map(_plain, value.values()))
    return True


@settings(max_examples=600, deadline=None)
@given(_json)
def test_compact_json_of_any_value_is_proven_unless_a_float_is_long_or_needs_an_exponent(value):
    raw = compact_json(value).encode("utf-8")
    assert proven(raw) == (value is not None and _plain(value))


@settings(max_examples=600, deadline=None)
@given(_json, st.sampled_from(["spaces", "ascii", "indent", "sorted"]))
def test_other_spellings_are_proven_only_when_they_are_the_same_bytes(value, spelling):
    kw = {"spaces": {}, "ascii": {"separators": (",", ":")}, "indent": {"indent": 1},
          "sorted": {"separators": (",", ":"), "ensure_ascii": False, "sort_keys": True}}[spelling]
    raw = json.dumps(value, **kw).encode("utf-8")
    assert not proven(raw) or written(raw)


@settings(max_examples=1500, deadline=None)
@given(_json, st.data())
def test_no_edit_of_a_canonical_value_fools_it(value, data):
    raw = bytearray(compact_json(value).encode("utf-8"))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw)))
        edit = data.draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        byte = data.draw(st.sampled_from(list(b' \t\n",:{}[]\\/0159.eE-+tfnu\x00\x1f\x7f') + [0xC3, 0xA9, 0xFF]))
        if edit == "insert":
            raw[at:at] = bytes([byte])
        elif edit == "delete" and at < len(raw):
            del raw[at]
        elif edit == "replace" and at < len(raw):
            raw[at] = byte
        elif edit == "duplicate":
            raw[at:at] = raw[max(0, at - 8):at]
    raw = bytes(raw)
    assert not proven(raw) or written(raw), raw


def test_random_numbers_are_proven_when_they_are_short_reprs():
    # proven: repr's own text of at most 15 digits; a longer one may be repr (Python's tie between equally short
    # texts is not proven natively), so it is left to Python, and anything that is not repr is never proven
    rnd = random.Random(20261128)
    texts = []
    for _ in range(20_000):
        x = struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
        if x == x and abs(x) != float("inf"):
            texts.append(repr(x))
    for _ in range(20_000):  # decimals of 1-19 digits: some repr, most not (trailing zeros, 16+ digits)
        digits = "".join(rnd.choice("0123456789") for _ in range(rnd.randint(1, 19)))
        cut = rnd.randint(1, len(digits))
        whole = digits[:cut].lstrip("0") or "0"
        texts.append(("-" if rnd.random() < 0.3 else "") + whole + "." + (digits[cut:] or "0"))
    for t in texts:
        x = float(t)
        plain = x == 0 or 1e-4 <= abs(x) < 1e16
        short = len(t.lstrip("-")) <= 16
        assert proven(t.encode()) == (repr(x) == t and plain and short), t


def mask(column):
    got = native.proven_canonical(column)
    return None if got is None else got.tolist()


def test_a_column_is_proven_value_by_value():
    values = [b'{"a":1}', b'[1.5]', b'"x"', b'{"a": 1}', b'{"b":2}', b'1e5']
    for typ in (pa.binary(), pa.large_binary()):
        column = pa.array(values, typ)
        assert mask(column) == [True, True, True, False, True, False]
        assert mask(column.slice(1, 2)) == [True, True]
        assert mask(column.slice(3, 2)) == [False, True]
        assert mask(column.slice(6)) == []
    assert mask(pa.array(["{}"], pa.string())) is None  # not a binary column: not decided
    assert mask(pa.chunked_array([pa.array([b"{}"])])) is None  # nor chunks


def test_offsets_outside_the_data_are_refused():
    with pytest.raises(ValueError, match="offsets"):
        lakesink_native.proven_mask(b"{}", struct.pack("<3q", 0, 2, 9))
    with pytest.raises(ValueError, match="offsets"):
        lakesink_native.proven_mask(b"{}{}", struct.pack("<3q", 0, 4, 2))
    with pytest.raises(ValueError, match="offsets"):
        lakesink_native.proven_mask(b"{}", struct.pack("<3q", -1, 1, 2))
    with pytest.raises(ValueError, match="offsets"):
        lakesink_native.proven_mask(b"{}", b"\x00\x00")
    assert lakesink_native.proven_mask(b"{}[] ", struct.pack("<4q", 0, 2, 4, 5)) == b"\x01\x01\x00"


def test_the_switch_turns_it_off():
    code = ("from lakesink.objects.formats import native\n"
            "import pyarrow as pa\n"
            "print(native.native_module() is None, native.proven_canonical(pa.array([b'{}'])))\n")
    for value, expected in (("0", "True None"), ("1", "False [ True]")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             env={**os.environ, native.ENV: value})
        assert out.returncode == 0 and out.stdout.split() == expected.split(), out.stderr[-2000:]
