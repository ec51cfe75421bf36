"""Confluent wire-format Avro on the columnar path, against the real Schema Registry (Apicurio) (#11 item 2,
#11 item 4, #14 item 2): runs of one schema id are copied after the 5-byte prefix into byte-identical
objects as the record path writes, each manifest row names the registry's subject, id, version and
fingerprint, and a corrupt datum fails the batch naming the record and the cause in one line."""
from __future__ import annotations

import io
import json
import struct

import fastavro
import pytest
from support.archive_checks import check_chains, manifest_rows, produce, run_cli, write_config
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from lakesink.wiring import task_parts
from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.errors import BatchFailedError
from lakesink.executor.columnar import ColumnarPlan
from lakesink.schemas.avro import fingerprint

V1 = {"type": "record", "name": "Reading", "namespace": "w", "fields": [
    {"name": "id", "type": "long"}, {"name": "site", "type": "string"}]}
V2 = {**V1, "fields": V1["fields"] + [{"name": "temp", "type": ["null", "double"], "default": None}]}


def wire(client, schema: dict, topic: str, values: list[dict]) -> list[bytes]:
    ser = AvroSerializer(client, json.dumps(schema))
    return [ser(v, SerializationContext(topic, MessageField.VALUE)) for v in values]


def config(kafka, s3, bucket: str, topic: str, registry_url: str, **over) -> dict:
    cfg = {"name": f"job-{topic}", "topics": topic, "flush.size": "6", "format.class": "avro",
           "s3.bucket.name": bucket, "s3.region": "us-east-1", "store.url": s3.endpoint_url,
           "aws.access.key.id": "testing", "aws.secret.access.key": "testing",
           "manifest.location": f"s3a://{bucket}/_lakesink/manifest",
           "kafka.bootstrap.servers": kafka.bootstrap_servers, "schema.registry.url": registry_url}
    cfg.update(over)
    return cfg


def objects(s3, bucket: str, rows) -> dict[str, bytes]:
    return {r.object_key: s3.client().get_object(Bucket=bucket, Key=r.object_key)["Body"].read()
            for r in rows if r.object_key}


def test_wire_runs_are_copied_byte_identical_to_the_record_path(spark, kafka, s3, bucket, topic_name, tmp_path,
                                                                 schema_registry, schema_registry_url, monkeypatch):
    client = schema_registry.client()
    v1 = wire(client, V1, topic_name, [{"id": i, "site": f"s{i % 3}"} for i in range(20)])
    v2 = wire(client, V2, topic_name, [{"id": i, "site": "x", "temp": i / 4} for i in range(20, 30)])
    id1, id2 = struct.unpack(">I", v1[0][1:5])[0], struct.unpack(">I", v2[0][1:5])[0]
    assert id1 != id2
    kafka.create_topic(topic_name, partitions=1)

    other = s3.create_bucket(f"{bucket}-rec")
    columnar = SinkConfig.from_dict(config(kafka, s3, bucket, topic_name, schema_registry_url))
    record = SinkConfig.from_dict(config(kafka, s3, other, topic_name, schema_registry_url))
    plan = ColumnarPlan.for_parts(task_parts(columnar))
    assert plan is not None and plan.kind == "avro_wire" and plan.for_direct_reader() == plan

    # the plan takes a run of one id (payloads: the datums after the prefix) and leaves the rest to records
    import pyarrow as pa

    decoder = wiring.value_decoder_instance(columnar)
    cols = {"value": pa.array(v1[:4], pa.binary()), "ts": pa.array([1, 2, 3, 4]), "offset": pa.array([0, 1, 2, 3])}
    payloads, vs = plan.payloads(cols, decoder, topic_name, 0, [0, 1, 2, 3])
    assert payloads.to_pylist() == [v[5:] for v in v1[:4]] and (vs.id, vs.version) == (id1, 1)
    mixed = {**cols, "value": pa.array(v1[:2] + v2[:2], pa.binary())}
    assert plan.payloads(mixed, decoder, topic_name, 0, [0, 1, 2, 3]) is None
    bad = {**cols, "value": pa.array(v1[:3] + [v1[3][:-1]], pa.binary())}
    assert plan.payloads(bad, decoder, topic_name, 0, [0, 1, 2, 3]) is None

    # batch 1: one id (columnar copy); batch 2: v2 then v1 again (NONE: each change of schema rotates)
    produce(kafka, topic_name, v1, headers=False)
    SinkJob(spark, columnar).run_batch(flush_tail=True)
    with monkeypatch.context() as m:
        m.setattr(ColumnarPlan, "for_parts", classmethod(lambda cls, p: None))  # the record path
        SinkJob(spark, record).run_batch(flush_tail=True)
    tail = wire(client, V1, topic_name, [{"id": i, "site": "y"} for i in range(30, 35)])
    produce(kafka, topic_name, v2 + tail, headers=False)
    SinkJob(spark, columnar).run_batch(flush_tail=True)
    with monkeypatch.context() as m:
        m.setattr(ColumnarPlan, "for_parts", classmethod(lambda cls, p: None))
        SinkJob(spark, record).run_batch(flush_tail=True)

    rows = manifest_rows(spark, columnar)
    check_chains(rows, {(topic_name, 0): 35})
    got, want = objects(s3, bucket, rows), objects(s3, other, manifest_rows(spark, record))
    assert sorted(got) == sorted(want) and got == want
    starts = sorted(int(k.rsplit("+", 1)[1].split(".")[0]) for k in got if not k.endswith(".metadata.avro"))
    assert starts == [0, 6, 12, 18, 20, 26, 30], starts

    # every object row: subject, id, version and fingerprint as the registry gives them
    fp1, fp2 = fingerprint(V1), fingerprint(V2)
    by_start = {r.first_offset: r for r in rows if r.object_key}
    for start, (sid, version, fp) in {0: (id1, 1, fp1), 18: (id1, 1, fp1), 20: (id2, 2, fp2),
                                      26: (id2, 2, fp2), 30: (id1, 1, fp1)}.items():
        r = by_start[start]
        assert (r.schema_subject, r.schema_id, r.schema_version, r.schema_fingerprint) == (
            f"{topic_name}-value", sid, version, fp), (start, r)
    latest = client.get_latest_version(f"{topic_name}-value")
    assert (latest.schema_id, latest.version) == (id2, 2)
    # schema_history (#11 item 4) from the Python API and the CLI, over what the sink wrote with the registry
    import lakesink

    want_hist = [(f"{topic_name}-value", 1, id1, fp1, 0, 34, 5, 25), (f"{topic_name}-value", 2, id2, fp2, 20, 29, 2, 10)]
    hist = lakesink.schema_history(columnar, topic_name)
    assert sorted((e.subject, e.version, e.id, e.fingerprint, e.first_offset, e.last_offset, e.objects, e.records)
                  for e in hist.entries) == want_hist
    path = write_config(tmp_path, config(kafka, s3, bucket, topic_name, schema_registry_url))
    rc, out = run_cli(["--format", "json", "schema", "history", "--config", path, "--topic", topic_name])
    assert rc == 0, out
    doc = json.loads(out[out.index("{"):])
    assert sorted((e["subject"], e["version"], e["id"], e["fingerprint"], e["first_offset"], e["last_offset"],
                   e["objects"], e["records"]) for e in doc["schemas"]) == want_hist
    # the objects hold the datums themselves, under each file's writer schema
    key = next(k for k in got if k.endswith("+0000000020.avro"))
    reader = fastavro.reader(io.BytesIO(got[key]))
    assert json.loads(reader.metadata["avro.schema"])["fields"][-1]["name"] == "temp"
    assert [r["id"] for r in reader] == list(range(20, 26))


@pytest.mark.parametrize("reader", ["direct", "spark"])
def test_corrupt_wire_datum_names_the_record(spark, kafka, s3, bucket, topic_name, schema_registry,
                                             schema_registry_url, reader):
    good = wire(schema_registry.client(), V1, topic_name, [{"id": i, "site": "a"} for i in range(4)])
    values = [good[0], good[1][:5] + b"\xff\xff\xff\xff\x07garbage", good[2][:-2], good[3]]
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, values, headers=False)
    cfg = SinkConfig.from_dict(config(kafka, s3, bucket, topic_name, schema_registry_url, **{"kafka.reader": reader}))
    with pytest.raises(BatchFailedError, match=rf"nothing was committed: DecodeError: record {topic_name}-0@1: "
                                              r"truncated or corrupt Avro payload for schema w\.Reading"):
        SinkJob(spark, cfg).run_batch(flush_tail=True)
    assert manifest_rows(spark, cfg) == []


def test_corrupt_wire_datum_cli_one_line_exit_6(kafka, s3, bucket, topic_name, schema_registry,
                                                schema_registry_url, tmp_path):
    good = wire(schema_registry.client(), V1, topic_name, [{"id": 1, "site": "a"}])[0]
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, [good, good[:7]], headers=False)  # offset 1: truncated
    path = write_config(tmp_path, config(kafka, s3, bucket, topic_name, schema_registry_url))
    rc, out = run_cli(["sink", "--config", path, "--once", "--flush-tail"])
    errors = [line for line in out.splitlines() if "error" in line.lower()]
    assert rc == 6, out
    assert len(errors) == 1 and errors[0].startswith("lakesink: error:"), out
    assert f"record {topic_name}-0@1: truncated or corrupt Avro payload for schema w.Reading" in errors[0]
    assert "Traceback" not in out and "AVRO_CANNOT_WRITE_NULL_FIELD" not in out


# schema.compatibility end to end (#11 item 3, spec §4): v1, v2 (adds a field with a default), v1 again
EXPECTED_FILES = {
    # mode: [(first offset, writer schema, [ids in the file])]
    "NONE": [(0, "v1", [0, 1]), (2, "v2", [2, 3]), (4, "v1", [4, 5])],  # every change of schema rotates
    "BACKWARD": [(0, "v1", [0, 1]), (2, "v2", [2, 3, 4, 5])],  # newer rotates; older projected up (default)
    "FULL": [(0, "v1", [0, 1]), (2, "v2", [2, 3, 4, 5])],      # FULL is BACKWARD in the connector
    "FORWARD": [(0, "v1", [0, 1, 2, 3, 4, 5])],                 # newer projected down (field dropped)
}


@pytest.mark.parametrize("mode", sorted(EXPECTED_FILES))
def test_schema_compatibility_modes_on_the_registry(spark, kafka, s3, bucket, topic_name, schema_registry,
                                                    schema_registry_url, mode):
    client = schema_registry.client()
    client.set_compatibility(f"{topic_name}-value", "BACKWARD")
    values = (wire(client, V1, topic_name, [{"id": i, "site": "a"} for i in (0, 1)])
              + wire(client, V2, topic_name, [{"id": i, "site": "b", "temp": i * 1.5} for i in (2, 3)])
              + wire(client, V1, topic_name, [{"id": i, "site": "c"} for i in (4, 5)]))
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, values, headers=False)
    cfg = SinkConfig.from_dict(config(kafka, s3, bucket, topic_name, schema_registry_url,
                                      **{"flush.size": "100", "schema.compatibility": mode}))
    SinkJob(spark, cfg).run_batch(flush_tail=True)
    rows = sorted((r for r in manifest_rows(spark, cfg) if r.object_key), key=lambda r: r.first_offset)
    check_chains(manifest_rows(spark, cfg), {(topic_name, 0): 6})
    schemas = {"v1": V1, "v2": V2}
    sites = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    got = []
    for r in rows:
        body = s3.client().get_object(Bucket=bucket, Key=r.object_key)["Body"].read()
        reader = fastavro.reader(io.BytesIO(body))
        writer = json.loads(reader.metadata["avro.schema"])
        name = "v2" if len(writer["fields"]) == 3 else "v1"
        records = list(reader)
        got.append((r.first_offset, name, [x["id"] for x in records]))
        want = [{"id": i, "site": sites[i], **({"temp": (i * 1.5 if i in (2, 3) else None)} if name == "v2" else {})}
                for i in range(r.first_offset, r.last_offset + 1)]
        assert records == want, (mode, r.object_key, records)
        assert (r.schema_subject, r.schema_version, r.schema_fingerprint) == (
            f"{topic_name}-value", 2 if name == "v2" else 1, fingerprint(schemas[name])), (mode, r)
    assert got == EXPECTED_FILES[mode], (mode, got)
