"""SinkConfig loading, defaults, aliases, validation and secret masking (lakesink.config)."""
import json
import pickle
import sys
import types
from typing import NamedTuple
from pathlib import Path

import pytest

from lakesink import wiring
import lakesink.objects
from lakesink.config import Secret, SinkConfig, load_config, parse_properties
from lakesink.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "schemas" / "examples"
BASE = {"name": "job", "topics": "a,b", "flush.size": "3", "s3.bucket.name": "bkt",
        "manifest.location": "s3a://bkt/manifest", "kafka.bootstrap.servers": "localhost:9092"}
TIME = {"partitioner.class": "time", "path.format": "'dt'=YYYY-MM-dd", "partition.duration.ms": "86400000",
        "locale": "en", "timezone": "UTC"}


def cfg(**kw) -> SinkConfig:
    return SinkConfig.from_dict({**BASE, **{k.replace("_", "."): v for k, v in kw.items()}})


def problems(values: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as ei:
        SinkConfig.from_dict({**BASE, **values})
    return {p.key: p.message for p in ei.value.problems}


# ----------------------------------------------------------------------------- .properties parser

def test_properties_syntax() -> None:
    text = "\n".join([
        "# comment", "! also a comment", "   ", "a=1", "b : 2", "c 3", "d=x\\", "   y\\", "   z",
        "e = spaced value  ", "f\\=g=h", "uni=caf\\u00e9", "tab=a\\tb", "empty=", "lonely", "path=C:\\\\dir",
        "colon=a:b=c",
    ])
    p = parse_properties(text)
    assert p == {"a": "1", "b": "2", "c": "3", "d": "xyz", "e": "spaced value  ", "f=g": "h", "uni": "café",
                 "tab": "a\tb", "empty": "", "lonely": "", "path": "C:\\dir", "colon": "a:b=c"}


def test_properties_even_backslashes_do_not_continue() -> None:
    assert parse_properties("a=x\\\\\nb=2") == {"a": "x\\", "b": "2"}


# ----------------------------------------------------------------------------- sources

def test_load_properties_example() -> None:
    c = load_config(EXAMPLES / "sink.properties")
    assert c.name == "orders-archive" and c.topics == ("orders", "payments")
    assert c.format_name == "avro" and c.avro_codec == "snappy" and c.partitioner_class == "time"
    assert c.path_format == "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH" and c.timestamp_extractor == "Record"
    assert c.kafka_options == {"bootstrap.servers": "localhost:9092", "security.protocol": "PLAINTEXT"}
    assert c.endpoint_url == "http://localhost:9000" and c.deterministic
    # value.converter (a converter lakesink has a decoder for) and its registry url are read, not ignored
    assert dict(c.ignored_keys).keys() == {"connector.class", "tasks.max"}
    assert c.value_decoder == "avro" and c.registry.url == "http://localhost:8081"
    assert c.source.endswith("sink.properties")


def test_load_connect_json_example_takes_name() -> None:
    c = load_config(EXAMPLES / "sink-connect.json")
    assert c.name == "clicks-archive" and c.topics == () and c.topics_regex == "clicks-.*"
    assert c.format_name == "json" and c.s3_compression_type == "gzip" and c.value_decoder == "json"
    assert c.partition_field_name == ("region", "type") and c.behavior_on_null_values == "ignore"
    assert c.errors_tolerance == "none" and "errors.tolerance" not in dict(c.ignored_keys)  # taken, not ignored


def test_load_yaml_example_nested_keys() -> None:
    c = load_config(EXAMPLES / "sink.yaml")
    assert c.s3_bucket_name == "lakesink-archive" and c.s3_compression_level == 6
    assert c.partitioner_class == "daily" and c.partition_duration_ms == 86_400_000
    assert c.bytearray_separator == b"\n" and c.kafka_starting_offsets == "earliest"
    assert c.batch_max_records == 500000 and c.value_decoder == "bytes"


def test_bare_json_and_dict_and_unknown_suffix(tmp_path) -> None:
    (tmp_path / "c.json").write_text(json.dumps(BASE))
    assert load_config(tmp_path / "c.json").name == "job"
    (tmp_path / "c.cfg").write_text(json.dumps({"name": "n2", "config": {k: v for k, v in BASE.items() if k != "name"}}))
    assert load_config(tmp_path / "c.cfg").name == "n2"
    assert load_config({"name": "n3", "config": {k: v for k, v in BASE.items() if k != "name"}}).name == "n3"
    assert load_config(dict(BASE)).name == "job"


def test_load_errors_name_the_source(tmp_path) -> None:
    p = tmp_path / "bad.properties"
    p.write_text("flush.size=0\n")
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    assert ei.value.source == str(p) and str(p) in str(ei.value)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "x.json").write_text("{nope")
    with pytest.raises(ConfigError, match="invalid JSON"):
        load_config(tmp_path / "x.json")


# ----------------------------------------------------------------------------- defaults, aliases

def test_confluent_defaults() -> None:
    c = SinkConfig.from_dict(BASE)
    assert (c.topics_dir, c.rotate_interval_ms, c.rotate_schedule_interval_ms) == ("topics", -1, -1)
    assert (c.format_name, c.partitioner_class, c.partition_duration_ms, c.path_format) == ("avro", "default", -1, "")
    assert (c.locale, c.timezone, c.timestamp_extractor, c.timestamp_field) == ("", "", "Wallclock", "timestamp")
    assert (c.directory_delim, c.file_delim, c.zero_pad_width) == ("/", "+", 10)
    assert (c.s3_region, c.store_url, c.s3_path_style_access) == ("us-west-2", None, True)
    assert (c.s3_compression_type, c.s3_compression_level, c.avro_codec, c.parquet_codec) == ("none", -1, "null", "snappy")
    assert (c.bytearray_separator, c.bytearray_extension) == (b"\n", ".bin")
    assert (c.store_kafka_keys, c.store_kafka_headers, c.keys_format_name, c.headers_format_name) == (False, False, "avro", "avro")
    assert (c.behavior_on_null_values, c.tombstone_encoded_partition, c.schema_compatibility) == ("fail", "tombstone", "NONE")
    assert (c.s3_part_size, c.s3_part_retries, c.s3_retry_backoff_ms, c.s3_ssea_name) == (26214400, 3, 200, "")
    assert (c.rotate_file_on_partition_change, c.s3_schema_partition_affix_type) == (True, "NONE")
    assert (c.value_decoder, c.key_decoder, c.blockgzip_block_size, c.blockgzip_compression) == ("avro", "bytes", 67108864, "gzip")
    assert (c.batch_max_records, c.offsets_on_data_loss, c.kafka_starting_offsets) == (-1, "fail", "earliest")
    assert c.warnings == () and c.ignored_keys == ()


@pytest.mark.parametrize("given,canon", [
    ("avro", "avro"), ("io.confluent.connect.s3.format.avro.AvroFormat", "avro"),
    ("io.confluent.connect.s3.format.json.JsonFormat", "json"), ("JSON", "json"),
    ("io.confluent.connect.s3.format.bytearray.ByteArrayFormat", "bytearray"),
    ("io.confluent.connect.s3.format.parquet.ParquetFormat", "parquet"), ("lakesink.formats.BlockGzipFormat", "blockgzip"),
])
def test_format_aliases(given: str, canon: str) -> None:
    assert cfg(**{"format.class": given}).format_name == canon


@pytest.mark.parametrize("given,canon", [
    ("default", "default"), ("io.confluent.connect.storage.partitioner.DefaultPartitioner", "default"),
    ("io.confluent.connect.storage.partitioner.DailyPartitioner", "daily"), ("hourly", "hourly"),
])
def test_partitioner_aliases(given: str, canon: str) -> None:
    assert SinkConfig.from_dict({**BASE, **TIME, "partitioner.class": given}).partitioner_class == canon


@pytest.mark.parametrize("given,canon", [
    ("Record", "Record"), ("io.confluent.connect.storage.partitioner.TimeBasedPartitioner$RecordField", "RecordField"),
    ("io.confluent.connect.storage.partitioner.TimeBasedPartitioner$Wallclock", "Wallclock"), ("recordfield", "RecordField"),
])
def test_extractor_aliases(given: str, canon: str) -> None:
    assert SinkConfig.from_dict({**BASE, **TIME, "timestamp.extractor": given}).timestamp_extractor == canon


def test_daily_hourly_force_format_and_duration() -> None:
    c = SinkConfig.from_dict({**BASE, **TIME, "partitioner.class": "hourly", "partition.duration.ms": "5"})
    assert (c.path_format, c.partition_duration_ms) == ("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", 3_600_000)
    c = SinkConfig.from_dict({**BASE, **TIME, "path.format": "YYYY/", "directory.delim": "/"})
    assert c.path_format == "YYYY"  # trailing delimiter stripped


def test_value_decoder_defaults_by_format() -> None:
    assert {f: cfg(**{"format.class": f}).value_decoder for f in ("avro", "parquet", "json", "bytearray", "blockgzip")} == {
        "avro": "avro", "parquet": "avro", "json": "json", "bytearray": "bytes", "blockgzip": "bytes"}
    assert cfg(**{"value.decoder": "string"}).value_decoder == "string"


@pytest.mark.parametrize("text,expected", [("\\n", b"\n"), ("\\r\\n", b"\r\n"), ("\\t", b"\t"), ("|", b"|"), ("\\u0000", b"\0")])
def test_bytearray_separator_escapes(text: str, expected: bytes) -> None:
    assert cfg(**{"format.bytearray.separator": text}).bytearray_separator == expected


def test_separator_escapes_in_properties_file(tmp_path) -> None:
    lines = [f"{k}={v}" for k, v in BASE.items()] + ["format.bytearray.separator=\\\\r\\\\n"]
    (tmp_path / "s.properties").write_text("\n".join(lines))
    assert load_config(tmp_path / "s.properties").bytearray_separator == b"\r\n"


@pytest.mark.parametrize("tz", ["UTC", "+05:30", "-08:00", "America/New_York", "Europe/Berlin"])
def test_timezones_accepted(tz: str) -> None:
    assert SinkConfig.from_dict({**BASE, **TIME, "timezone": tz}).timezone == tz


# ----------------------------------------------------------------------------- validation

def test_all_problems_reported_at_once() -> None:
    got = problems({"flush.size": "zero", "s3.part.size": "100", "schema.compatibility": "bogus",
                    "rotate.schedule.interval.ms": "60000", "flush.sise": "1", "store.kafka.keys": "maybe"})
    assert set(got) == {"flush.size", "s3.part.size", "schema.compatibility", "rotate.schedule.interval.ms",
                        "flush.sise", "store.kafka.keys"}
    assert "integer" in got["flush.size"] and "did you mean 'flush.size'" in got["flush.sise"]
    assert "'NONE', 'BACKWARD', 'FORWARD', 'FULL'" in got["schema.compatibility"]
    assert "timezone" in got["rotate.schedule.interval.ms"] and "true or false" in got["store.kafka.keys"]


def test_error_message_names_key_value_and_allowed() -> None:
    with pytest.raises(ConfigError) as ei:
        SinkConfig.from_dict({**BASE, "s3.compression.type": "zstd"})
    msg = str(ei.value)
    assert "s3.compression.type='zstd'" in msg and "'none', 'gzip'" in msg


@pytest.mark.parametrize("values,key,fragment", [
    ({"flush.size": None, "name": None}, "flush.size", "required"),
    ({"flush.size": "0"}, "flush.size", ">= 1"),
    ({"s3.bucket.name": None}, "s3.bucket.name", "required"),
    ({"manifest.location": None}, "manifest.location", "required"),
    ({"kafka.bootstrap.servers": None}, "kafka.bootstrap.servers", "required"),
    ({"name": None}, "name", "required"),
    ({"topics": None}, "topics", "required"),
    ({"topics.regex": "x.*"}, "topics", "not both"),
    ({"topics": "bad topic"}, "topics", "legal Kafka topic"),
    ({"filename.offset.zero.pad.width": "-1"}, "filename.offset.zero.pad.width", ">= 0"),
    ({"s3.compression.level": "10"}, "s3.compression.level", "between -1 and 9"),
    ({"s3.part.size": "5242879"}, "s3.part.size", "between"),
    ({"behavior.on.null.values": "drop"}, "behavior.on.null.values", "'fail', 'ignore', 'write'"),
    ({"behavior.on.null.values": "write"}, "behavior.on.null.values", "store.kafka.keys=true"),
    ({"headers.format.class": "io.confluent.connect.s3.format.bytearray.ByteArrayFormat"}, "headers.format.class", "not allowed"),
    ({"s3.compression.type": "gzip"}, "s3.compression.type", "format.class=avro"),
    ({"s3.compression.type": "gzip", "format.class": "parquet"}, "s3.compression.type", "json or bytearray"),
    ({"s3.compression.type": "gzip", "format.class": "json", "store.kafka.keys": "true"}, "s3.compression.type", "keys.format.class"),
    ({"schema.compatibility": "backward"}, "schema.compatibility", "did you mean 'BACKWARD'"),
    ({"schema.compatibility": "BACKWARD_TRANSITIVE"}, "schema.compatibility", "one of"),
    ({"s3.schema.partition.affix.type": "PREFIX"}, "s3.schema.partition.affix.type", "not supported"),
    ({"s3.ssea.name": "KMS"}, "s3.ssea.name", "aws:kms"),
    ({"s3.acl.canned": "world"}, "s3.acl.canned", "bucket-owner-full-control"),
    ({"avro.codec": "lzo"}, "avro.codec", "deflate"),
    ({"parquet.codec": "lzo"}, "parquet.codec", "zstd"),
    ({"format.class": "csv"}, "format.class", "avro, json"),
    ({"partitioner.class": "weird"}, "partitioner.class", "default, field"),
    ({"partitioner.class": "field"}, "partition.field.name", "required"),
    ({"timestamp.extractor": "Now", **TIME}, "timestamp.extractor", "Wallclock, Record, RecordField"),
    ({"timezone": "Mars/Base"}, "timezone", "unknown time zone"),
    ({**TIME, "path.format": ""}, "path.format", "required"),
    ({**TIME, "partition.duration.ms": "-1"}, "partition.duration.ms", "> 0"),
    ({**TIME, "locale": ""}, "locale", "required"),
    ({**TIME, "timezone": ""}, "timezone", "required"),
    ({"partitioner.class": "daily"}, "locale", "required"),
    ({**TIME, "path.format": "YYYY-qq"}, "path.format", "illegal pattern"),
    ({**TIME, "path.format": "'..'/YYYY"}, "path.format", "'..'"),
    ({**TIME, "path.format": "MMM", "locale": "de"}, "path.format", "English"),
    ({"topics.dir": "../up"}, "topics.dir", "'..'"),
    ({"topics.dir": "/abs"}, "topics.dir", "starts with"),
    ({"file.delim": "1"}, "file.delim", "digits"),
    ({"batch.max.records": "0"}, "batch.max.records", "-1"),
    ({"offsets.on.data.loss": "maybe"}, "offsets.on.data.loss", "'fail', 'skip'"),
    ({"kafka.starting.offsets": "middle"}, "kafka.starting.offsets", "'earliest', 'latest'"),
    ({"value.schema": "{not json"}, "value.schema", "valid JSON"),
    ({"s3.bucket.name": "Bad_Bucket"}, "s3.bucket.name", "bucket name"),
    ({"aws.access.key.id": "AKIA"}, "aws.secret.access.key", "together"),
    ({"s3.sse.kms.key.id": "k"}, "s3.sse.kms.key.id", "aws:kms"),
])
def test_validation_errors(values: dict, key: str, fragment: str) -> None:
    got = problems(values)
    assert key in got, got
    assert fragment in got[key]


def test_warnings_like_confluent() -> None:
    c = cfg(**{"rotate.interval.ms": "1000"})
    assert any("rotate.interval.ms is ignored" in w for w in c.warnings)
    t = SinkConfig.from_dict({**BASE, **TIME})  # Wallclock default
    assert any("non-deterministic" in w for w in t.warnings) and not t.deterministic
    u = cfg(**{"enhanced.avro.schema.support": "false"})
    assert ("enhanced.avro.schema.support", "Confluent S3 sink key not implemented by lakesink") in u.ignored_keys


def test_connect_keys_ignored_with_reason() -> None:
    c = SinkConfig.from_dict({**BASE, "connector.class": "x", "tasks.max": "2", "key.converter": "k",
                              "value.converter.schemas.enable": "false", "header.converter": "h",
                              "errors.log.enable": "true", "transforms": "a", "transforms.a.type": "x",
                              "consumer.override.max.poll.records": "5", "producer.override.acks": "all"})
    keys = dict(c.ignored_keys)
    assert len(keys) == 10 and all(keys.values())


# ----------------------------------------------------------------------------- secrets

SECRET = "wJalrXUtnFEMI/K7MDENG"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}";'


def test_secrets_never_shown() -> None:
    c = cfg(**{"aws.access.key.id": "AKIAEXAMPLE", "aws.secret.access.key": SECRET,
               "kafka.sasl.jaas.config": JAAS, "kafka.ssl.key.password": SECRET,
               "schema.registry.url": f"https://user:{SECRET}@sr:8081",
               "schema.registry.basic.auth.user.info": f"u:{SECRET}"})
    for text in (repr(c), str(c), json.dumps(c.as_dict())):
        assert SECRET not in text and "AKIAEXAMPLE" not in text
    assert isinstance(c.aws_secret_access_key, Secret) and c.aws_secret_access_key.reveal() == SECRET
    assert c.as_dict(redact=False)["aws.secret.access.key"] == SECRET
    assert c.kafka_options["sasl.jaas.config"] == JAAS  # usable, just not shown
    assert SECRET not in repr(c.raw)


def test_secrets_masked_in_errors() -> None:
    with pytest.raises(ConfigError) as ei:
        SinkConfig.from_dict({**BASE, "aws.secret.access.key": SECRET, "kafka.sasl.password": SECRET,
                              "aws.secret.acces.key": SECRET, "flush.size": "0"})
    assert SECRET not in str(ei.value)
    assert "did you mean 'aws.secret.access.key'" in str(ei.value)


@pytest.mark.parametrize("typo", ["aws.secert.access.key", "aws.secret.acess.key", "aws.scret.access.key",
                                  "aws.access.key.di", "aws.secret.access.kye", "ssl.keystore.pasword",
                                  "sasl.jass.config", "aws_secret_access_key"])
def test_values_of_keys_a_typo_away_from_a_secret_are_masked(typo) -> None:
    """A mistyped secret key still holds the secret: its value never appears in the did-you-mean error."""
    with pytest.raises(ConfigError) as ei:
        SinkConfig.from_dict({**BASE, typo: SECRET})
    text = str(ei.value)
    assert SECRET not in text and typo in text and "******" in text


def test_ordinary_unknown_keys_still_show_their_value() -> None:
    with pytest.raises(ConfigError) as ei:
        SinkConfig.from_dict({**BASE, "flush.sise": "1000"})
    assert "flush.sise='1000'" in str(ei.value) and "did you mean 'flush.size'" in str(ei.value)


def test_config_is_frozen_and_picklable() -> None:
    c = cfg(**{"aws.secret.access.key": SECRET, "aws.access.key.id": "A"})
    with pytest.raises(Exception):
        c.flush_size = 5  # type: ignore[misc]
    d = pickle.loads(pickle.dumps(c))
    assert d.aws_secret_access_key.reveal() == SECRET and d.flush_size == 3


# ----------------------------------------------------------------------------- builders

def test_naming_and_rotation_builders() -> None:
    c = cfg(**{"topics.dir": "", "directory.delim": "_", "file.delim": "-", "filename.offset.zero.pad.width": "4",
               "schema.compatibility": "FULL", "behavior.on.null.values": "ignore", "rotate.file.on.partition.change": "false"})
    n = wiring.naming(c)
    assert (n.topics_dir, n.directory_delim, n.file_delim, n.zero_pad_width) == ("", "_", "-", 4)
    p = wiring.rotation_policy(c)
    assert (p.flush_size, p.schema_compatibility, p.behavior_on_null_values, p.rotate_on_partition_change) == (
        3, "FULL", "ignore", False)


def test_format_builders_call_registry_lazily(monkeypatch) -> None:
    import lakesink.objects.formats  # noqa: F401 - the format classes (their options_from) load before the fake

    calls = []
    fake = types.ModuleType("lakesink.objects.formats")

    def create(name, **options):
        calls.append((name, options))
        return types.SimpleNamespace(extension={"json": ".json.gz", "avro": ".avro", "parquet": ".snappy.parquet"}[name])

    class Spec(NamedTuple):  # FormatSpec, building through the fake create
        name: str
        options: dict

        def build(self, compression=None):
            return create(self.name, **self.options)

    fake.create, fake.FormatSpec = create, Spec
    monkeypatch.setitem(sys.modules, "lakesink.objects.formats", fake)
    monkeypatch.setattr(lakesink.objects, "formats", fake, raising=False)
    c = cfg(**{"format.class": "json", "s3.compression.type": "gzip", "s3.compression.level": "5",
               "store.kafka.keys": "true", "keys.format.class": "json", "store.kafka.headers": "true",
               "headers.format.class": "io.confluent.connect.s3.format.json.JsonFormat",
               "store.kafka.metadata": "false"})  # the metadata format is a real module, not the fake
    assert wiring.value_format(c).extension == ".json.gz"
    assert calls[-1] == ("json", {"compression": "gzip", "compression_level": 5})
    ext = wiring.key_extensions(c)
    assert (ext.value, ext.keys, ext.headers, ext.index) == (".json.gz", ".json.gz", ".json.gz", False)
    assert wiring.format_spec(cfg(**{"format.class": "parquet", "parquet.codec": "zstd"}), "parquet") == ("parquet", {"codec": "zstd"})
    b = cfg(**{"format.class": "bytearray", "format.bytearray.separator": "\\r\\n"})
    assert wiring.format_spec(b, "bytearray") == ("bytearray", {"separator": b"\r\n", "extension": ".bin",
                                                         "compression": "none", "compression_level": -1})
    g = cfg(**{"format.class": "blockgzip", "blockgzip.compression": "bzip2", "blockgzip.block.size": "1024"})
    assert wiring.format_spec(g, "blockgzip") == ("blockgzip", {"block_size": 1024, "compression": "bzip2"})
    assert wiring.format_spec(cfg(**{"avro.codec": "deflate"}), "avro") == ("avro", {"codec": "deflate"})


def test_decoder_spec_and_value_schema(tmp_path) -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    inline = cfg(**{"value.schema": json.dumps(schema), "schema.registry.url": "http://sr:8081"})
    name, opts = wiring.decoder_spec(inline, "value")
    assert name == "avro" and opts["schema"] == schema and opts["registry"].url == "http://sr:8081"
    (tmp_path / "r.avsc").write_text(json.dumps(schema))
    raw = cfg(**{"value.schema": str(tmp_path / "r.avsc")})
    assert wiring.load_value_schema(raw) == schema
    assert wiring.decoder_spec(raw, "value") == ("avro", {"schema": schema, "wire_format": False})
    assert wiring.decoder_spec(inline, "key") == ("bytes", {})
    reg = cfg(**{"schema.registry.url": "http://sr", "schema.registry.basic.auth.user.info": "u:p", "key.decoder": "avro"})
    name, opts = wiring.decoder_spec(reg, "key")
    assert name == "avro" and opts.keys() == {"registry", "is_key"} and opts["is_key"] is True
    assert opts["registry"].url == "http://sr" and opts["registry"].client_config()["basic.auth.user.info"] == "u:p"


def test_builders_against_real_registries() -> None:
    """The (name, options) pairs are accepted by lakesink.objects.formats / lakesink.decoders as they are."""
    formats = pytest.importorskip("lakesink.objects.formats")
    for fmt in ("avro", "json", "bytearray", "parquet", "blockgzip"):
        c = cfg(**{"format.class": fmt})
        assert wiring.value_format(c).extension
    j = cfg(**{"format.class": "json", "s3.compression.type": "gzip"})
    assert wiring.value_format(j).extension == ".json.gz"
    assert wiring.value_format(cfg(**{"format.class": "parquet"})).extension == ".snappy.parquet"
    decoders = pytest.importorskip("lakesink.decoders")
    n, o = wiring.decoder_spec(cfg(**{"format.class": "json"}), "value")
    assert decoders.create_decoder(n, **o)
    n, o = wiring.decoder_spec(cfg(**{"schema.registry.url": "http://sr:8081"}), "value")
    assert decoders.create_decoder(n, **o)
    n, o = wiring.decoder_spec(cfg(), "key")
    assert decoders.create_decoder(n, **o)
    assert formats


# -- files that are not configs: one problem line each, never a traceback (issue #14)

def _problems(path) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load_config(str(path))
    return [str(p) for p in e.value.problems]


def test_a_binary_file_is_a_config_error_naming_the_byte(tmp_path):
    f = tmp_path / "garbage.properties"
    f.write_bytes(b"abc\xb2\xff\x00garbage")
    assert _problems(f) == ["is not a UTF-8 text file (byte 3: b'\\xb2'); expected .properties, "
                            "JSON or YAML"]
    f.write_bytes(b"name=j\x00\n")
    assert _problems(f) == ["contains NUL bytes: not a text config file"]


def test_a_yaml_syntax_error_is_one_line(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("name: j\npath.format: 'year=YYYY\n")
    (msg,) = _problems(f)
    assert msg.startswith("invalid YAML: while scanning a quoted scalar") and "\n" not in msg


def test_value_schema_file_is_checked_at_load(tmp_path):
    base = dict(BASE, **{"format.class": "avro", "value.decoder": "avro", "value.converter.schemas.enable": "false"})
    missing = str(tmp_path / "nope.avsc")
    with pytest.raises(ConfigError) as e:
        SinkConfig.from_dict({**base, "value.schema": missing})
    assert [p.key for p in e.value.problems] == ["value.schema"] and "names no file here" in str(e.value)
    bad = tmp_path / "bad.avsc"
    bad.write_text('{"type": "record", ')
    with pytest.raises(ConfigError, match=r"value.schema=.*bad.avsc': is not a readable Avro schema file"):
        SinkConfig.from_dict({**base, "value.schema": str(bad)})
    good = tmp_path / "good.avsc"
    good.write_text(json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}))
    assert SinkConfig.from_dict({**base, "value.schema": str(good)}).value_schema == str(good)
