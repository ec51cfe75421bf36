"""Partitioners, timestamp extractors, tombstone wrapper and custom loading (lakesink.objects.partitioners)."""
import sys
from datetime import datetime, timezone

import pytest

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.errors import ConfigError, PartitionError
from lakesink.objects.partitioners import (
    DailyPartitioner,
    DefaultPartitioner,
    FieldPartitioner,
    HourlyPartitioner,
    Partitioner,
    RecordExtractor,
    RecordFieldExtractor,
    TimeBasedPartitioner,
    TombstonePartitioner,
    WallclockExtractor,
)
from lakesink.objects.records import SinkRecord

BASE = {"name": "j", "topics": "t", "flush.size": "3", "s3.bucket.name": "bkt",
        "manifest.location": "/tmp/m", "kafka.bootstrap.servers": "k:9092"}


def rec(value=None, offset=0, ts=None, partition=0, topic="t") -> SinkRecord:
    return SinkRecord(topic, partition, offset, ts, None, value)


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def test_default() -> None:
    p = DefaultPartitioner()
    assert p.encode_partition(rec({"a": 1}, partition=7)) == "partition=7"
    assert p.partitioned_path("t", "partition=7") == "t/partition=7"
    assert p.time_based is False and p.extract_timestamp(rec(), 5) is None


def test_field_values_follow_confluent_rules() -> None:
    p = FieldPartitioner(["region", "n", "flag", "missing_ok", "nested.id"])
    v = {"region": "eu", "n": -3, "flag": True, "missing_ok": None, "nested": {"id": 42}}
    assert p.encode_partition(rec(v)) == "region=eu/n=-3/flag=true/missing_ok=null/nested.id=42"


def test_field_two_fields_custom_delim() -> None:
    p = FieldPartitioner(["region", "type"], directory_delim="_")
    assert p.encode_partition(rec({"region": "eu", "type": "a"})) == "region=eu_type=a"
    assert p.partitioned_path("t", "region=eu_type=a") == "t_region=eu_type=a"


@pytest.mark.parametrize("bad", [1.5, b"x", {"a": 1}, [1]])
def test_field_unsupported_types(bad) -> None:
    with pytest.raises(PartitionError, match="unsupported type"):
        FieldPartitioner(["f"]).encode_partition(rec({"f": bad}))


def test_field_errors_name_the_record() -> None:
    with pytest.raises(PartitionError) as ei:
        FieldPartitioner(["nope"]).encode_partition(rec({"f": 1}, offset=17, partition=2, topic="orders"))
    e = ei.value
    assert (e.topic, e.partition, e.offset) == ("orders", 2, 17) and "nope" in e.reason
    with pytest.raises(PartitionError, match="record/object value"):
        FieldPartitioner(["f"]).encode_partition(rec("a string"))
    with pytest.raises(PartitionError, match="not found"):
        FieldPartitioner(["a.b"]).encode_partition(rec({"a": 1}))


def test_field_value_with_slash_is_one_segment() -> None:
    assert FieldPartitioner(["f"]).encode_partition(rec({"f": "a/../b"})) == "f=a%2F..%2Fb"


def test_time_based_record_extractor_and_trailing_delim() -> None:
    p = TimeBasedPartitioner("'dt'=YYYY-MM-dd/'hr'=HH/", 3_600_000, "UTC", "en", RecordExtractor())
    r = rec({"x": 1}, ts=ms("2026-02-03T04:05:06+00:00"))
    ts = p.extract_timestamp(r, now_ms=0)
    assert p.encode_partition(r, ts) == "dt=2026-02-03/hr=04"
    with pytest.raises(PartitionError, match="no timestamp"):
        p.extract_timestamp(rec({"x": 1}, ts=None), 0)
    with pytest.raises(PartitionError):
        p.encode_partition(r, None)


def test_wallclock_uses_now() -> None:
    p = TimeBasedPartitioner("YYYY", 3_600_000, "UTC", "en", WallclockExtractor())
    assert p.extract_timestamp(rec({"x": 1}, ts=0), now_ms=ms("2031-01-01T00:00:00+00:00")) == ms("2031-01-01T00:00:00+00:00")


@pytest.mark.parametrize(
    "value,expected",
    [
        (1_700_000_000_123, 1_700_000_000_123),
        (1_700_000_000_123.9, 1_700_000_000_123),
        ("1700000000123", 1_700_000_000_123),
        ("-5", -5),
        ("2026-01-02T03:04:05.678Z", ms("2026-01-02T03:04:05.678+00:00")),
        ("2026-01-02T03:04:05+02:00", ms("2026-01-02T01:04:05+00:00")),
        ("2026-01-02T03:04:05", ms("2026-01-02T03:04:05+00:00")),  # zone-less → UTC (documented)
        (datetime(2026, 1, 2, tzinfo=timezone.utc), ms("2026-01-02T00:00:00+00:00")),
    ],
)
def test_record_field_extractor(value, expected) -> None:
    assert RecordFieldExtractor("meta.ts").extract(rec({"meta": {"ts": value}}), 0) == expected


@pytest.mark.parametrize("value", ["yesterday", True, None, [1], "12345678901234567890"])
def test_record_field_extractor_rejects(value) -> None:
    with pytest.raises(PartitionError):
        RecordFieldExtractor("ts").extract(rec({"ts": value}), 0)
    with pytest.raises(PartitionError, match="not found"):
        RecordFieldExtractor("ts").extract(rec({"other": 1}), 0)


def test_daily_and_hourly_force_formats() -> None:
    t = ms("2015-12-07T15:30:00+00:00")
    assert DailyPartitioner("UTC").encode_partition(rec({}), t) == "year=2015/month=12/day=07"
    assert HourlyPartitioner("UTC").encode_partition(rec({}), t) == "year=2015/month=12/day=07/hour=15"
    assert HourlyPartitioner("UTC", directory_delim="_").encode_partition(rec({}), t) == "year=2015_month=12_day=07_hour=15"


def test_tombstone_wrapper() -> None:
    inner = TimeBasedPartitioner("YYYY", 86_400_000, "UTC", "en", RecordFieldExtractor("ts"))
    p = TombstonePartitioner(inner, "deleted")
    assert p.time_based
    tomb = rec(None, ts=ms("2020-05-05T00:00:00+00:00"))
    assert p.extract_timestamp(tomb, 0) == ms("2020-05-05T00:00:00+00:00")  # record time, not the field
    assert p.encode_partition(tomb, 0) == "deleted"
    live = rec({"ts": ms("2021-01-01T00:00:00+00:00")})
    assert p.encode_partition(live, p.extract_timestamp(live, 0)) == "2021"
    with pytest.raises(PartitionError):
        p.extract_timestamp(rec(None, ts=None), 0)
    d = TombstonePartitioner(DefaultPartitioner())
    assert d.encode_partition(rec(None)) == "tombstone" and d.extract_timestamp(rec(None), 0) is None


def test_config_builds_partitioners() -> None:
    cfg = SinkConfig.from_dict({**BASE, "partitioner.class": "field", "partition.field.name": "a,b"})
    assert wiring.partitioner(cfg).encode_partition(rec({"a": 1, "b": "x"})) == "a=1/b=x"
    cfg = SinkConfig.from_dict({**BASE, "partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
                                "path.format": "YYYY/MM/", "partition.duration.ms": "86400000", "locale": "en",
                                "timezone": "UTC", "timestamp.extractor": "RecordField", "timestamp.field": "when"})
    p = wiring.partitioner(cfg)
    r = rec({"when": "2026-04-05T00:00:00Z"})
    assert p.encode_partition(r, p.extract_timestamp(r, 0)) == "2026/04"
    cfg = SinkConfig.from_dict({**BASE, "behavior.on.null.values": "write", "store.kafka.keys": "true"})
    assert isinstance(wiring.partitioner(cfg), TombstonePartitioner)


CUSTOM = '''
from lakesink.objects.partitioners import Partitioner

class ByKey(Partitioner):
    def __init__(self, config):
        self.directory_delim = config.directory_delim
        self.prefix = config.name
    def encode_partition(self, record, timestamp_ms=None):
        return f"key={record.key}"

class NotOne:
    pass
'''


def test_custom_partitioner(tmp_path, monkeypatch) -> None:
    (tmp_path / "my_parts.py").write_text(CUSTOM)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = SinkConfig.from_dict({**BASE, "partitioner.class": "my_parts.ByKey"})
    p = wiring.partitioner(cfg)
    assert isinstance(p, Partitioner) and p.prefix == "j"
    assert p.encode_partition(SinkRecord("t", 0, 0, None, "k1", {})) == "key=k1"
    with pytest.raises(ConfigError, match="not a subclass"):
        SinkConfig.from_dict({**BASE, "partitioner.class": "my_parts.NotOne"})
    with pytest.raises(ConfigError, match="has no attribute"):
        SinkConfig.from_dict({**BASE, "partitioner.class": "my_parts.Missing"})
    with pytest.raises(ConfigError, match="cannot import"):
        SinkConfig.from_dict({**BASE, "partitioner.class": "no_such_pkg_xyz.Part"})
    sys.modules.pop("my_parts", None)
