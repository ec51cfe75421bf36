"""Golden object keys: config → partitioner → Rotator → naming, end to end (no I/O).

Expected keys are Confluent's, derived from its code (spec §1, §3) and Joda-Time semantics.
"""
from datetime import datetime

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.objects.naming import NamingSettings, parse_key, value_key
from lakesink.objects.partitioners import DefaultPartitioner
from lakesink.objects.records import SinkRecord
from lakesink.objects.rotation import Commit, RotationPolicy, Rotator

BASE = {"name": "g", "s3.bucket.name": "bkt", "manifest.location": "/tmp/m", "kafka.bootstrap.servers": "k:9092"}


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def keys_for(cfg: SinkConfig, records: list[SinkRecord], ext: str, start: int = 0) -> list[str]:
    """Committed value keys, in commit order, for one Kafka partition."""
    part, naming = wiring.partitioner(cfg), wiring.naming(cfg)
    rot = Rotator(wiring.rotation_policy(cfg), part, start, clock=lambda: 0)
    events = [e for r in records for e in rot.process(r)] + rot.finish(flush_tail=True)
    out = []
    for e in events:
        if isinstance(e, Commit):
            for f in e.files:
                prefix = part.partitioned_path(records[0].topic, f.encoded_partition)
                out.append(value_key(naming, records[0].topic, records[0].partition, f.encoded_partition,
                                     f.start_offset, ext, prefix=prefix))
    return out


def test_confluent_quickstart() -> None:
    # docs quickstart: topic s3_topic, 9 Avro records, flush.size=3, DefaultPartitioner
    cfg = SinkConfig.from_dict({**BASE, "topics": "s3_topic", "flush.size": "3",
                                "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
                                "partitioner.class": "io.confluent.connect.storage.partitioner.DefaultPartitioner"})
    recs = [SinkRecord("s3_topic", 0, o, None, None, {"f1": f"value{o}"}) for o in range(9)]
    assert keys_for(cfg, recs, ".avro") == [
        "topics/s3_topic/partition=0/s3_topic+0+0000000000.avro",
        "topics/s3_topic/partition=0/s3_topic+0+0000000003.avro",
        "topics/s3_topic/partition=0/s3_topic+0+0000000006.avro",
    ]


def test_spec_example_key() -> None:
    cfg = SinkConfig.from_dict({**BASE, "topics": "orders", "flush.size": "100"})
    recs = [SinkRecord("orders", 3, 1200 + i, None, None, {"i": i}) for i in range(5)]
    assert keys_for(cfg, recs, ".avro", start=1200) == ["topics/orders/partition=3/orders+3+0000001200.avro"]


def test_field_partitioner_two_fields() -> None:
    cfg = SinkConfig.from_dict({**BASE, "topics": "t", "flush.size": "10", "format.class": "json",
                                "partitioner.class": "field", "partition.field.name": "region,type"})
    recs = [SinkRecord("t", 0, 0, None, None, {"region": "eu", "type": "a"}),
            SinkRecord("t", 0, 1, None, None, {"region": "us", "type": "b"}),
            SinkRecord("t", 0, 2, None, None, {"region": "eu", "type": "a"})]
    assert keys_for(cfg, recs, ".json") == ["topics/t/region=eu/type=a/t+0+0000000000.json",
                                            "topics/t/region=us/type=b/t+0+0000000001.json"]


def _ny(kind: str) -> SinkConfig:
    return SinkConfig.from_dict({**BASE, "topics": "t", "flush.size": "100", "format.class": "json",
                                 "partitioner.class": kind, "locale": "en-US", "timezone": "America/New_York",
                                 "timestamp.extractor": "Record"})


def _recs(*isos: str) -> list[SinkRecord]:
    return [SinkRecord("t", 0, i, ms(iso), None, {"i": i}) for i, iso in enumerate(isos)]


def test_hourly_spring_forward_2026_new_york() -> None:
    # 2026-03-08 02:00 EST jumps to 03:00 EDT (07:00Z). Local hour 02 never exists, so no hour=02
    # directory: 06:30Z is 01:30 EST (bucket 01:00 EST = 06:00Z), 07:30Z is 03:30 EDT (bucket 03:00).
    keys = keys_for(_ny("hourly"), _recs("2026-03-08T05:30:00+00:00", "2026-03-08T06:30:00+00:00",
                                        "2026-03-08T07:30:00+00:00", "2026-03-08T08:30:00+00:00"), ".json")
    assert keys == [
        "topics/t/year=2026/month=03/day=08/hour=00/t+0+0000000000.json",
        "topics/t/year=2026/month=03/day=08/hour=01/t+0+0000000001.json",
        "topics/t/year=2026/month=03/day=08/hour=03/t+0+0000000002.json",
        "topics/t/year=2026/month=03/day=08/hour=04/t+0+0000000003.json",
    ]


def test_hourly_fall_back_2026_new_york() -> None:
    # 2026-11-01 02:00 EDT falls back to 01:00 EST (06:00Z): local 01:xx happens twice.
    # 05:30Z = 01:30 EDT and 06:30Z = 01:30 EST both have local bucket 01:00; Joda's
    # convertLocalToUTC(01:00, false) picks the earlier offset (EDT) → 05:00Z, printed hour=01.
    # Both records therefore share ONE file (start offset 1), as in Confluent.
    keys = keys_for(_ny("hourly"), _recs("2026-11-01T04:30:00+00:00", "2026-11-01T05:30:00+00:00",
                                        "2026-11-01T06:30:00+00:00", "2026-11-01T07:30:00+00:00"), ".json")
    assert keys == [
        "topics/t/year=2026/month=11/day=01/hour=00/t+0+0000000000.json",
        "topics/t/year=2026/month=11/day=01/hour=01/t+0+0000000001.json",
        "topics/t/year=2026/month=11/day=01/hour=02/t+0+0000000003.json",
    ]


def test_daily_across_2026_dst_changes_new_york() -> None:
    # Days are local days: 2026-03-08 lasts 23 h (05:00Z..04:00Z next day), 2026-11-01 lasts 25 h
    # (04:00Z..05:00Z next day). Each record sits one second either side of a local midnight.
    keys = keys_for(_ny("daily"), _recs(
        "2026-03-08T04:59:59+00:00",  # 03-07 23:59:59 EST
        "2026-03-08T05:00:00+00:00",  # 03-08 00:00 EST
        "2026-03-09T03:59:59+00:00",  # 03-08 23:59:59 EDT (same 23-hour day)
        "2026-03-09T04:00:00+00:00",  # 03-09 00:00 EDT
        "2026-11-01T03:59:59+00:00",  # 10-31 23:59:59 EDT
        "2026-11-01T04:00:00+00:00",  # 11-01 00:00 EDT
        "2026-11-02T04:59:59+00:00",  # 11-01 23:59:59 EST (same 25-hour day)
        "2026-11-02T05:00:00+00:00",  # 11-02 00:00 EST
    ), ".json")
    assert keys == [
        "topics/t/year=2026/month=03/day=07/t+0+0000000000.json",
        "topics/t/year=2026/month=03/day=08/t+0+0000000001.json",
        "topics/t/year=2026/month=03/day=09/t+0+0000000003.json",
        "topics/t/year=2026/month=10/day=31/t+0+0000000004.json",
        "topics/t/year=2026/month=11/day=01/t+0+0000000005.json",
        "topics/t/year=2026/month=11/day=02/t+0+0000000007.json",
    ]


def test_padding_width_zero_and_long_offsets() -> None:
    cfg = SinkConfig.from_dict({**BASE, "topics": "t", "flush.size": "1", "filename.offset.zero.pad.width": "0"})
    assert keys_for(cfg, [SinkRecord("t", 0, 7, None, None, {})], ".avro", start=7) == ["topics/t/partition=0/t+0+7.avro"]
    cfg = SinkConfig.from_dict({**BASE, "topics": "t", "flush.size": "1"})
    big = 12_345_678_901
    assert keys_for(cfg, [SinkRecord("t", 0, big, None, None, {})], ".avro", start=big) == [
        "topics/t/partition=0/t+0+12345678901.avro"]


def test_custom_delimiters_and_topics_dir() -> None:
    cfg = SinkConfig.from_dict({**BASE, "topics": "t", "flush.size": "2", "topics.dir": "archive",
                                "directory.delim": "_", "file.delim": "-", "filename.offset.zero.pad.width": "5"})
    keys = keys_for(cfg, [SinkRecord("t", 4, o, None, None, {}) for o in range(3)], ".avro")
    assert keys == ["archive_t_partition=4_t-4-00000.avro", "archive_t_partition=4_t-4-00002.avro"]
    assert parse_key(keys[1], wiring.naming(cfg), ".avro").start_offset == 2


def test_blank_topics_dir() -> None:
    ns = NamingSettings(topics_dir="")
    rot = Rotator(RotationPolicy(flush_size=1), DefaultPartitioner(), 0, clock=lambda: 0)
    (c,) = [e for e in rot.process(SinkRecord("t", 0, 0, None, None, {})) if isinstance(e, Commit)]
    assert value_key(ns, "t", 0, c.files[0].encoded_partition, 0, ".json") == "t/partition=0/t+0+0000000000.json"
