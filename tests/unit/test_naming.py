"""Object key building/parsing and path safety (lakesink.objects.naming)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesink.errors import KeyNameError
from lakesink.objects.naming import (
    KeyExtensions,
    NamingSettings,
    ParsedKey,
    check_path_segments,
    encode_field_value,
    index_key,
    parse_key,
    side_key,
    validate_topic,
    value_key,
)
from lakesink.objects.partitioners import FieldPartitioner
from lakesink.objects.records import SinkRecord

NS = NamingSettings()


def test_spec_example() -> None:
    assert value_key(NS, "orders", 3, "partition=3", 1200, ".avro") == "topics/orders/partition=3/orders+3+0000001200.avro"


@pytest.mark.parametrize("tdir", ["", "   "])
def test_blank_topics_dir_means_no_prefix(tdir: str) -> None:
    ns = NamingSettings(topics_dir=tdir)
    assert value_key(ns, "t", 0, "partition=0", 5, ".json") == "t/partition=0/t+0+0000000005.json"


def test_nested_topics_dir() -> None:
    ns = NamingSettings(topics_dir="archive/kafka")
    assert value_key(ns, "t", 1, "partition=1", 0, ".bin").startswith("archive/kafka/t/partition=1/")


def test_padding_width_and_no_truncation() -> None:
    assert value_key(NamingSettings(zero_pad_width=0), "t", 0, "partition=0", 42, ".avro").endswith("t+0+42.avro")
    assert value_key(NS, "t", 0, "partition=0", 12345678901, ".avro").endswith("t+0+12345678901.avro")
    assert value_key(NamingSettings(zero_pad_width=3), "t", 12, "partition=12", 7, ".avro").endswith("t+12+007.avro")


def test_custom_delimiters() -> None:
    ns = NamingSettings(topics_dir="top", directory_delim="_", file_delim="-")
    key = value_key(ns, "t", 2, "partition=2", 9, ".json")
    assert key == "top_t_partition=2_t-2-0000000009.json"
    assert parse_key(key, ns, ".json") == ParsedKey("t", 2, 9, "partition=2", "value", ".json")


def test_side_and_index_keys() -> None:
    v = value_key(NS, "orders", 0, "partition=0", 0, ".avro")
    assert side_key(v, ".avro", "keys", ".avro") == "topics/orders/partition=0/orders+0+0000000000.keys.avro"
    assert side_key(v, ".avro", "headers", ".json.gz") == "topics/orders/partition=0/orders+0+0000000000.headers.json.gz"
    g = value_key(NS, "orders", 0, "partition=0", 0, ".gz")
    assert index_key(g, ".gz") == "topics/orders/partition=0/orders+0+0000000000.index.json"
    with pytest.raises(KeyNameError):
        side_key(v, ".json", "keys", ".avro")


def test_parse_round_trip_all_views() -> None:
    exts = KeyExtensions(value=".snappy.parquet", keys=".avro", headers=".json", index=False)
    v = value_key(NS, "my.topic-1", 7, "region=eu/type=a", 120, ".snappy.parquet")
    assert parse_key(v, NS, exts) == ParsedKey("my.topic-1", 7, 120, "region=eu/type=a", "value", ".snappy.parquet")
    k = side_key(v, ".snappy.parquet", "keys", ".avro")
    assert parse_key(k, NS, exts).view == "keys"
    h = side_key(v, ".snappy.parquet", "headers", ".json")
    assert parse_key(h, NS, exts).view == "headers"
    gz = KeyExtensions(value=".gz", index=True)
    g = value_key(NS, "t", 0, "partition=0", 3, ".gz")
    assert parse_key(index_key(g, ".gz"), NS, gz).view == "index"
    assert parse_key(g, NS, gz).view == "value"


@pytest.mark.parametrize(
    "key,reason",
    [
        ("other/t/partition=0/t+0+0000000000.avro", "topics.dir"),
        ("topics/t/partition=0/t+0+0000000000.json", "extension"),
        ("topics/t/partition=0/u+0+0000000000.avro", "topic"),
        ("topics/t/partition=0/t+x+0000000000.avro", "partition"),
        ("topics/t/partition=0/t+01+0000000000.avro", "partition"),
        ("topics/t/partition=0/t+0+00000000a0.avro", "offset"),
        ("topics/t/partition=0/t+0+000000001.avro", "padded"),
        ("topics/t/partition=0/t+0.avro", "file name"),
        ("topics/t/t+0+0000000000.avro", "topic"),
        ("topics/t/../t+0+0000000000.avro", "segment"),
    ],
)
def test_parse_rejects_foreign_keys(key: str, reason: str) -> None:
    with pytest.raises(KeyNameError, match=reason):
        parse_key(key, NS, ".avro")


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "a b", "ä", "x" * 250, "a\\b"])
def test_illegal_topics(topic: str) -> None:
    with pytest.raises(KeyNameError):
        validate_topic(topic)
    with pytest.raises(KeyNameError):
        value_key(NS, topic, 0, "partition=0", 0, ".avro")


def test_field_value_encoding() -> None:
    assert encode_field_value("eu-west 1") == "eu-west 1"  # unchanged: identical to Confluent
    assert encode_field_value("a/b") == "a%2Fb"
    assert encode_field_value("../..") == "..%2F.."
    assert encode_field_value("50%") == "50%25"
    assert encode_field_value("a\\b\n") == "a%5Cb%0A"
    assert encode_field_value("a_b", "_") == "a%5Fb"


@pytest.mark.parametrize("enc", ["", "..", "a/../b", "a//b", "/abs", "a\\b", "ok/\x00"])
def test_unsafe_encoded_partitions_rejected(enc: str) -> None:
    with pytest.raises(KeyNameError):
        value_key(NS, "t", 0, enc, 0, ".avro")


def test_prefix_override_must_stay_under_topic() -> None:
    assert value_key(NS, "t", 0, "x=1", 0, ".avro", prefix="t/custom/x=1") == "topics/t/custom/x=1/t+0+0000000000.avro"
    with pytest.raises(KeyNameError):
        value_key(NS, "t", 0, "x=1", 0, ".avro", prefix="u/x=1")


def test_check_path_segments_with_custom_delim() -> None:
    with pytest.raises(KeyNameError):
        check_path_segments("a_.._b", "_")
    with pytest.raises(KeyNameError):
        check_path_segments("a_x/../y", "_")  # '/' traversal caught even when the delimiter is '_'
    assert check_path_segments("a_b", "_") == "a_b"


def test_naming_settings_validation() -> None:
    with pytest.raises(ValueError):
        NamingSettings(file_delim="1")
    with pytest.raises(ValueError):
        NamingSettings(zero_pad_width=-1)
    with pytest.raises(KeyNameError):
        NS.offset_text(-1)


kafka_topic = st.text(alphabet="abcXYZ019._-", min_size=1, max_size=20)


@settings(max_examples=300, deadline=None)
@given(topic=st.one_of(kafka_topic, st.text(max_size=12)), values=st.lists(st.one_of(st.text(max_size=12), st.integers(), st.booleans(), st.none()), min_size=1, max_size=3))
def test_no_key_escapes_topics_dir(topic: str, values: list) -> None:
    fields = [f"f{i}" for i in range(len(values))]
    rec = SinkRecord(topic, 0, 0, None, None, dict(zip(fields, values)))
    try:
        enc = FieldPartitioner(fields).encode_partition(rec)
        key = value_key(NS, topic, 0, enc, 0, ".json")
    except KeyNameError:
        return
    assert key.startswith(f"topics/{topic}/")
    segments = key.split("/")
    assert all(s not in ("", ".", "..") for s in segments)
    assert "\\" not in key
    # one directory per field: the encoded values never add segments
    assert len(segments) == 2 + len(fields) + 1
    assert parse_key(key, NS, ".json").topic == topic


def test_metadata_side_key_and_parse():
    from lakesink.config import SinkConfig
    from lakesink import wiring

    ns = NamingSettings()
    vk = value_key(ns, "t", 0, "partition=0", 42, ".avro")
    mk = side_key(vk, ".avro", "metadata", ".avro")
    assert mk == "topics/t/partition=0/t+0+0000000042.metadata.avro"
    exts = KeyExtensions(".avro", keys=".avro", headers=".avro", metadata=".avro")
    assert parse_key(mk, ns, exts).view == "metadata"
    assert parse_key(vk, ns, exts).view == "value"
    assert parse_key(side_key(vk, ".avro", "keys", ".avro"), ns, exts).view == "keys"
    with pytest.raises(KeyNameError):  # not stored: not one of this job's keys
        parse_key(mk, ns, KeyExtensions(".json"))
    cfg = SinkConfig.from_dict({"name": "j", "topics": "t", "s3.bucket.name": "bkt", "manifest.location": "/m", "flush.size": "3",
                                "kafka.bootstrap.servers": "x:1"})
    assert cfg.store_kafka_metadata is True and wiring.key_extensions(cfg).metadata == ".avro"
    off = SinkConfig.from_dict({"name": "j", "topics": "t", "s3.bucket.name": "bkt", "manifest.location": "/m", "flush.size": "3",
                                "kafka.bootstrap.servers": "x:1", "store.kafka.metadata": "false"})
    assert wiring.key_extensions(off).metadata is None and wiring.metadata_format(off) is None
