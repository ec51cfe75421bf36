"""Other connectors' configs: recognised, each key explained, translated to a config lakesink accepts (#12 item 8)."""
from __future__ import annotations

import json

import pytest

from lakesink.cli import main
from lakesink.config import SinkConfig
from lakesink.config.keys import KNOWN_KEYS
from lakesink.config.translate import CONNECTORS, recognise, translate
from lakesink.errors import ConfigError

AIVEN = {"name": "orders-s3", "connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector",
         "topics": "orders", "aws.access.key.id": "AKIAEXAMPLE", "aws.secret.access.key": "very-secret-value",
         "aws.s3.bucket.name": "my-archive", "aws.s3.endpoint": "http://127.0.0.1:9000", "aws.s3.region": "eu-west-1",
         "aws.s3.prefix": "raw/", "file.max.records": "500", "format.output.type": "jsonl",
         "file.compression.type": "gzip", "format.output.fields": "key,value,headers",
         "key.converter": "org.apache.kafka.connect.storage.StringConverter"}
DEVIANTART = {"connector.class": "com.spredfast.kafka.connect.s3.sink.S3SinkConnector", "topics": "events",
              "s3.bucket": "archive-bkt", "s3.prefix": "connect", "s3.endpoint": "http://127.0.0.1:9000",
              "s3.path_style": "true", "compressed_block_size": "1048576", "format": "text",
              "local.buffer.dir": "/tmp/buf"}
ZOOZ = {"KAFKA_HOST": "k1:9092,k2:9092", "SOURCE_KAFKA_TOPIC": "my-topic", "S3_BUCKET_NAME": "my-bucket",
        "S3_ACCESS_KEY": "ABCDEFGHIJKLMNOPQRST", "S3_SECRET_KEY": "1234567890123456789/1234/123456789012345"}


def test_recognised_by_class_or_by_their_keys():
    assert recognise(AIVEN) is CONNECTORS["aiven"]
    assert recognise({k: v for k, v in AIVEN.items() if k != "connector.class"}) is CONNECTORS["aiven"]
    assert recognise(DEVIANTART) is CONNECTORS["deviantart"]
    assert recognise(ZOOZ) is CONNECTORS["zooz"]
    assert recognise({"topics": "t", "s3.bucket.name": "b", "flush.size": "3"}) is None  # a Confluent config


def test_aiven_translation_validates_and_keeps_the_meaning():
    t = translate(CONNECTORS["aiven"], AIVEN, set(KNOWN_KEYS))
    c = t.config
    assert (c["s3.bucket.name"], c["store.url"], c["s3.region"], c["topics.dir"]) == \
        ("my-archive", "http://127.0.0.1:9000", "eu-west-1", "raw")
    assert (c["flush.size"], c["format.class"], c["s3.compression.type"]) == ("500", "json", "gzip")
    assert (c["store.kafka.keys"], c["store.kafka.headers"], c["keys.format.class"]) == ("true", "true", "json")
    assert c["manifest.location"] == "s3a://my-archive/_lakesink/manifest" and c["name"] == "orders-s3"
    cfg = SinkConfig.from_dict({**c, "kafka.bootstrap.servers": "127.0.0.1:9092"})
    assert cfg.flush_size == 500 and cfg.format_name == "json" and cfg.s3_bucket_name == "my-archive"
    assert ("file.max.records", "flush.size") in [(k, v) for k, v, _ in t.mapping]


def test_deviantart_translation_is_block_gzip():
    t = translate(CONNECTORS["deviantart"], DEVIANTART, set(KNOWN_KEYS))
    c = t.config
    assert (c["format.class"], c["blockgzip.block.size"], c["s3.bucket.name"], c["topics.dir"]) == \
        ("blockgzip", "1048576", "archive-bkt", "connect")
    assert c["s3.path.style.access.enabled"] == "true" and "local.buffer.dir" not in c
    cfg = SinkConfig.from_dict({**c, "kafka.bootstrap.servers": "127.0.0.1:9092"})
    assert cfg.format_name == "blockgzip" and cfg.blockgzip_block_size == 1048576
    assert dict((k, v) for k, v, _ in t.mapping)["local.buffer.dir"] == "-"


def test_zooz_environment_translation():
    c = translate(CONNECTORS["zooz"], ZOOZ, set(KNOWN_KEYS)).config
    assert (c["kafka.bootstrap.servers"], c["topics"], c["s3.bucket.name"]) == ("k1:9092,k2:9092", "my-topic",
                                                                                "my-bucket")
    cfg = SinkConfig.from_dict(c)
    assert cfg.format_name == "bytearray" and cfg.topics == ("my-topic",)


def test_foreign_keys_are_named_not_guessed():
    with pytest.raises(ConfigError) as e:
        SinkConfig.from_dict({"name": "j", "topics": "t", "flush.size": "3", "s3.bucket.name": "bkt1",
                              "manifest.location": "/tmp/m", "kafka.bootstrap.servers": "x:9092",
                              "file.max.records": "100", "s3.endpoint": "http://h:9000"})
    msgs = {p.key: p.message for p in e.value.problems}
    assert msgs["file.max.records"].startswith("is a key of Aiven's S3 sink: lakesink's is 'flush.size'")
    assert msgs["s3.endpoint"].startswith("is a key of the DeviantArt/Spredfast block-gzip sink: lakesink's is "
                                          "'store.url'")
    assert "batch.max.records" not in str(e.value) and "s3.region" not in msgs["s3.endpoint"]


def test_cli_translate_prints_a_config_lakesink_accepts_without_secrets(tmp_path, capsys):
    src = tmp_path / "aiven.json"
    src.write_text(json.dumps({"name": "orders-s3", "config": {**AIVEN, "kafka.bootstrap.servers": "b:9092"}}))
    assert main(["check", "--translate", str(src)]) == 0
    out = capsys.readouterr().out
    assert "recognised as Aiven's S3 sink" in out and "very-secret-value" not in out and "AKIAEXAMPLE" not in out
    assert "# not printed (secret): aws.secret.access.key" in out
    dst = tmp_path / "lakesink.properties"
    dst.write_text(out + "aws.access.key.id=AKIAEXAMPLE\naws.secret.access.key=very-secret-value\n")
    assert main(["check", str(dst)]) == 0
    assert capsys.readouterr().out.startswith(f"{dst}: OK (job 'orders-s3')")
    assert main(["--format", "json", "check", "--translate", str(src)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["connector"] == "Aiven's S3 sink" and "flush.size=500" in doc["properties"]
    assert doc["withheld"] == ["aws.access.key.id", "aws.secret.access.key"]


def test_cli_translate_of_an_unrecognised_config_is_a_config_error(tmp_path, capsys):
    f = tmp_path / "c.properties"
    f.write_text("name=j\ntopics=t\n")
    assert main(["check", "--translate", str(f)]) == 3
    assert "not recognised as a config of another connector" in capsys.readouterr().err


def test_the_doc_lists_every_translated_key():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "coming-from.md").read_text()
    for c in CONNECTORS.values():
        for k in c.keys:
            assert f"| `{k}` |" in doc, k
