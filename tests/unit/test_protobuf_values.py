"""Protobuf values without services: protoc compilation, Confluent message indexes, the Avro mapping and the
values (lakesink/schemas/protobuf.py). The registry-backed decoder is tested on Apicurio in
tests/integration/test_protobuf_topics.py."""
from __future__ import annotations

import io

import fastavro
import pytest
from google.protobuf import message_factory

from lakesink.schemas import protobuf as pb

PROTO = """
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";

message Order {
  enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
  message Line { string sku = 1; uint32 qty = 2; }
  int64 id = 1;
  string customer = 2;
  Status status = 3;
  repeated Line lines = 4;
  map<string, double> prices = 5;
  map<int32, string> notes = 6;
  google.protobuf.Timestamp created = 7;
  optional string coupon = 8;
  bytes blob = 9;
  oneof payment { string card = 10; string iban = 11; }
  Line gift = 12;
  sint32 delta = 13;
  float ratio = 14;
  bool rush = 15;
}
message Ping { int32 n = 1; }
"""


@pytest.fixture(scope="module")
def order_file():
    return pb.compile_proto(PROTO)


def test_message_indexes_round_trip():
    for idx in ([0], [1], [0, 2], [3, 0, 1], [127, 128]):
        raw = b"\x00\x00\x00\x00\x07" + pb.encode_indexes(idx) + b"payload"
        got, pos = pb.message_indexes(raw)
        assert got == idx and raw[pos:] == b"payload"
    assert pb.encode_indexes([0]) == b"\x00"  # Confluent's shorthand for the first message
    with pytest.raises(ValueError):
        pb.message_indexes(b"\x00\x00\x00\x00\x07\x82")  # truncated varint


def test_a_proto_that_does_not_compile_names_the_problem():
    with pytest.raises(ValueError) as e:
        pb.compile_proto('syntax = "proto3"; message A { strin x = 1; }')
    assert "strin" in str(e.value) and "\n" not in str(e.value)


def test_message_at_follows_nested_indexes(order_file):
    assert pb.message_at(order_file, [0]).full_name == "shop.v1.Order"
    assert pb.message_at(order_file, [1]).full_name == "shop.v1.Ping"
    assert pb.message_at(order_file, [0, 0]).full_name == "shop.v1.Order.Line"
    with pytest.raises(IndexError):
        pb.message_at(order_file, [5])


def test_avro_mapping_follows_connects_protobuf_data(order_file):
    schema = pb.avro_schema(pb.message_at(order_file, [0]))
    fields = {f["name"]: f["type"] for f in schema["fields"]}
    assert (schema["name"], schema["namespace"]) == ("Order", "shop.v1")
    assert fields["id"] == "long" and fields["customer"] == "string" and fields["status"] == "string"
    assert fields["lines"]["type"] == "array" and fields["lines"]["items"]["name"] == "Line"
    assert {f["name"]: f["type"] for f in fields["lines"]["items"]["fields"]} == {"sku": "string", "qty": "long"}
    assert fields["prices"] == {"type": "map", "values": "double"}
    assert fields["notes"]["type"] == "array" and [f["name"] for f in fields["notes"]["items"]["fields"]] == \
        ["key", "value"]
    assert fields["created"] == ["null", {"type": "long", "logicalType": "timestamp-millis"}]
    assert fields["coupon"] == ["null", "string"]            # proto3 optional
    assert fields["blob"] == "bytes" and fields["delta"] == "int" and fields["ratio"] == "float"
    assert fields["payment"][0] == "null" and [f["name"] for f in fields["payment"][1]["fields"]] == ["card", "iban"]
    assert fields["gift"] == ["null", "shop.v1.Order.Line"]  # the named type is defined once, then referenced
    fastavro.parse_schema(schema)                             # a valid Avro schema


def test_values_match_the_schema_and_write_as_avro(order_file):
    desc = pb.message_at(order_file, [0])
    cls = message_factory.GetMessageClass(desc)
    m = cls(id=7, customer="ann", status=1, prices={"a": 1.5}, notes={2: "two", 1: "one"}, coupon="X",
            blob=b"\x00\xff", card="4111", delta=-3, ratio=0.5, rush=True)
    m.lines.add(sku="s1", qty=2)
    m.created.seconds, m.created.nanos = 1_700_000_000, 123_456_789
    value = pb.to_value(cls.FromString(m.SerializeToString()))
    assert value["id"] == 7 and value["status"] == "PAID" and value["lines"] == [{"sku": "s1", "qty": 2}]
    assert value["notes"] == [{"key": 1, "value": "one"}, {"key": 2, "value": "two"}]
    assert value["created"] == 1_700_000_000_123 and value["coupon"] == "X" and value["gift"] is None
    assert value["payment"] == {"card": "4111", "iban": None}
    empty = pb.to_value(cls())
    assert empty["id"] == 0 and empty["customer"] == "" and empty["status"] == "NEW"   # proto3 defaults present
    assert empty["coupon"] is None and empty["payment"] is None and empty["created"] is None
    schema = fastavro.parse_schema(pb.avro_schema(desc))
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [value, empty])
    back = list(fastavro.reader(io.BytesIO(buf.getvalue())))
    assert back[0]["payment"] == {"card": "4111", "iban": None} and back[1]["status"] == "NEW"
