"""AvroDecoder.wire_run: the registry schema of a run of wire-format values of one schema id, each exactly one
datum (what the columnar path copies after the 5-byte prefix), or None for anything the record path must see."""
from __future__ import annotations

import json
import struct
import uuid

import pyarrow as pa
import pytest

from lakesink.decoders import create_decoder
from lakesink.schemas.registry import shared_registry_client

V1 = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
V2 = {**V1, "fields": V1["fields"] + [{"name": "s", "type": ["null", "string"], "default": None}]}


@pytest.fixture
def wire():
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    url = f"mock://{uuid.uuid4().hex}"
    client = shared_registry_client(url)

    def make(values, schema=V1):
        ser = AvroSerializer(client, json.dumps(schema))
        return [ser(v, SerializationContext("t", MessageField.VALUE)) for v in values]

    return url, make


def test_one_id_run_gives_the_decoders_own_schema(wire):
    url, make = wire
    raws = make([{"id": i} for i in range(5)])
    d = create_decoder("avro", schema_registry_url=url)
    vs = d.wire_run(raws, "t", 0, 10)
    assert (vs.id, vs.version, vs.subject) == (struct.unpack(">I", raws[0][1:5])[0], 1, "t-value")
    assert d.decode(raws[0], "t", 0, 10)[1] is vs  # the same object the record path carries (rotator identity)


@pytest.mark.parametrize("spoil", [
    lambda raws, other: raws[:2] + other[:1],               # two schema ids
    lambda raws, other: raws[:2] + [raws[2][:-1]],          # truncated datum
    lambda raws, other: raws[:2] + [raws[2] + b"\x00"],     # trailing byte
    lambda raws, other: [b"\x01" + raws[0][1:]] + raws[1:],  # bad magic byte
    lambda raws, other: [raws[0][:1] + struct.pack(">I", 4242) + raws[0][5:]],  # unknown id
    lambda raws, other: raws[:1] + [None],                  # tombstone
])
@pytest.mark.parametrize("arrow", [False, True], ids=["bytes", "arrow"])
def test_anything_else_goes_to_the_record_path(wire, spoil, arrow):
    url, make = wire
    raws, other = make([{"id": i} for i in range(3)]), make([{"id": 9, "s": "x"}], V2)
    spoilt = spoil(raws, other)
    values = pa.array(spoilt, pa.binary()) if arrow else spoilt
    assert create_decoder("avro", schema_registry_url=url).wire_run(values, "t", 0, 0) is None


LIST = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "long"},
                                                     {"name": "next", "type": ["null", "Node"], "default": None}]}


@pytest.mark.parametrize("schema", [V2, LIST], ids=["walked", "recursive-decoded"])
def test_an_arrow_column_run_checked_whole_or_decoded(wire, schema):
    url, make = wire
    recs = [{"id": i, "s": "é" * i} for i in range(6)] if schema is V2 else [
        {"v": i, "next": {"v": i + 1, "next": None}} for i in range(6)]
    raws = make(recs, schema)
    d = create_decoder("avro", schema_registry_url=url)
    vs = d.wire_run(pa.array(raws, pa.binary()), "t", 0, 0)
    assert vs is not None and vs.id == struct.unpack(">I", raws[0][1:5])[0]
    assert d.wire_run(pa.array(raws[:3] + [raws[3] + b"\x00"] + raws[4:], pa.binary()), "t", 0, 0) is None


def test_bare_avro_has_no_wire_runs():
    d = create_decoder("avro", schema=V1, wire_format=False)
    assert d.wire_run([b"\x02"], "t", 0, 0) is None
