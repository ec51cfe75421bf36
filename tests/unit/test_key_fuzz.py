"""Nothing built from data escapes ``topics.dir`` (issue #14 item 9), fuzzed with hypothesis.

The pure naming code (:mod:`lakesink.objects.naming`) and the built-in partitioners
(:mod:`lakesink.objects.partitioners`) are driven with arbitrary topic names, field values (FieldPartitioner) and
``path.format`` patterns (TimeBasedPartitioner), over several ``directory.delim`` and ``topics.dir`` settings.
Every key they produce (value object, keys/headers/metadata side files, Block-GZIP index) must:

* start with ``topics.dir + directory.delim`` (``topics.dir/`` with the default delimiter), then the topic;
* have no leading ``/``, no empty, ``.`` or ``..`` segment (split on ``/`` and on ``directory.delim``);
* hold no backslash, NUL or other control character (C0 and C1), and be encodable as UTF-8 (an S3 key);
* normalise (``posixpath.normpath``) to a path still under ``topics.dir/<topic>/``.

Anything the code refuses must be refused with a :class:`~lakesink.errors.LakesinkError` (a record-level
``KeyNameError``/``PartitionError``, or a pattern error at config time), never another exception.
"""
from __future__ import annotations

import posixpath
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lakesink.errors import KeyNameError, LakesinkError, PartitionError
from lakesink.objects import naming
from lakesink.objects.naming import NamingSettings, encode_field_value, value_key
from lakesink.objects.partitioners import FieldPartitioner, TimeBasedPartitioner, make_extractor
from lakesink.objects.records import SinkRecord

# any code point, lone surrogates included (JSON's "\ud800" escape decodes to one), controls, delimiters
any_char = st.characters(exclude_categories=())
nasty = st.sampled_from(["/", "\\", "..", ".", "%", "%2F", "\x00", "\n", "\x85", "\u2028", "\ud800", "=", "+",
                         "~", " ", "\u202e", "\uff0f", "\u2215", "_", "|"])
nasty_text = st.lists(st.one_of(nasty, any_char), max_size=12).map("".join)
legal_topic = st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True)
delims = st.sampled_from(["/", "_", "|", "--", "/x/"])
topics_dirs = st.sampled_from(["topics", "a/b", "archive-2026"])


def naming_settings(topics_dir: str, delim: str) -> NamingSettings:
    return NamingSettings(topics_dir=topics_dir, directory_delim=delim)


def assert_safe(key: str, ns: NamingSettings, topic: str) -> None:
    """The invariants every key built from data must keep."""
    d = ns.directory_delim
    assert key.startswith(ns.topics_dir + d + topic + d), key
    if d == "/":
        assert key.startswith(ns.topics_dir + "/"), key
    assert not key.startswith("/"), key
    assert "\\" not in key and "\x00" not in key, key
    bad = [c for c in key if unicodedata.category(c) in ("Cc", "Cs")]
    assert not bad, f"{key!r} holds control/surrogate characters {bad!r}"
    key.encode("utf-8")  # an S3 key is UTF-8
    for seg in key.split("/"):
        assert seg not in ("", ".", ".."), key
        for sub in seg.split(d):
            assert sub not in ("", ".", ".."), key
    norm = posixpath.normpath(key)
    assert norm == key and norm.startswith(ns.prefix + topic + d), (key, norm)


def all_keys(ns: NamingSettings, topic: str, encoded: str) -> list[str]:
    """The value key and every side key of the file (the views a config can store)."""
    k = value_key(ns, topic, 3, encoded, 42, ".avro")
    return [k, naming.side_key(k, ".avro", "keys", ".avro"), naming.side_key(k, ".avro", "headers", ".json"),
            naming.side_key(k, ".avro", "metadata", ".avro"), naming.index_key(k, ".avro")]


# ------------------------------------------------------------------------------ topic names


@settings(max_examples=400, deadline=None)
@given(topic=st.one_of(legal_topic, nasty_text, st.text(max_size=300)), tdir=topics_dirs, delim=delims)
@example(topic="..", tdir="topics", delim="/")
@example(topic=".", tdir="topics", delim="/")
@example(topic="a/../../etc", tdir="topics", delim="/")
@example(topic="x" * 250, tdir="topics", delim="/")
def test_topic_names_never_escape(topic: str, tdir: str, delim: str) -> None:
    ns = naming_settings(tdir, delim)
    try:
        keys = all_keys(ns, topic, "partition=3")
    except KeyNameError:
        return
    for k in keys:
        assert_safe(k, ns, topic)
        if not set(delim) & set("._-"):  # a delimiter made of topic characters can make keys ambiguous to parse
            exts = naming.KeyExtensions(".avro", ".avro", ".json", True, ".avro")
            assert naming.parse_key(k, ns, exts).topic == topic


# ------------------------------------------------------------------------------ field values

field_value = st.one_of(nasty_text, st.text(), st.integers(), st.booleans(), st.none())


@settings(max_examples=500, deadline=None)
@given(topic=legal_topic, tdir=topics_dirs, delim=delims,
       values=st.lists(field_value, min_size=1, max_size=3))
@example(topic="t", tdir="topics", delim="/", values=[".."])
@example(topic="t", tdir="topics", delim="/", values=["../../../etc/passwd"])
@example(topic="t", tdir="topics", delim="_", values=["a_..__b"])
@example(topic="t", tdir="topics", delim="/", values=["\x85"])         # C1 control (NEL)
@example(topic="t", tdir="topics", delim="/", values=["\x9b[2J"])      # C1 CSI: a terminal escape
@example(topic="t", tdir="topics", delim="/", values=["\ud800"])       # lone surrogate, as JSON "\ud800" decodes
def test_field_values_never_escape(topic: str, tdir: str, delim: str, values: list) -> None:
    ns = naming_settings(tdir, delim)
    fields = [f"f{i}" for i in range(len(values))]
    rec = SinkRecord(topic, 3, 42, None, None, dict(zip(fields, values)))
    try:
        encoded = FieldPartitioner(fields, delim).encode_partition(rec)
        keys = all_keys(ns, topic, encoded)
    except (KeyNameError, PartitionError) as e:
        assert f"{topic}-3@42" in str(e) or isinstance(e, KeyNameError), str(e)
        return
    for k in keys:
        assert_safe(k, ns, topic)
    # one directory level per field: a value never adds (or removes) a segment
    parts = encoded.split(delim)
    assert [p.split("=", 1)[0] for p in parts] == fields, (encoded, fields)


@settings(max_examples=300, deadline=None)
@given(value=st.text(alphabet=any_char), delim=delims)
def test_field_value_encoding_is_injective_and_reversible(value: str, delim: str) -> None:
    """Distinct values stay distinct: encoded text decodes back to the value (so two records with different
    values never share a directory by accident)."""
    from urllib.parse import unquote

    try:
        enc = encode_field_value(value, delim)
    except KeyNameError:
        assert any(unicodedata.category(c) == "Cs" for c in value), repr(value)
        return
    assert "/" not in enc and "\\" not in enc and delim not in enc
    assert not any(unicodedata.category(c) in ("Cc", "Cs") for c in enc), repr(enc)
    assert unquote(enc, errors="surrogatepass") == value


@pytest.mark.parametrize("value", ["\x85", "\x9b", "\x9f", "\x80"])
def test_c1_controls_are_percent_encoded(value: str) -> None:
    """Regression (found by the fuzz above): C1 control characters were written raw into keys."""
    assert encode_field_value(f"a{value}b") == "a" + "".join(f"%{b:02X}" for b in value.encode()) + "b"


def test_a_lone_surrogate_field_value_is_refused_naming_the_record() -> None:
    """Regression (found by the fuzz above): a JSON value with a lone surrogate (``"\\ud800"``) made a key S3
    cannot store (not UTF-8); it is a record error naming topic-partition@offset."""
    rec = SinkRecord("t", 3, 42, None, None, {"f": "a\ud800"})
    with pytest.raises(PartitionError, match=r"t-3@42"):
        FieldPartitioner(["f"]).encode_partition(rec)


# ------------------------------------------------------------------------------ path.format

pattern_piece = st.one_of(
    st.sampled_from(["YYYY", "yyyy", "MM", "MMM", "dd", "HH", "mm", "ss", "SSS", "Z", "ZZ", "z", "EEE", "a",
                     "'year'=", "'..'", "'.'", "''", "'/'", "/", "//", "'\\'", "'\x00'", "'\x85'", "-", "_",
                     "'a/../b'", "'%'", "'", "x", "w", "C", "G", "k", "K", "D"]),
    nasty_text,
)
path_formats = st.lists(pattern_piece, min_size=1, max_size=8).map("".join)


@settings(max_examples=400, deadline=None)
@given(topic=legal_topic, tdir=topics_dirs, delim=st.sampled_from(["/", "_"]), fmt=path_formats,
       ts=st.integers(min_value=-(2**43), max_value=2**44))
@example(topic="t", tdir="topics", delim="/", fmt="'..'/YYYY", ts=0)
@example(topic="t", tdir="topics", delim="/", fmt="YYYY/'..'/'..'/'..'", ts=0)
@example(topic="t", tdir="topics", delim="/", fmt="'/'YYYY", ts=0)
@example(topic="t", tdir="topics", delim="/", fmt="YYYY'\x85'", ts=0)
def test_path_format_output_never_escapes(topic: str, tdir: str, delim: str, fmt: str, ts: int) -> None:
    ns = naming_settings(tdir, delim)
    try:
        part = TimeBasedPartitioner(fmt, 3_600_000, "UTC", "en", make_extractor("Record"), delim)
    except LakesinkError:
        return  # refused when the config is loaded: a pattern lakesink cannot honour
    rec = SinkRecord(topic, 3, 42, ts, None, {})
    try:
        encoded = part.encode_partition(rec, part.extract_timestamp(rec, 0))
        keys = all_keys(ns, topic, encoded)
    except (KeyNameError, PartitionError):
        return
    for k in keys:
        assert_safe(k, ns, topic)


@settings(max_examples=200, deadline=None)
@given(fmt=path_formats, delim=st.sampled_from(["/", "_"]))
def test_config_check_of_path_format_agrees_with_the_keys(fmt: str, delim: str) -> None:
    """A ``path.format`` the config accepts yields safe keys for every timestamp tried (the config check
    vets the pattern's literals; the partitioner's output is checked again per key)."""
    from lakesink.config import SinkConfig
    from lakesink.errors import ConfigError

    base = {"name": "j", "topics": "t", "flush.size": "1", "s3.bucket.name": "b", "store.url": "file:///tmp/x",
            "manifest.location": "/tmp/m", "kafka.bootstrap.servers": "127.0.0.1:9",
            "partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
            "partition.duration.ms": "3600000", "locale": "en", "timezone": "UTC", "path.format": fmt,
            "timestamp.extractor": "Record", "directory.delim": delim}
    try:
        cfg = SinkConfig.from_dict(base)
    except ConfigError:
        return
    from lakesink import wiring

    part, ns = wiring.partitioner(cfg), wiring.naming(cfg)
    for ts in (0, 1_700_000_000_000, -86_400_000, 253_402_300_799_000):
        rec = SinkRecord("t", 3, 42, ts, None, {})
        try:
            encoded = part.encode_partition(rec, part.extract_timestamp(rec, 0))
        except PartitionError:
            continue
        try:
            keys = all_keys(ns, "t", encoded)
        except KeyNameError:
            continue  # refused per record: still nothing outside topics.dir
        for k in keys:
            assert_safe(k, ns, "t")
