"""Per-format behaviour lives on the format classes (issue #27): the options a config gives, the compression the
manifest records, the index side file, the record-bytes rules and the columnar kinds, one class at a time."""
from __future__ import annotations

import types

import pytest

from lakesink import plugins, wiring
from lakesink.config import SinkConfig
from lakesink.executor.readback import record_bytes_rules
from lakesink.objects.formats import FORMAT_NAMES, create

BASE = {"name": "job", "topics": "a", "flush.size": "3", "s3.bucket.name": "bkt",
        "manifest.location": "s3a://bkt/manifest", "kafka.bootstrap.servers": "localhost:9092",
        "avro.codec": "deflate", "parquet.codec": "zstd", "blockgzip.compression": "bzip2"}


def cfg(fmt: str) -> SinkConfig:
    extra = {"s3.compression.type": "gzip"} if fmt in ("json", "bytearray") else {}
    return SinkConfig.from_dict({**BASE, **extra, "format.class": fmt})


@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_options_from_a_config_build_the_format(name: str) -> None:
    c = cfg(name)
    n, opts = wiring.format_spec(c, name)
    assert n == name and create(n, **opts).name == name


@pytest.mark.parametrize("name, compression", [("avro", "deflate"), ("parquet", "zstd"), ("json", "gzip"),
                                               ("bytearray", "gzip"), ("blockgzip", "bzip2")])
def test_value_compression_is_the_formats_own_setting(name: str, compression: str) -> None:
    assert wiring.value_compression(cfg(name)) == compression


def test_only_blockgzip_has_an_index_and_only_avro_parquet_one_schema_per_file() -> None:
    assert {n for n in FORMAT_NAMES if plugins.load("format", n).has_index} == {"blockgzip"}
    assert {n for n in FORMAT_NAMES if plugins.load("format", n).schema_per_file} == {"avro", "parquet"}
    assert wiring.key_extensions(cfg("blockgzip")).index and not wiring.key_extensions(cfg("json")).index


def test_every_format_states_its_record_bytes_rule() -> None:
    rules = record_bytes_rules()
    assert set(rules) == set(FORMAT_NAMES) and all(rules.values())


def test_columnar_kind_per_format() -> None:
    dec = lambda **kw: types.SimpleNamespace(**{"wire_format": False, "fixed_schema": None, "envelope": False, **kw})  # noqa: E731
    fixed = object()
    assert create("bytearray").columnar_kind(dec(name="bytes")) == "bytes"
    assert create("bytearray").columnar_kind(dec(name="avro")) is None
    assert create("avro").columnar_kind(dec(name="avro", fixed_schema=fixed)) == "avro"
    assert create("avro").columnar_kind(dec(name="avro", wire_format=True)) == "avro_wire"
    assert create("avro", fast_path=False).columnar_kind(dec(name="avro", wire_format=True)) is None
    assert create("parquet").columnar_kind(dec(name="avro", fixed_schema=fixed)) == "parquet"
    assert create("parquet").columnar_kind(dec(name="avro", wire_format=True)) is None
    assert create("json").columnar_kind(dec(name="json")) == "json"
    assert create("json", decimal_format="NUMERIC").columnar_kind(dec(name="json")) is None
    assert create("blockgzip").columnar_kind(dec(name="json")) is None


def test_json_keys_file_gives_bytes_keys_back_from_base64() -> None:
    import io

    from lakesink.objects.formats.base import RecordView
    from lakesink.objects.records import SinkRecord

    fmt, out = create("json"), io.BytesIO()
    with fmt.open_writer(out, RecordView.KEYS) as w:
        w.write(SinkRecord("t", 0, 0, 0, key=b"\x00\xff", value=b"v"))
    assert fmt.key_bytes(out.getvalue(), "bytes").to_pylist() == [b"\x00\xff"]  # a column (pyarrow)
    assert fmt.key_bytes(out.getvalue(), "string").to_pylist() == [b"AP8="]


def test_writer_schema_reads_only_what_the_format_carries() -> None:
    import io

    from lakesink.objects.formats.base import RecordView
    from lakesink.objects.records import SinkRecord

    def never(*_a):
        raise AssertionError("a format without a writer schema read bytes")

    assert create("json").writer_schema(never, never) is None and create("bytearray").writer_schema(never, never) is None
    out = io.BytesIO()
    with create("avro").open_writer(out, RecordView.VALUE) as w:
        w.write(SinkRecord("t", 0, 0, 0, key=None, value=b"v" * 100_000))
    data, reads = out.getvalue(), []

    def read_range(start: int, end: int) -> bytes:
        reads.append((start, end))
        return data[start:end + 1]

    assert create("avro").writer_schema(read_range, never) == "bytes"
    assert reads == [(0, 4095)]  # the header only, not the 100 kB object


def test_config_validation_asks_the_format_classes_which_views_and_compression_they_take(monkeypatch) -> None:
    """keys/headers format and gzip checks follow each class's supports_view / takes_s3_compression, not names."""
    from lakesink.errors import ConfigError
    from lakesink.objects.formats.base import RecordView
    from lakesink.objects.formats.blockgzip import BlockGzipFormat
    from lakesink.objects.formats.parquet import ParquetFormat

    with pytest.raises(ConfigError, match="keys.format.class"):
        SinkConfig.from_dict({**BASE, "keys.format.class": "blockgzip"})
    with pytest.raises(ConfigError, match="only supported with json or bytearray"):
        SinkConfig.from_dict({**BASE, "format.class": "parquet", "s3.compression.type": "gzip"})
    monkeypatch.setattr(BlockGzipFormat, "supports_view",
                        classmethod(lambda cls, view: view in (RecordView.VALUE, RecordView.KEYS)))
    monkeypatch.setattr(ParquetFormat, "takes_s3_compression", True)
    c = SinkConfig.from_dict({**BASE, "keys.format.class": "blockgzip", "format.class": "parquet",
                              "s3.compression.type": "gzip"})
    assert (c.keys_format_name, c.format_name) == ("blockgzip", "parquet")
