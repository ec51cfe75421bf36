"""lakesink.plugins: one name table and one alias table per kind, used by config, formats and decoders."""
from __future__ import annotations

import pytest

from lakesink import plugins, wiring
from lakesink.config import SinkConfig
from lakesink.errors import ConfigError

BASE = {"name": "j", "topics": "t", "flush.size": "3", "s3.bucket.name": "bkt", "manifest.location": "/tmp/m",
        "kafka.bootstrap.servers": "k:9092"}


@pytest.mark.parametrize("kind,name,short", [
    ("format", "avro", "avro"), ("format", "AVRO", "avro"), ("format", "AvroFormat", "avro"),
    ("format", "io.confluent.connect.s3.format.json.JsonFormat", "json"),
    ("format", "lakesink.formats.BlockGzipFormat", "blockgzip"),
    ("format", "io.confluent.connect.s3.format.json.jsonformat", None),  # class names: exact spelling
    ("format", "nope", None),
    ("decoder", "org.apache.kafka.connect.converters.ByteArrayConverter", "bytes"), ("decoder", "BYTEARRAY", "bytes"),
    ("partitioner", "io.confluent.connect.storage.partitioner.TimeBasedPartitioner", "time"),
    ("partitioner", "TimeBased", "time"), ("partitioner", "Hourly", "hourly"), ("partitioner", "pkg.mod.Cls", None),
])
def test_canonical(kind: str, name: str, short: str | None) -> None:
    assert plugins.canonical(kind, name) == short


def test_every_alias_names_a_registered_short_name() -> None:
    for kind in plugins.KINDS:
        assert set(plugins.ALIASES[kind].values()) <= set(plugins.names(kind))


def test_load_imports_once_and_caches() -> None:
    from lakesink.objects.formats.avro import AvroFormat
    from lakesink.objects.partitioners import DailyPartitioner

    assert plugins.load("format", "io.confluent.connect.s3.format.avro.AvroFormat") is AvroFormat
    assert plugins.load("format", "avro") is plugins.load("format", "AVRO")
    assert plugins.load("partitioner", "io.confluent.connect.storage.partitioner.DailyPartitioner") is DailyPartitioner
    with pytest.raises(ValueError, match="unknown format 'x'"):
        plugins.load("format", "x")
    with pytest.raises(ValueError, match="not a subclass"):
        plugins.load("partitioner", "collections.OrderedDict")


def test_config_and_factories_agree() -> None:
    """Every format alias the config accepts is one ``formats.create`` accepts, and vice versa."""
    from lakesink.objects import formats

    for alias, short in plugins.ALIASES["format"].items():
        cfg = SinkConfig.from_dict({**BASE, "format.class": alias})
        assert cfg.format_name == short
        assert formats.create(alias).extension == wiring.value_format(cfg).extension
    with pytest.raises(ConfigError, match="format.class"):
        SinkConfig.from_dict({**BASE, "format.class": "nope"})
