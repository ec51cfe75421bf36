"""restore into another partition count (issue #29 item 2): ``--partitioner default`` and ``--partition-map``.

One module archive (local worker processes) of a 4-partition topic whose keys are the keys of the Java fixture
(``tests/unit/fixtures/murmur2_java.json``: the partition the real Java client's default partitioner gives each
key for every count 1..100), three versions of each key, each key in one source partition. Restores into 6 and 2
partitions must put every key's records in the partition the Java client names, in source order, each record
once; a rerun produces nothing, a SIGKILLed worker's rerun each record once. The partition map sends whole source
partitions; routing under another spec is another restore's (refused unless --again); bad flags exit 2 with one
line. The 4 -> 6 case runs on both runners (Spark tasks and local workers), the rest on local workers.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support.archive_checks import base_config, consume, manifest_rows, produce, run_cli, write_config

import lakesink
from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.errors import InvalidArgumentError, RestoreRefusedError
from lakesink.executor.readback import ArchivedObject

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SOURCE_PARTITIONS = 4
VERSIONS = 3
JAVA = json.loads((ROOT / "tests/unit/fixtures/murmur2_java.json").read_text())


def java_keys(n: int = 48) -> list[tuple[bytes, list[int]]]:
    """``n`` distinct keys of the Java fixture (every kind: empty, ASCII, UTF-8, binary, edge lengths) with the
    Java client's partition of each for counts 1..100."""
    out, seen = [], set()
    for kind in ("empty", "ascii", "utf8", "edge", "binary"):
        for k in JAVA["keys"]:
            if k["kind"] == kind and k["hex"] not in seen and len([o for o in out if o[2] == kind]) < n // 4:
                seen.add(k["hex"])
                out.append((bytes.fromhex(k["hex"]), k["partitions"], kind))
    return [(key, parts) for key, parts, _kind in out[:n]]


KEYS = java_keys()


@pytest.fixture(scope="module")
def local_tasks():
    from lakesink.runners.local import LocalRunner

    with LocalRunner(2) as runner:
        yield runner


@pytest.fixture(scope="module")
def archive(spark, kafka, s3, local_tasks):
    """(config, {source partition: [(key, value)] in offset order})."""
    topic = f"parts-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=SOURCE_PARTITIONS)
    keys, values, where = [], [], []
    for v in range(VERSIONS):  # versions interleave across keys: each key's order is its versions' order
        for i, (key, _parts) in enumerate(KEYS):
            keys.append(key)
            values.append(b"k%d-v%d" % (i, v))
            where.append(i % SOURCE_PARTITIONS)
    sent = produce(kafka, topic, values, keys, partition_of=lambda i: where[i], headers=False)
    bucket = s3.create_bucket(f"parts-{uuid.uuid4().hex[:10]}")
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic, **{
        "format.class": "bytearray", "flush.size": "7", "store.kafka.keys": "true"}))
    res = SinkJob(spark, cfg, runner=local_tasks).run_batch(flush_tail=True)
    assert res.records == len(values)
    return cfg, {p: [(k, v) for _o, k, v in recs] for p, recs in sent.items()}


def read_all(kafka, topic: str, n: int) -> dict[int, list[tuple[bytes, bytes]]]:
    return {p: [(k, v) for k, v, *_ in consume(kafka, topic, p)] for p in range(n)}


def check_routed(got: dict[int, list], source: dict[int, list], n: int) -> None:
    """Every key's records in the partition the Java client gives it, in source order, each record once."""
    java = {key: parts[n - 1] for key, parts in KEYS}
    for p, recs in got.items():
        assert all(java[k] == p for k, _v in recs), p
    for sp, recs in source.items():
        for key in {k for k, _v in recs}:
            want = [r for r in recs if r[0] == key]
            assert [r for r in got[java[key]] if r[0] == key] == want
    assert sorted(r for recs in got.values() for r in recs) == sorted(r for recs in source.values() for r in recs)


def test_the_keys_spread_over_every_destination_partition():
    for n in (6, 2):  # the test would not notice a router that ignores some partitions otherwise
        assert {parts[n - 1] for _k, parts in KEYS} == set(range(n))
    assert len({k for k, _p in KEYS}) == len(KEYS) and b"" in {k for k, _p in KEYS}


def test_4_to_6_by_key_on_each_runner_then_a_rerun_produces_nothing(spark, kafka, archive, runner):
    cfg, source = archive
    dest = f"six-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=6)
    rep = lakesink.restore(spark, cfg, to_topic=dest, partitioner="default", records_per_txn=5, runner=runner)
    total = sum(map(len, source.values()))
    assert rep.produced == total and len(rep.partitions) == SOURCE_PARTITIONS
    assert {p.destination for p in rep.partitions} == {f"{dest}-0..5 by key (keyless: {dest}-{s})" for s in range(4)}
    check_routed(read_all(kafka, dest, 6), source, 6)
    again = lakesink.restore(spark, cfg, to_topic=dest, partitioner="default", runner=runner)
    assert (again.produced, again.skipped) == (0, total)
    check_routed(read_all(kafka, dest, 6), source, 6)


def test_4_to_2_by_key_then_another_routing_is_another_restores(spark, kafka, archive, local_tasks):
    cfg, source = archive
    dest = f"two-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=2)
    rep = lakesink.restore(spark, cfg, to_topic=dest, partitioner="default", records_per_txn=4, runner=local_tasks)
    assert rep.produced == sum(map(len, source.values()))
    check_routed(read_all(kafka, dest, 2), source, 2)
    # a map into the same topic would put the same source offsets elsewhere: refused, naming the restore
    with pytest.raises(RestoreRefusedError, match=r"were already restored into .* by the restore recorded in group "
                                                  r"'lakesink-restore:parts-[0-9a-f]+:0:default/2'; nothing was produced: restore with that "
                                                  r"restore's --partitioner / --partition-map"):
        lakesink.restore(spark, cfg, to_topic=dest, partition_map="0=0,1=0,2=1,3=1", runner=local_tasks)
    # and so would a plain restore (same partition numbers) of the source partitions the destination has
    with pytest.raises(RestoreRefusedError, match="by the restore recorded in group 'lakesink-restore:parts-"):
        lakesink.restore(spark, cfg, to_topic=dest, where="kafka_partition < 2", runner=local_tasks)
    check_routed(read_all(kafka, dest, 2), source, 2)


def test_partition_map_merges_whole_source_partitions_in_order(spark, kafka, archive, local_tasks):
    cfg, source = archive
    dest = f"mapped-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=3)
    pmap = {0: 2, 1: 2, 2: 0, 3: 1}
    dry = lakesink.restore(spark, cfg, to_topic=dest, partition_map="0=2,1=2,2=0,3=1", dry_run=True)
    assert [p.destination for p in dry.partitions] == [f"{dest}-{pmap[s]}" for s in range(4)] and dry.produced == 0
    rep = lakesink.restore(spark, cfg, to_topic=dest, partition_map=pmap, records_per_txn=6, runner=local_tasks)
    assert rep.produced == sum(map(len, source.values()))
    got = read_all(kafka, dest, 3)
    for d in range(3):
        srcs = [s for s, t in pmap.items() if t == d]
        assert sorted(got[d]) == sorted(r for s in srcs for r in source[s])
        for s in srcs:  # each source partition's records in its order (the two of partition 2 interleave)
            assert [r for r in got[d] if r in set(source[s])] == source[s]
    again = lakesink.restore(spark, cfg, to_topic=dest, partition_map=pmap, runner=local_tasks)
    assert again.produced == 0 and read_all(kafka, dest, 3) == got


def test_bad_flags_are_refused_before_anything(spark, kafka, archive, tmp_path):
    cfg, _source = archive
    dest = f"bad-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=2)
    cases = [({"partitioner": "default", "partition_map": "0=0"}, "--partitioner and --partition-map exclude"),
             ({"partition_map": "0=0,1=0,2=1,3=5"}, r"--partition-map 3=5: the destination has 2 partition\(s\)"),
             ({"partition_map": "0=0,1=0,2=1"}, r"does not map source partition\(s\) 3, which the restore reads"),
             ({"partitioner": "murmur3"}, "--partitioner 'murmur3' is not known")]
    for kwargs, match in cases:
        for dry in (True, False):
            with pytest.raises(InvalidArgumentError, match=match):
                lakesink.restore(spark, cfg, to_topic=dest, dry_run=dry, **kwargs)
    assert read_all(kafka, dest, 2) == {0: [], 1: []}
    path = write_config(tmp_path, cfg.as_dict(redact=False))
    for flags, text in ((["--partitioner", "default", "--partition-map", "0=0"], "exclude each other"),
                        (["--partition-map", "0=0,1=0,2=1"], "does not map source partition(s) 3"),
                        (["--partition-map", "0=0,1=0,2=1,3=2"], "so partition 2 does not exist")):
        rc, out = run_cli(["restore", "--config", path, "--to-topic", dest, "--engine", "local", *flags])
        errors = [ln for ln in out.splitlines() if ln.startswith("lakesink:")]
        assert rc == 2 and len(errors) == 1 and text in errors[0] and "Traceback" not in out, out[-3000:]


def test_cli_dry_run_prints_the_routing_plan(kafka, archive, tmp_path):
    cfg, _source = archive
    dest = f"plan-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=6)
    path = write_config(tmp_path, cfg.as_dict(redact=False))
    rc, out = run_cli(["restore", "--config", path, "--to-topic", dest, "--partitioner", "default", "--dry-run",
                       "--engine", "local"])
    assert rc == 0, out[-3000:]
    src = cfg.topics[0]
    assert f"{src}-1  {dest}-0..5 by key (keyless: {dest}-1)" in out
    assert (f"routing: {dest} (6 partitions): --partitioner default, murmur2 on the key as the Java producer's "
            f"default partitioner; keyless records keep their source partition number modulo the destination's "
            f"partition count") in out
    assert "from 4 source partition(s)" in out
    assert read_all(kafka, dest, 6) == {p: [] for p in range(6)}  # a dry run produces nothing


@pytest.mark.parametrize("fault", ["mid:2", "between:2"])
def test_sigkill_then_rerun_produces_each_record_once(spark, kafka, archive, tmp_path, fault):
    cfg, source = archive
    objs = [ArchivedObject.from_row(r) for r in manifest_rows(spark, cfg) if r.kind == "object"
            and r.kafka_partition == 0]
    rows = [{"topic": o.topic, "kafka_partition": o.kafka_partition, "object_key": o.object_key, "etag": o.etag,
             "version_id": o.version_id, "first_offset": o.first_offset, "last_offset": o.last_offset,
             "record_count": o.record_count, "side_files": [dict(s) for s in o.side_files], "format": o.format,
             "compression": o.compression, "size_bytes": o.size_bytes, "schema_id": o.schema_id,
             "min_timestamp": o.min_timestamp_ms, "max_timestamp": o.max_timestamp_ms} for o in objs]
    dest, name = f"parts-kill-{uuid.uuid4().hex[:8]}", f"k-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(dest, partitions=6)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"config": cfg.as_dict(redact=False), "rows": rows, "name": name, "topic": dest,
                                "partition": -1, "records_per_txn": 3, "router": [6, "default", None],
                                "producer": {"bootstrap.servers": kafka.bootstrap_servers}}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}

    def run(f: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(HERE / "restore_job.py"), str(spec), f], env=env,
                              capture_output=True, text=True, timeout=300)

    killed = run(fault)
    assert killed.returncode == -9, killed.stderr[-2000:]
    committed = 6 if fault == "between:2" else 3  # three records a transaction; mid:2 dies inside the second
    first = read_all(kafka, dest, 6)
    assert sorted(r for recs in first.values() for r in recs) == sorted(source[0][:committed])
    done = run("none")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["produced"] == len(source[0]) - committed
    check_routed(read_all(kafka, dest, 6), {0: source[0]}, 6)


def test_latest_per_key_is_chosen_per_source_then_routed(spark, kafka, archive, local_tasks):
    cfg, source = archive
    dest = f"latest-six-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=6)
    rep = lakesink.restore(spark, cfg, to_topic=dest, partitioner="default", latest_per_key=True, runner=local_tasks)
    last = {sp: [(k, v) for k, v in recs if v.endswith(b"-v%d" % (VERSIONS - 1))] for sp, recs in source.items()}
    assert rep.produced == len(KEYS) and rep.superseded == len(KEYS) * (VERSIONS - 1)
    check_routed(read_all(kafka, dest, 6), last, 6)
