"""Migration from other connectors (#31 item 4): the cut policy carried over or the choice printed, every key not
translated listed with why, the hand-over command named; the old connectors' object names parsed back
(`manifest import --from`), and what cannot be adopted refused in one line; `--start-offsets` parsed."""
from __future__ import annotations

import base64
import gzip
import json

import pytest

from lakesink.cli import main
from lakesink.config import SinkConfig
from lakesink.config.keys import KNOWN_KEYS
from lakesink.config.translate import CONNECTORS, UNLIMITED_FLUSH_SIZE, translate
from lakesink.driver.handover import parse_start_offsets
from lakesink.driver.import_formats import aiven_key_pattern, foreign_naming
from lakesink.errors import InvalidArgumentError
from lakesink.objects.formats import FormatSpec

AIVEN = {"name": "orders-s3", "connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector",
         "topics": "orders", "aws.s3.bucket.name": "my-archive", "format.output.type": "jsonl"}
DEVIANTART = {"connector.class": "com.spredfast.kafka.connect.s3.sink.S3SinkConnector", "topics": "events",
              "s3.bucket": "archive-bkt", "s3.prefix": "connect", "format": "text", "compressed_block_size": "1048576"}
ZOOZ = {"KAFKA_HOST": "k1:9092", "SOURCE_KAFKA_TOPIC": "my-topic", "S3_BUCKET_NAME": "my-bucket"}


def _mapping(t) -> dict[str, tuple[str, str]]:
    return {k: (target, note) for k, target, note in t.mapping}


def test_aiven_record_limit_is_carried_over_and_the_time_cut_explained():
    t = translate(CONNECTORS["aiven"], {**AIVEN, "file.max.records": "250", "offset.flush.interval.ms": "30000"},
                  set(KNOWN_KEYS))
    assert t.config["flush.size"] == "250"
    cut = [n for n in t.notes if n.startswith("cut policy:")]
    assert len(cut) == 1 and "flush.size=250 carried over from file.max.records" in cut[0]
    assert "offset.flush.interval.ms=30000" in cut[0]
    assert _mapping(t)["offset.flush.interval.ms"][0] == "-"


@pytest.mark.parametrize("limit", [None, "0"])
def test_without_a_record_limit_the_chosen_flush_size_is_printed_not_1000(limit):
    raw = dict(AIVEN) if limit is None else {**AIVEN, "file.max.records": limit}
    t = translate(CONNECTORS["aiven"], raw, set(KNOWN_KEYS))
    assert t.config["flush.size"] == str(UNLIMITED_FLUSH_SIZE) != "1000"
    assert any(f"flush.size={UNLIMITED_FLUSH_SIZE} chosen by lakesink" in n for n in t.notes)


def test_deviantart_and_zooz_cut_policies():
    d = translate(CONNECTORS["deviantart"], DEVIANTART, set(KNOWN_KEYS))
    assert d.config["flush.size"] == str(UNLIMITED_FLUSH_SIZE)
    assert any("compressed_block_size sizes the gzip members" in n for n in d.notes)
    z = translate(CONNECTORS["zooz"], ZOOZ, set(KNOWN_KEYS))
    assert (z.config["path.format"], z.config["partition.duration.ms"], z.config["timestamp.extractor"]) == \
        ("'date'=YYYY-MM-dd/'hour'=HH", "3600000", "Record")
    cfg = SinkConfig.from_dict({**z.config, "manifest.location": "/tmp/m"})
    assert cfg.partitioner_class == "time" and not cfg.warnings
    assert any("hourly files" in n for n in z.notes)


def test_every_key_not_translated_is_listed_with_why():
    raw = {**AIVEN, "tasks.max": "3", "transforms": "x", "weird.key": "1", "aws.sts.role.session.name": "s",
           "consumer.override.max.poll.records": "10"}
    t = translate(CONNECTORS["aiven"], raw, set(KNOWN_KEYS))
    m = _mapping(t)
    assert m["tasks.max"] == ("-", "not translated: Kafka Connect framework key; Spark parallelism is one task per "
                                   "Kafka partition")
    assert m["transforms"][1].startswith("not translated: Connect SMTs are not applied")
    assert m["weird.key"][1] == ("not translated: neither a key of Aiven's S3 sink that lakesink knows nor a "
                                 "lakesink key (dropped)")
    assert m["aws.sts.role.session.name"][0] == "-"
    given = set(raw) - {"connector.class"}
    assert given <= set(m) | set(t.kept), given - set(m) - set(t.kept)


def test_handover_hint_names_the_connect_group():
    t = translate(CONNECTORS["aiven"], AIVEN, set(KNOWN_KEYS))
    assert any("--from-group connect-orders-s3" in n for n in t.notes)
    z = translate(CONNECTORS["zooz"], ZOOZ, set(KNOWN_KEYS))
    assert any("--from-group GROUP" in n for n in z.notes)


def test_cli_translate_prints_the_notes_in_the_config_header(tmp_path, capsys):
    src = tmp_path / "aiven.json"
    src.write_text(json.dumps({"name": "orders-s3", "config": {**AIVEN, "odd.key": "1"}}))
    assert main(["check", "--translate", str(src)]) == 0
    out = capsys.readouterr().out
    assert f"# cut policy: flush.size={UNLIMITED_FLUSH_SIZE} chosen by lakesink" in out
    assert "#   odd.key -> -: not translated" in out
    assert main(["--format", "json", "check", "--translate", str(src)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any(n.startswith("hand-over:") for n in doc["notes"])


def test_parse_start_offsets():
    assert parse_start_offsets("orders:0=123, orders:1=9,my.topic-x:12=0") == \
        {("orders", 0): 123, ("orders", 1): 9, ("my.topic-x", 12): 0}
    for bad in ("orders=1", "orders:a=1", "orders:0=-1", "", "orders:0=1,orders:0=2"):
        with pytest.raises(InvalidArgumentError, match="--start-offsets"):
            parse_start_offsets(bad)


def test_aiven_names_parsed_back():
    n = foreign_naming({**AIVEN, "aws.s3.prefix": "raw/"})
    assert (n.prefix, n.format_name) == ("raw/", "aiven_jsonl")
    k = n.parse("raw/orders-2-1500.gz", ["orders"])
    assert (k.topic, k.partition, k.start_offset, k.compression, k.refused) == ("orders", 2, 1500, "gzip", None)
    assert n.parse("raw/my-topic-with-dashes-0-7.zst", ["my-topic-with-dashes"]).compression == "zstd"
    assert n.parse("raw/orders-2-1500.snappy", ["orders"]).refused.startswith("snappy files")
    assert n.parse("raw/other-2-1500.gz", ["orders"]) is None and n.parse("raw/orders-2.gz", ["orders"]) is None
    static, pat = aiven_key_pattern("{{ utc_date }}/", "{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}")
    assert static == "" and pat.fullmatch("2026-11-27/t/0000000003/00000000000000000042").group("offset") == \
        "00000000000000000042"


@pytest.mark.parametrize("raw, why", [
    ({"file.name.template": "{{key}}"}, "a {{key}} template keeps one file per record key"),
    ({"file.name.template": "{{topic}}-{{partition}}"}, "the name has no start_offset"),
    ({"format.output.type": "csv", "format.output.fields": "key,value"}, "holding the value alone"),
    ({"format.output.type": "parquet"}, "format.output.type=parquet cannot be adopted"),
])
def test_aiven_objects_that_cannot_be_adopted_are_refused(raw, why):
    with pytest.raises(InvalidArgumentError, match="cannot be adopted") as e:
        foreign_naming({**AIVEN, **raw})
    assert why in str(e.value)


def test_deviantart_and_zooz_names_parsed_back():
    d = foreign_naming(DEVIANTART)
    assert (d.prefix, d.format_name) == ("connect/", "blockgzip")
    k = d.parse("connect/2016-02-24/system-test-00001-000000000100.gz", ["system-test"])
    assert (k.topic, k.partition, k.start_offset, k.view) == ("system-test", 1, 100, "value")
    assert d.parse("connect/system-test-00001-000000000100.index.json", ["system-test"]).view == "index"
    assert d.parse("connect/system-test-1-100.gz", ["system-test"]) is None
    with pytest.raises(InvalidArgumentError, match="format=binary cannot be adopted"):
        foreign_naming({**DEVIANTART, "format": "binary"})
    z = foreign_naming(ZOOZ, "root/")
    k = z.parse("root/date=2019-03-12/hour=12/3_1200.json.gz", ["my-topic"])
    assert (k.topic, k.partition, k.start_offset, k.compression) == ("my-topic", 3, 1200, "gzip")
    assert z.parse("root/2019-03-12/12/3_1200.json", ["my-topic"]) is None
    with pytest.raises(InvalidArgumentError, match="not recognised"):
        foreign_naming({"topics": "t", "flush.size": "3"})


def test_read_only_formats_read_the_old_connectors_bytes():
    jl = FormatSpec("aiven_jsonl", {}).build("gzip")
    lines = b'{"value": {"a": 1}, "offset": 0}\n{"value": "x", "key": "k"}\n{"value": null}\n'
    assert jl.record_bytes(gzip.compress(lines)) == [b'{"a":1}', b"x", None]
    csv = FormatSpec("aiven_csv", {}).build("none")
    assert csv.record_bytes(base64.b64encode(b"\x00\xff") + b"\n\n") == [b"\x00\xff", None]
    with pytest.raises(ValueError, match="more than one field"):
        csv.record_bytes(b"a2V5,dg==\n")
    assert FormatSpec("lines", {}).build("none").record_bytes(b"a\r\nb\n") == [b"a", b"b"]
    with pytest.raises(InvalidArgumentError, match="read-only"):
        jl.open_writer(None)
