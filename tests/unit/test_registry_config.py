"""Schema Registry settings: parsing, validation, Connect converter forms, masking, and the client settings
wiring builds from them (lakesink.config.schema_registry, lakesink.wiring.registry_settings,
lakesink.schemas.registry)."""
from __future__ import annotations

import pickle

import pytest

from lakesink import wiring
from lakesink.config import Secret, SinkConfig
from lakesink.errors import ConfigError, InvalidArgumentError
from lakesink.schemas.registry import RegistrySettings, canonical_strategy, redact_url, subject_name

BASE = {"name": "job", "topics": "a", "flush.size": "3", "s3.bucket.name": "bkt",
        "manifest.location": "s3a://bkt/manifest", "kafka.bootstrap.servers": "localhost:9092"}
SECRET = "s3cr3t-Pa55"
URL = "http://sr:8081"


def cfg(**kv) -> SinkConfig:
    return SinkConfig.from_dict({**BASE, **kv})


def problems(**kv) -> dict[str, str]:
    with pytest.raises(ConfigError) as ei:
        cfg(**kv)
    text = str(ei.value)
    assert SECRET not in text
    return {p.key: p.message for p in ei.value.problems}


# ------------------------------------------------------------------------------ typed keys

def test_defaults_without_a_registry() -> None:
    c = cfg()
    assert c.registry.url is None and c.registry.user_info is None
    assert (c.value_subject_name_strategy, c.key_subject_name_strategy) == ("topic", "topic")
    assert wiring.registry_settings(c) is None


def test_all_registry_keys_parse_into_one_typed_object(tmp_path) -> None:
    ca, cert, key = (tmp_path / n for n in ("ca.pem", "client.pem", "client.key"))
    for f in (ca, cert, key):
        f.write_text("x")
    c = cfg(**{"schema.registry.url": URL, "schema.registry.basic.auth.user.info": f"alice:{SECRET}",
               "schema.registry.basic.auth.credentials.source": "user_info",
               "schema.registry.ssl.ca.location": str(ca), "schema.registry.ssl.certificate.location": str(cert),
               "schema.registry.ssl.key.location": str(key), "schema.registry.ssl.key.password": SECRET,
               "schema.registry.timeout": "2.5", "schema.registry.max.retries": "1",
               "schema.registry.retries.wait.ms": "50", "schema.registry.bearer.auth.client.secret": SECRET,
               "value.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy",
               "key.subject.name.strategy": "TopicRecordNameStrategy"})
    r = c.registry
    assert r.url == URL and isinstance(r.user_info, Secret) and r.user_info.reveal() == f"alice:{SECRET}"
    assert r.credentials_source == "USER_INFO" and r.ssl_ca_location == str(ca) and r.ssl_key_location == str(key)
    assert (c.value_subject_name_strategy, c.key_subject_name_strategy) == ("record", "topic_record")
    assert not c.warnings
    s = wiring.registry_settings(c)
    conf = s.client_config()
    assert conf == {"url": URL, "timeout": 2.5, "max.retries": 1, "retries.wait.ms": 50, "retries.max.wait.ms": 5000,
                    "basic.auth.user.info": f"alice:{SECRET}", "ssl.ca.location": str(ca),
                    "ssl.certificate.location": str(cert), "ssl.key.location": str(key),
                    "ssl.key.password": SECRET, "bearer.auth.client.secret": SECRET}
    # the secrets show nowhere: config repr/as_dict/raw, the settings' repr, a pickled config's repr
    for shown in (repr(c), str(c.as_dict()), str(c.raw), repr(s), repr(r), repr(pickle.loads(pickle.dumps(c)))):
        assert SECRET not in shown
    assert c.as_dict()["schema.registry.basic.auth.user.info"] == "******"


def test_wiring_hands_registry_and_strategy_to_the_decoders() -> None:
    c = cfg(**{"schema.registry.url": URL, "value.subject.name.strategy": "TopicRecordNameStrategy",
               "key.decoder": "avro"})
    name, opts = wiring.decoder_spec(c, "value")
    assert name == "avro" and opts == {"registry": RegistrySettings(URL), "subject_name_strategy": "topic_record"}
    assert wiring.decoder_spec(c, "key") == ("avro", {"registry": RegistrySettings(URL), "is_key": True})
    j = cfg(**{"schema.registry.url": URL, "value.decoder": "json_schema", "format.class": "json"})
    assert wiring.decoder_spec(j, "value") == ("json_schema", {"registry": RegistrySettings(URL)})
    from lakesink.decoders import create_decoder

    for side in ("value", "key"):
        n, o = wiring.decoder_spec(c, side)
        assert create_decoder(n, **o).name == "avro"
    assert create_decoder(*wiring.decoder_spec(j, "value")[:1], **wiring.decoder_spec(j, "value")[1]).name == "json_schema"


@pytest.mark.parametrize("spelling,short", [
    ("TopicNameStrategy", "topic"), ("io.confluent.kafka.serializers.subject.TopicNameStrategy", "topic"),
    ("RecordNameStrategy", "record"), ("recordnamestrategy", "record"), ("record", "record"),
    ("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "topic_record"), ("topic_record", "topic_record"),
])
def test_subject_name_strategies(spelling, short) -> None:
    assert canonical_strategy(spelling) == short
    assert cfg(**{"value.subject.name.strategy": spelling}).value_subject_name_strategy == short


def test_subject_names() -> None:
    assert subject_name("topic", "t", "ex.User") == "t-value"
    assert subject_name("topic", "t", "ex.User", is_key=True) == "t-key"
    assert subject_name("record", "t", "ex.User") == "ex.User"
    assert subject_name("topic_record", "t", "ex.User") == "t-ex.User"
    assert subject_name("record", "t", None) == "t-value"  # a primitive schema has no record name


# ------------------------------------------------------------------------------ Connect converter forms

def test_connect_converter_forms_are_read() -> None:
    c = cfg(**{"value.converter": "io.confluent.connect.json.JsonSchemaConverter", "format.class": "json",
               "value.converter.schema.registry.url": URL,
               "value.converter.basic.auth.credentials.source": "USER_INFO",
               "value.converter.basic.auth.user.info": f"bob:{SECRET}",
               "value.converter.value.subject.name.strategy": "RecordNameStrategy",
               "value.converter.schemas.enable": "false",
               "key.converter": "org.apache.kafka.connect.storage.StringConverter",
               "key.converter.schema.registry.url": URL})
    assert c.value_decoder == "json_schema" and c.key_decoder == "string"
    assert c.schema_registry_url == URL and c.registry.user_info.reveal() == f"bob:{SECRET}"
    assert c.value_subject_name_strategy == "record"
    assert dict(c.ignored_keys).keys() == {"value.converter.schemas.enable"}  # not a registry key
    assert SECRET not in repr(c) and SECRET not in str(c.raw)


def test_explicit_decoder_wins_over_the_converter_class() -> None:
    c = cfg(**{"value.decoder": "bytes", "format.class": "bytearray",
               "value.converter": "io.confluent.connect.avro.AvroConverter"})
    assert c.value_decoder == "bytes" and "value.converter" in dict(c.ignored_keys)


def test_unknown_converter_class_is_a_warning() -> None:
    c = cfg(**{"value.converter": "com.example.ThriftConverter"})
    assert any("ThriftConverter has no lakesink decoder" in w for w in c.warnings)
    assert c.value_decoder == "avro" and "value.converter" in dict(c.ignored_keys)


def test_protobuf_converter_needs_a_registry() -> None:
    p = problems(**{"value.converter": "io.confluent.connect.protobuf.ProtobufConverter"})
    assert "needs schema.registry.url" in p["value.decoder"]
    c = cfg(**{"value.converter": "io.confluent.connect.protobuf.ProtobufConverter", "schema.registry.url": URL})
    assert c.value_decoder == "protobuf"


def test_converter_forms_that_disagree_are_one_problem_each() -> None:
    p = problems(**{"schema.registry.url": URL, "value.converter.schema.registry.url": "http://other:8081",
                    "value.converter.basic.auth.user.info": f"a:{SECRET}",
                    "key.converter.basic.auth.user.info": f"b:{SECRET}"})
    assert "differs from schema.registry.url" in p["value.converter.schema.registry.url"]
    assert any("differs from" in m for k, m in p.items() if k.endswith("basic.auth.user.info"))


# ------------------------------------------------------------------------------ validation

@pytest.mark.parametrize("values,key,fragment", [
    ({"schema.registry.url": "sr:8081"}, "schema.registry.url", "http(s)://"),
    ({"schema.registry.url": URL, "schema.registry.basic.auth.user.info": SECRET},
     "schema.registry.basic.auth.user.info", "user:password"),
    ({"schema.registry.url": URL, "schema.registry.basic.auth.credentials.source": "SASL_INHERIT"},
     "schema.registry.basic.auth.credentials.source", "not supported"),
    ({"schema.registry.url": URL, "schema.registry.basic.auth.credentials.source": "TOKEN"},
     "schema.registry.basic.auth.credentials.source", "USER_INFO or URL"),
    ({"schema.registry.url": URL, "schema.registry.basic.auth.credentials.source": "USER_INFO"},
     "schema.registry.basic.auth.credentials.source", "needs schema.registry.basic.auth.user.info"),
    ({"schema.registry.url": f"http://u:{SECRET}@sr:8081", "schema.registry.basic.auth.user.info": f"u:{SECRET}"},
     "schema.registry.url", "one place"),
    ({"schema.registry.url": URL, "schema.registry.ssl.key.location": "/k.pem"},
     "schema.registry.ssl.key.location", "needs schema.registry.ssl.certificate.location"),
    ({"schema.registry.url": URL, "schema.registry.ssl.truststore.location": "/t.jks"},
     "schema.registry.ssl.truststore.location", "PEM"),
    ({"schema.registry.url": URL, "schema.registry.ssl.keystore.password": SECRET},
     "schema.registry.ssl.keystore.password", "PEM"),
    ({"schema.registry.url": URL, "schema.registry.max.retries": "many"}, "schema.registry.max.retries", "int"),
    ({"schema.registry.url": URL, "schema.registry.timeout": "-1"}, "schema.registry.timeout", ">= 0"),
    ({"schema.registry.url": URL, "schema.registry.auto.register": "x"}, "schema.registry.auto.register",
     "not a Schema Registry client setting"),
    ({"value.subject.name.strategy": "SubjectNameStrategy"}, "value.subject.name.strategy", "TopicNameStrategy"),
    ({"value.decoder": "json_schema", "format.class": "json"}, "value.decoder", "needs schema.registry.url"),
    ({"value.decoder": "json_schema", "schema.registry.url": URL}, "value.decoder", "format.class=json only"),
    ({"key.decoder": "json_schema", "schema.registry.url": URL, "store.kafka.keys": "true"},
     "key.decoder", "keys.format.class=json only"),
])
def test_bad_registry_settings_name_the_key(values, key, fragment) -> None:
    p = problems(**values)
    assert key in p and fragment in p[key], p


def test_credentials_source_url_ignores_user_info_with_a_warning() -> None:
    c = cfg(**{"schema.registry.url": f"http://u:{SECRET}@sr:8081",
               "schema.registry.basic.auth.credentials.source": "URL",
               "schema.registry.basic.auth.user.info": f"x:{SECRET}"})
    assert c.registry.user_info is None and any("is ignored" in w for w in c.warnings)
    s = wiring.registry_settings(c)
    assert "basic.auth.user.info" not in s.client_config() and SECRET not in repr(s)
    assert SECRET not in str(c.as_dict()) and redact_url(s.url) == "http://******@sr:8081"


def test_one_line_config_error_for_a_registry_problem() -> None:
    """The CLI prints ConfigError as it is: one problem on one line, naming the key, secret masked."""
    with pytest.raises(ConfigError) as ei:
        cfg(**{"schema.registry.url": URL, "schema.registry.basic.auth.user.info": SECRET})
    lines = str(ei.value).splitlines()
    assert len(lines) == 1 and "schema.registry.basic.auth.user.info='******'" in lines[0] and SECRET not in lines[0]


# ------------------------------------------------------------------------------ decoder options

def test_decoders_refuse_bad_registry_options() -> None:
    from lakesink.decoders import create_decoder

    with pytest.raises(InvalidArgumentError, match="subject_name_strategy"):
        create_decoder("avro", registry=RegistrySettings(URL), subject_name_strategy="nope")
    with pytest.raises(InvalidArgumentError, match="needs a Schema Registry"):
        create_decoder("json_schema")
    with pytest.raises(InvalidArgumentError, match="RegistrySettings"):
        create_decoder("json_schema", registry={"url": URL})
