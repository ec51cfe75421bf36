"""lakesink.schemas.registry_copy, the pure parts: source ids (wire headers, manifest rows), the id map, the
rewrite of a record's id (datum bytes kept), and the copy's bookkeeping on confluent-kafka's in-memory registry
(a real registry, two Apicurio instances, is tests/integration/test_restore_registry.py)."""
from __future__ import annotations

import json
import pickle
import uuid

import pyarrow as pa
import pytest

from lakesink.errors import DecodeError, InvalidArgumentError, RestoreRefusedError, SchemaCopyError
from lakesink.schemas.registry import RegistryClient, shared_registry_client
from lakesink.schemas.registry_copy import (IdMap, copy_schemas, manifest_ids, rewrite, scan_ids, subject_ids,
                                            target_subject, wire_id)


def framed(sid: int, datum: bytes) -> bytes:
    return b"\x00" + sid.to_bytes(4, "big") + datum


# ---------------------------------------------------------------------------------------------- ids

def test_wire_id_reads_the_big_endian_id_and_refuses_what_is_not_framed():
    assert wire_id(framed(0x01020304, b"x")) == 0x01020304
    assert wire_id(framed(7, b"")) == 7
    assert [wire_id(v) for v in (None, b"", b"\x00\x00\x01", b"\x01\x00\x00\x00\x07abc")] == [None] * 4


@pytest.mark.parametrize("as_arrow", [False, True])
def test_scan_ids_finds_every_id_in_a_column_and_skips_nulls_and_unframed(as_arrow):
    raws = [framed(3, b"a"), None, framed(300_000, b"bb"), b"plain", framed(3, b"c"), b"\x00\x00", framed(9, b"")]
    values = pa.array(raws, pa.binary()) if as_arrow else raws
    assert scan_ids(values) == {3, 300_000, 9}
    assert scan_ids([]) == frozenset()
    assert scan_ids([None, b"text"]) == frozenset()


def test_scan_ids_takes_a_chunked_or_large_binary_column():
    chunked = pa.chunked_array([[framed(1, b"a")], [framed(2, b"b"), None]], pa.binary())
    assert scan_ids(chunked) == {1, 2}
    assert scan_ids(pa.array([framed(5, b"z")], pa.large_binary())) == {5}


def test_manifest_ids_from_dict_rows_and_attribute_rows():
    class Row:
        def __init__(self, sid, subject):
            self.schema_id, self.schema_subject = sid, subject

    rows = [{"schema_id": 4, "schema_subject": "orders-value"}, {"schema_id": None, "schema_subject": None},
            Row(4, "orders-ex.Order"), Row(6, None), {"object_key": "no schema columns"}]
    ids, subjects = manifest_ids(rows)
    assert ids == {4, 6}
    assert subjects == {4: frozenset({"orders-value", "orders-ex.Order"})}


# ---------------------------------------------------------------------------------------------- rewrite

def test_rewrite_replaces_the_four_id_bytes_and_keeps_the_datum_bytes():
    datum = bytes(range(256)) * 3
    out = rewrite(framed(3, datum), {3: 0x0A0B0C0D}, "t", 0, 5)
    assert out == b"\x00\x0a\x0b\x0c\x0d" + datum
    assert out[5:] == datum and len(out) == 5 + len(datum)
    assert rewrite(framed(3, b""), {3: 4}) == framed(4, b"")
    assert rewrite(memoryview(framed(3, b"xy")), {3: 4}) == framed(4, b"xy")
    assert rewrite(None, {3: 4}) is None


def test_rewrite_of_an_id_without_a_copy_names_the_record_and_the_id():
    with pytest.raises(DecodeError) as e:
        rewrite(framed(8, b"payload"), {3: 4, 5: 6}, "orders", 2, 1234)
    msg = str(e.value)
    assert msg.startswith("record orders-2@1234: value schema id 8 was not copied")
    assert "copied: 3, 5" in msg and "not produced with the source id" in msg
    assert e.value.exit_code == 6


@pytest.mark.parametrize("raw, why", [(b"", "empty"), (b"{\"a\": 1}", "bad magic byte 123"),
                                      (b"\x00\x00\x01", "shorter than 5 bytes")])
def test_rewrite_of_a_record_that_is_not_wire_format_names_it(raw, why):
    with pytest.raises(DecodeError, match=rf"^record t-0@9: key is not Confluent wire format \({why}\)"):
        rewrite(raw, {3: 4}, "t", 0, 9, role="key")


def test_id_map_is_immutable_picklable_and_rewrites_per_role():
    m = IdMap.of({3: 10, 1: 11}, None, "http://user:secret@sr.example:8081/apis/ccompat/v7")
    assert m.values == ((1, 11), (3, 10)) and m.keys is None
    assert "secret" not in m.target and "secret" not in repr(m)
    back = pickle.loads(pickle.dumps(m))
    assert back == m and back.mapping("value") == {1: 11, 3: 10} and back.mapping("key") is None
    with pytest.raises(AttributeError):
        m.values = ()  # type: ignore[misc]

    value = back.rewriter("value")
    assert value(framed(3, b"d"), "t", 0, 1) == framed(10, b"d")
    assert value(None, "t", 0, 2) is None
    key = back.rewriter("key")  # keys are not rewritten: bytes pass as they are, framed or not
    assert key(b"plain key", "t", 0, 3) == b"plain key"
    with pytest.raises(DecodeError, match=r"record t-0@4: value schema id 2 was not copied to http://\*+@sr"):
        value(framed(2, b"d"), "t", 0, 4)
    with pytest.raises(InvalidArgumentError, match="role 'header'"):
        back.rewriter("header")


def test_an_empty_role_map_fails_every_framed_record():
    m = IdMap.of({}, {})
    with pytest.raises(DecodeError, match=r"copied: none"):
        m.rewrite("key", framed(1, b"k"), "t", 1, 0)


# ---------------------------------------------------------------------------------------------- subjects

def test_target_subject_strategies():
    assert target_subject("topic", "value", "dest") == ["dest-value"]
    assert target_subject("topic", "key", "dest", ["src-key"]) == ["dest-key"]
    assert target_subject("source", "value", "dest", ["other-value", "src-value"], "src") == ["src-value"]
    assert target_subject("source", "value", "dest", ["ex.Order", "b"], "src") == ["b", "ex.Order"]
    with pytest.raises(InvalidArgumentError, match="strategy 'record'"):
        target_subject("record", "value", "dest")


# ---------------------------------------------------------------------------------------------- copy (in-memory)

SCHEMA_A = {"type": "record", "name": "A", "fields": [{"name": "x", "type": "long"}]}
SCHEMA_B = {"type": "record", "name": "B", "fields": [{"name": "y", "type": "string"}]}


def mock_registry() -> tuple[str, RegistryClient]:
    url = f"mock://{uuid.uuid4().hex}"
    return url, RegistryClient(shared_registry_client(url), url)


def test_copy_on_in_memory_registries_maps_each_id_and_serves_the_same_schema():
    from confluent_kafka.schema_registry import Schema

    _, source = mock_registry()
    _, target = mock_registry()
    id_a = source.client.register_schema("src-value", Schema(json.dumps(SCHEMA_A), "AVRO"))
    id_b = source.client.register_schema("src-key", Schema(json.dumps(SCHEMA_B), "AVRO"))
    target.client.register_schema("noise", Schema(json.dumps({"type": "string"}), "AVRO"))
    target.client.register_schema("noise", Schema(json.dumps({"type": "long"}), "AVRO"))

    m = copy_schemas(source, target, {"value": [id_a], "key": {id_b}}, topic="dest")
    value_map, key_map = m.mapping("value"), m.mapping("key")
    assert set(value_map) == {id_a} and set(key_map) == {id_b}
    assert target.client.get_schema(value_map[id_a]).schema_str == json.dumps(SCHEMA_A)
    assert target.client.get_schema(key_map[id_b]).schema_str == json.dumps(SCHEMA_B)
    assert sorted(target.client.get_subjects()) == ["dest-key", "dest-value", "noise"]
    assert [(c.role, c.source_id, c.subject) for c in m.copies] == [("value", id_a, "dest-value"),
                                                                   ("key", id_b, "dest-key")]
    assert m.describe()[0] == f"value id {id_a} -> {value_map[id_a]} under dest-value (AVRO)"
    assert subject_ids(source, ["src-value", "src-key", "unknown"]) == {id_a, id_b}


def test_copy_keeping_the_source_subject_uses_the_hints_when_the_registry_cannot_list_them():
    from confluent_kafka.schema_registry import Schema

    _, source = mock_registry()
    _, target = mock_registry()
    sid = source.client.register_schema("ex.A", Schema(json.dumps(SCHEMA_A), "AVRO"))
    m = copy_schemas(source, target, {"value": [sid]}, topic="dest", strategy="source", source_topic="src",
                     subjects={sid: ["ex.A"]})
    assert m.keys is None and [c.subject for c in m.copies] == ["ex.A"]
    with pytest.raises(SchemaCopyError, match=rf"source schema id {sid} \(value\) is registered under no subject"):
        copy_schemas(source, target, {"value": [sid]}, topic="dest", strategy="source")


def test_copy_refuses_bad_arguments():
    _, source = mock_registry()
    with pytest.raises(InvalidArgumentError, match="strategy 'record_name'"):
        copy_schemas(source, source, {"value": []}, topic="d", strategy="record_name")
    with pytest.raises(InvalidArgumentError, match=r"roles \['header'\]"):
        copy_schemas(source, source, {"header": []}, topic="d")


def test_schema_copy_error_is_a_refused_restore():
    assert issubclass(SchemaCopyError, RestoreRefusedError) and SchemaCopyError("x").exit_code == 1


# ---------------------------------------------------------------------------------------------- driver settings

def test_target_registry_settings_from_a_url_keys_or_settings():
    from lakesink.driver.restore_registry import target_registry_settings
    from lakesink.schemas.registry import RegistrySettings

    s = target_registry_settings("https://sr.example:8081")
    assert (s.url, s.user_info) == ("https://sr.example:8081", None)
    s = target_registry_settings({"schema.registry.url": "https://sr.example", "basic.auth.user.info": "u:pw",
                                  "schema.registry.timeout": "20"})
    assert (s.user_info, s.timeout_s) == ("u:pw", 20.0) and "pw" not in repr(s)
    same = RegistrySettings("http://x:1")
    assert target_registry_settings(same) is same


def test_a_bad_target_registry_key_is_a_config_error_naming_it_without_the_secret():
    from lakesink.driver.restore_registry import target_registry_settings
    from lakesink.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        target_registry_settings({"schema.registry.url": "https://sr.example",
                                  "schema.registry.basic.auth.user.info": "nocolonsecret"}, "target.properties")
    assert str(e.value).startswith("target.properties: schema.registry.basic.auth.user.info=")
    assert "nocolonsecret" not in str(e.value) and e.value.exit_code == 3
    with pytest.raises(ConfigError, match="schema.registry.url.*URL is missing"):
        target_registry_settings({"schema.registry.timeout": "3"})
    with pytest.raises(InvalidArgumentError, match="not int"):
        target_registry_settings(3)


def test_rewritten_roles_follow_what_the_archive_gives_back_in_wire_format():
    from types import SimpleNamespace

    from lakesink.driver.restore_registry import rewritten_roles

    def cfg(value_decoder="bytes", key_decoder="bytes", fmt="bytearray", keys_fmt="avro"):
        return SimpleNamespace(value_decoder=value_decoder, key_decoder=key_decoder, format_name=fmt,
                               keys_format_name=keys_fmt)

    assert rewritten_roles(cfg("avro", "avro", "avro")) == ("value", "key")
    assert rewritten_roles(cfg("avro", "string", "parquet")) == ("value",)
    assert rewritten_roles(cfg("json_schema", "avro", "json", "json")) == ()  # archived decoded: JSON text back
    assert rewritten_roles(cfg(), "both") == ("value", "key")
    assert rewritten_roles(cfg(), ["key"]) == ("key",)
    with pytest.raises(InvalidArgumentError, match="give value, key or both"):
        rewritten_roles(cfg(), "headers")


def test_a_target_registry_for_an_archive_without_wire_format_bytes_is_refused_before_any_registry_call():
    from types import SimpleNamespace

    from lakesink.driver.restore_registry import schema_id_map

    cfg = SimpleNamespace(value_decoder="json_schema", key_decoder="string", format_name="json",
                          keys_format_name="json", source="sink.properties")
    with pytest.raises(InvalidArgumentError) as e:
        schema_id_map(cfg, "http://127.0.0.1:1/never-called", [], {})  # type: ignore[arg-type]
    assert str(e.value).startswith("--target-registry rewrites the schema ids of wire-format records, and this "
                                   "archive gives back none by itself (value.decoder=json_schema with format json")
    assert e.value.exit_code == 2
