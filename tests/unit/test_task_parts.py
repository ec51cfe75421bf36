"""What a task receives: :class:`lakesink.wiring.TaskParts`, built once per run in place of the config."""
from __future__ import annotations

import ast
import dataclasses
import pickle
import sys
from pathlib import Path

import pytest

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.errors import InvalidArgumentError
from lakesink.executor.archive_tasks import ObjectReader
from lakesink.executor.readback import ArchivedObject
from lakesink.objects.formats import FormatSpec

EXECUTOR = Path(__file__).resolve().parents[2] / "lakesink" / "executor"
BASE = {"name": "job", "topics": "a", "flush.size": "3", "s3.bucket.name": "bkt",
        "manifest.location": "s3a://bkt/manifest", "kafka.bootstrap.servers": "localhost:9092"}


def config(**extra: str) -> SinkConfig:
    return SinkConfig.from_dict({**BASE, **extra})


def test_parts_are_frozen_and_survive_pickling():
    parts = wiring.task_parts(config(**{
        "format.class": "json", "s3.compression.type": "gzip", "store.kafka.keys": "true",
        "keys.format.class": "json", "headers.format.class": "json", "store.kafka.headers": "true",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq",
        "transforms.sql": "SELECT * FROM records WHERE value IS NOT NULL"}))
    again = pickle.loads(pickle.dumps(parts))
    assert again == parts
    with pytest.raises(dataclasses.FrozenInstanceError):
        parts.store_keys = False  # type: ignore[misc]
    assert (parts.value_format, parts.value_compression) == (("json", {"compression": "gzip",
                                                                       "compression_level": -1}), "gzip")
    assert parts.dead_letters is not None and parts.dead_letters.topic == "dlq"
    assert parts.transforms is not None and parts.transforms.build().sql is not None
    assert parts.key_decoder.build().name == "bytes"


def test_parts_hold_no_config():
    """Nothing in the value is the config or carries it (a task cannot reach a key it was not given)."""
    parts = wiring.task_parts(config())
    assert not any(isinstance(getattr(parts, f.name), SinkConfig) for f in dataclasses.fields(parts))
    assert b"SinkConfig" not in pickle.dumps(parts)


def test_dead_letters_off_without_tolerance_all():
    assert wiring.task_parts(config()).dead_letters is None


def test_objects_of_another_format_are_read_with_this_configs_options():
    """A job that moved from bytearray to json still reads its bytearray objects with its separator."""
    parts = wiring.task_parts(config(**{"format.class": "json", "format.bytearray.separator": "|"}))
    assert parts.format_spec("bytearray").options["separator"] == b"|"
    assert parts.format_spec("io.confluent.connect.s3.format.bytearray.ByteArrayFormat").name == "bytearray"
    with pytest.raises(InvalidArgumentError, match="unknown format 'nope'"):
        parts.format_spec("nope")


def test_an_objects_compression_replaces_the_configured_one_where_reading_needs_it():
    assert FormatSpec("json", {"compression": "none"}).build("gzip").extension == ".json.gz"
    assert FormatSpec("blockgzip", {"compression": "gzip"}).build("bzip2").compression == "bzip2"
    # Avro names its codec in the file: an object's codec does not change the reader
    assert FormatSpec("avro", {"codec": "null"}).build("deflate").codec == "null"


def test_object_reader_builds_each_objects_format_from_the_parts(tmp_path):
    parts = wiring.task_parts(config(**{"format.class": "json", "store.url": f"file://{tmp_path}",
                                        "format.bytearray.separator": "|"}))
    reader = ObjectReader(parts)
    row = {"topic": "a", "kafka_partition": 0, "first_offset": 0, "last_offset": 2, "record_count": 3,
           "object_key": "topics/a/partition=0/a+0+0000000000.bin", "etag": None, "version_id": None,
           "format": "bytearray", "compression": "gzip"}
    fmt = reader.value_format(ArchivedObject.from_row(row))
    assert (fmt.name, fmt.separator, fmt.extension) == ("bytearray", b"|", ".bin.gz")
    assert reader.value_format(ArchivedObject.from_row({**row, "format": None, "compression": None})).name == "json"


CUSTOM = '''
from lakesink.objects.partitioners import Partitioner

class Counting(Partitioner):
    built = 0

    def __init__(self, config):
        type(self).built += 1
        self.prefix = config.name
        self.seen = 0

    def encode_partition(self, record):
        self.seen += 1
        return "all"
'''


def test_a_custom_partitioner_is_built_once_and_each_task_gets_its_own_copy(tmp_path, monkeypatch):
    (tmp_path / "counting_parts.py").write_text(CUSTOM)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        parts = wiring.task_parts(config(**{"partitioner.class": "counting_parts.Counting"}))
        cls = type(parts.custom_partitioner)
        built = cls.built
        first, second = parts.partitioner(), parts.partitioner()
        assert cls.built == built  # copies, not new constructions with a config the task does not have
        assert first is not second and parts.custom_partitioner.prefix == "job"
        assert pickle.loads(pickle.dumps(parts)).custom_partitioner.prefix == "job"
    finally:
        sys.modules.pop("counting_parts", None)


def _wiring_calls_and_config_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "wiring":
            bad.append(f"{path.name}:{node.lineno}: wiring.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module and (
                node.module == "lakesink.config" or node.module.startswith("lakesink.config.model")):
            bad.append(f"{path.name}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Name) and node.id == "SinkConfig":
            bad.append(f"{path.name}:{node.lineno}: SinkConfig")
    return bad


def test_task_code_is_given_parts_never_the_config():
    """Executor modules build nothing from a config: no wiring call, no SinkConfig (type hints included)."""
    bad = [b for p in sorted(EXECUTOR.glob("*.py")) for b in _wiring_calls_and_config_imports(p)]
    assert not bad, "\n".join(bad)


def test_the_check_sees_a_config_in_task_code(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from lakesink import wiring\nfrom lakesink.config import SinkConfig\n"
                     "def f(cfg: SinkConfig):\n    return wiring.naming(cfg)\n")
    assert len(_wiring_calls_and_config_imports(probe)) == 3
