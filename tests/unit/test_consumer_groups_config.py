"""``consumer.groups`` / ``consumer.groups.regex`` (the sink records those groups' offsets), the groups table's
newest-observation rule and the restore's --groups argument checks: no services."""
from __future__ import annotations

import datetime as dt

import pytest

from lakesink.config import SinkConfig
from lakesink.errors import ConfigError, InvalidArgumentError

BASE = {"name": "job", "topics": "a,b", "flush.size": "3", "s3.bucket.name": "bkt",
        "manifest.location": "s3a://bkt/manifest", "kafka.bootstrap.servers": "localhost:9092"}


def problems(values: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as ei:
        SinkConfig.from_dict({**BASE, **values})
    return {p.key: p.message for p in ei.value.problems}


def test_keys_parse_and_default_to_nothing():
    cfg = SinkConfig.from_dict({**BASE, "consumer.groups": "orders-app, billing", "consumer.groups.regex": "team-.*"})
    assert cfg.consumer_groups == ("orders-app", "billing") and cfg.consumer_groups_regex == "team-.*"
    plain = SinkConfig.from_dict(BASE)
    assert plain.consumer_groups == () and plain.consumer_groups_regex is None
    assert SinkConfig.from_dict(cfg.as_dict(redact=False)).consumer_groups == ("orders-app", "billing")


def test_bad_values_name_the_key():
    got = problems({"consumer.groups.regex": "team-(", "consumer.groups": "ok,bad group"})
    assert "invalid regular expression" in got["consumer.groups.regex"]
    assert "is not a consumer group id" in got["consumer.groups"]


def test_groups_location_next_to_the_manifest():
    from lakesink.manifest.groups import groups_location

    assert groups_location("s3a://bkt/_lakesink/manifest") == "s3a://bkt/_lakesink/manifest_groups"
    assert groups_location("main.archive.manifest") == "main.archive.manifest_groups"


def test_latest_offsets_newest_observation_per_group_and_partition():
    import pyarrow as pa

    from lakesink.manifest.groups import GroupOffsetRow, arrow_schema, latest_offsets

    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    rows = [GroupOffsetRow("job", "r1", 1, "g", "a", 0, 5, None, t0),
            GroupOffsetRow("job", "r1", 2, "g", "a", 0, 9, "m", t0 + dt.timedelta(minutes=1)),
            GroupOffsetRow("job", "r1", 2, "h", "a", 0, 3, None, t0 + dt.timedelta(minutes=1)),
            GroupOffsetRow("job", "r1", 2, "team-x", "a", 1, 4, None, t0),
            GroupOffsetRow("other", "r9", 7, "g", "a", 0, 99, None, t0 + dt.timedelta(hours=1))]
    from dataclasses import asdict

    table = pa.Table.from_pylist([asdict(r) for r in rows], schema=arrow_schema())
    every = latest_offsets(table, "job")
    assert {k: v["committed_offset"] for k, v in every.items()} == {("g", "a", 0): 9, ("h", "a", 0): 3,
                                                                    ("team-x", "a", 1): 4}
    assert every[("g", "a", 0)]["metadata"] == "m"
    union = latest_offsets(table, "job", {"g"}, "team-.*")
    assert set(union) == {("g", "a", 0), ("team-x", "a", 1)}
    earlier = latest_offsets(table, "job", {"g"}, as_of=t0)
    assert earlier[("g", "a", 0)]["committed_offset"] == 5


def test_restore_groups_arguments():
    from lakesink.driver.restore_groups import parse_groups

    assert parse_groups("a, b", None) == (("a", "b"), None)
    assert parse_groups(["a"], "x.*") == (("a",), "x.*")
    with pytest.raises(InvalidArgumentError, match="--groups-regex"):
        parse_groups(None, "(")
    with pytest.raises(InvalidArgumentError, match="is not a consumer group id"):
        parse_groups("a,,b", None)
