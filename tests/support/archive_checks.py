"""Shared helpers for sink tests: produce records, build configs, check the archive through the manifest."""
from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict

from lakesink import wiring
from lakesink.driver.archive import iter_objects, read_object
from lakesink.objects.formats.base import RecordView
from lakesink.manifest import CHAIN_KINDS, Manifest
from lakesink.store import open_store


def produce(kafka, topic: str, values: list[bytes], keys: list[bytes] | None = None,
            partition_of=None, headers=True, timestamps: list[int] | None = None) -> dict[int, list[tuple[int, bytes, bytes]]]:
    """Produce and return {partition: [(offset, key, value)]} as Kafka assigned them."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5, "enable.idempotence": True})
    out: dict[int, list] = defaultdict(list)
    errors = []

    def done(err, msg):
        if err:
            errors.append(err)
        else:
            out[msg.partition()].append((msg.offset(), msg.key(), msg.value()))

    for i, v in enumerate(values):
        kw = {}
        if partition_of is not None:
            kw["partition"] = partition_of(i)
        if timestamps is not None:
            kw["timestamp"] = timestamps[i]
        p.produce(topic, value=v, key=keys[i] if keys else f"k{i}".encode(),
                  headers=[("i", str(i).encode())] if headers else None, on_delivery=done, **kw)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(60)
    assert not errors, errors
    return {k: sorted(v) for k, v in out.items()}


def base_config(kafka, s3, bucket: str, topic: str, **over) -> dict:
    cfg = {
        "name": f"job-{topic}",
        "topics": topic,
        "flush.size": "10",
        "format.class": "json",
        "s3.bucket.name": bucket,
        "s3.region": "us-east-1",
        "store.url": s3.endpoint_url,
        "aws.access.key.id": "testing",
        "aws.secret.access.key": "testing",
        "manifest.location": f"s3a://{bucket}/_lakesink/manifest",
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
    }
    cfg.update({k.replace("_", "."): v for k, v in over.items()})
    return cfg


class Row(dict):
    """A manifest row read by delta-rs, with a Spark Row's attribute access (``r.kind``, ``r.side_files[0].view``)
    and ``asDict()``; timestamps naive UTC as Spark's ``collect()`` gives them here."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def asDict(self, recursive: bool = False) -> dict:  # noqa: N802 - Spark's name
        return dict(self)

    @classmethod
    def of(cls, value):
        import datetime as dt

        if isinstance(value, dict):
            return cls({k: cls.of(v) for k, v in value.items()})
        if isinstance(value, list):
            return [cls.of(v) for v in value]
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value


def manifest_rows(spark, cfg) -> list:
    """The job's manifest rows. A path manifest written by delta-rs is read by delta-rs (a test's check should not
    cost a Spark job: ~100 calls across the suite); a Spark-engine or catalog manifest through Spark."""
    if cfg.manifest_engine == "delta-rs":
        table = wiring.manifest(cfg)
        return [Row.of(r) for r in table.arrow(job=cfg.name).to_pylist()] if table.exists() else []
    from pyspark.sql import functions as F

    return Manifest(spark, cfg.manifest_location).df().where(F.col("job") == cfg.name).collect()


def check_chains(rows, expected_end: dict[tuple[str, int], int] | None = None) -> dict[tuple[str, int], int]:
    """Ranges of each partition chain from 0 with no gap/overlap; returns next offset per partition."""
    by = defaultdict(set)
    for r in rows:
        if r.kind not in CHAIN_KINDS:  # deadletter/filtered: a note on offsets inside the chain's ranges
            continue
        by[(r.topic, r.kafka_partition)].add((r.range_start, r.range_end))
    nxt = {}
    for tp, ranges in by.items():
        expect = 0
        for a, b in sorted(ranges):
            assert a == expect, f"{tp}: range [{a}, {b}] does not chain from {expect}: {sorted(ranges)}"
            expect = b + 1
        nxt[tp] = expect
    if expected_end is not None:
        assert nxt == expected_end, (nxt, expected_end)
    return nxt


def archived_values(spark, cfg, view=RecordView.VALUE) -> dict[tuple[str, int], list]:
    """Every archived value per partition, objects in first-offset order, read and etag-verified."""
    rows = manifest_rows(spark, cfg)
    store = open_store(wiring.store_settings(cfg))
    fmt = {RecordView.VALUE: wiring.value_format, RecordView.KEYS: wiring.keys_format,
           RecordView.HEADERS: wiring.headers_format}[view](cfg)
    out = defaultdict(list)
    for obj in iter_objects(rows):
        out[(obj.topic, obj.kafka_partition)].extend(read_object(store, fmt, obj, view))
    return dict(out)


def json_values(raw: list[bytes]) -> list:
    return [json.loads(v) for v in raw]


# ---------------------------------------------------------------- crash / fencing helpers

AVRO_SCHEMA = {"type": "record", "name": "Event", "namespace": "lakesink.test",
               "fields": [{"name": "id", "type": "long"}, {"name": "pad", "type": "string"}]}


def avro_values(n: int, start: int = 0, schema: dict = AVRO_SCHEMA) -> list[bytes]:
    """Bare Avro binary (no Schema Registry wire prefix): decode with ``value.schema``."""
    import io

    import fastavro

    parsed = fastavro.parse_schema(schema)
    out = []
    for i in range(start, start + n):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {"id": i, "pad": "x" * 20})
        out.append(buf.getvalue())
    return out


def json_payloads(n: int, start: int = 0) -> list[bytes]:
    return [json.dumps({"id": i, "pad": "x" * 20}).encode() for i in range(start, start + n)]


def expected_values(sent: dict[int, list[tuple[int, bytes, bytes]]], fmt: str) -> dict[int, list]:
    """What reading the archive back must give per partition, in offset order."""
    import io

    import fastavro

    if fmt == "avro":
        parsed = fastavro.parse_schema(AVRO_SCHEMA)
        dec = lambda v: fastavro.schemaless_reader(io.BytesIO(v), parsed, None)  # noqa: E731
    else:
        dec = json.loads
    return {p: [dec(v) for _o, _k, v in recs] for p, recs in sent.items()}


def check_exactly_once(spark, cfg, sent: dict[int, list[tuple[int, bytes, bytes]]], fmt: str) -> list:
    """Through the manifest: every produced offset of every partition is archived exactly once.

    Ranges chain from 0 to the end offset with no gap or overlap, object offset ranges lie inside
    their commit group and never overlap, record counts add up, every object holds exactly its
    ``record_count`` records (etag-verified read), and the values equal the produced ones in offset order.
    """
    rows = manifest_rows(spark, cfg)
    topic = cfg.topics[0]
    ends = {(topic, p): recs[-1][0] + 1 for p, recs in sent.items()}
    check_chains(rows, ends)
    by = defaultdict(list)
    for r in rows:
        by[r.kafka_partition].append(r)
    for p, recs in sent.items():
        objs = sorted((r for r in by[p] if r.kind == "object"), key=lambda r: r.first_offset)
        assert all(r.kind in ("object", "advance") for r in by[p]), [r.kind for r in by[p]]
        for r in objs:
            assert r.range_start <= r.first_offset <= r.last_offset <= r.range_end, r
        for a, b in zip(objs, objs[1:]):
            assert a.last_offset < b.first_offset, f"objects overlap: {a.object_key} {b.object_key}"
        assert len({r.object_key for r in objs}) == len(objs), "an object key is committed twice"
        assert sum(r.record_count for r in objs) == len(recs), (p, [r.record_count for r in objs], len(recs))
    got = archived_values(spark, cfg)  # read_object checks each object's count == record_count
    want = expected_values(sent, fmt)
    for p in sent:
        assert got.get((topic, p)) == want[p], f"partition {p}: archived values differ from the produced ones"
    return rows


def write_config(tmp_path, cfg: dict, name: str = "sink.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return str(path)


def run_cli(args: list[str], env_extra: dict | None = None, timeout: float = 240, log_path=None, watch=None,
            command: list[str] | None = None, cwd=None, env: dict | None = None):
    """Run ``python -m lakesink.cli ARGS`` in its own process group; after it exits, kill whatever it left
    (its Spark JVM and Python workers) so nothing of the dead run keeps writing, and remove its Spark
    scratch directories (a SIGKILLed driver leaves ~700 MB of copied jars behind). Returns (returncode, output).
    ``watch(pgid)``, if given, is called every 50 ms while the run is alive. ``command`` replaces
    ``python -m lakesink.cli`` (e.g. a test's own script); ``cwd``: the run's working directory; ``env`` replaces
    this process's environment as the base ``env_extra`` adds to (a run that must not see a variable)."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import tempfile
    import time

    scratch = tempfile.mkdtemp(prefix="lakesink-cli-spark-")
    env = {**(os.environ if env is None else env), "SPARK_LOCAL_DIRS": scratch, **(env_extra or {})}
    out = open(log_path, "w+b") if log_path else tempfile.TemporaryFile()
    with out:
        proc = subprocess.Popen([*(command or [sys.executable, "-m", "lakesink.cli"]), *args], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)
        try:
            if watch is None:
                rc = proc.wait(timeout=timeout)
            else:
                deadline = time.monotonic() + timeout
                while (rc := proc.poll()) is None:
                    if time.monotonic() > deadline:
                        raise subprocess.TimeoutExpired(proc.args, timeout)
                    watch(proc.pid)
                    time.sleep(0.05)
        finally:
            # the group id is the pid of the process we started (start_new_session)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and _group_alive(proc.pid):
                time.sleep(0.2)
            shutil.rmtree(scratch, ignore_errors=True)
        out.seek(0)
        return rc, out.read().decode(errors="replace")


def _group_alive(pgid: int) -> bool:
    """True while a non-zombie process of the group exists."""
    import os

    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def process_tree(pgid: int) -> list[int]:
    """Pids of the process group ``pgid`` and of every descendant of its leader (whatever their group)."""
    import os

    parent, group = {}, {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(pid)], group[int(pid)] = int(fields[1]), int(fields[2])
    tree = {p for p, g in group.items() if g == pgid} | {pgid}
    grew = True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    return sorted(p for p in tree if p in parent)


def proc_info(pid: int) -> tuple[bytes, list[str]] | None:
    """(command line, /proc stat fields after the name: state, ppid, pgrp, ...) of a live process; None if gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return cmd, fields


def is_local_worker(pid: int, cmdline: bytes | str) -> bool:
    """Whether ``pid`` (whose command line was ``cmdline``) is a local worker: a spawned group's
    (``-m lakesink.executor.local_worker``), or one the driver forked, named ``lakesink-worker``
    (lakesink.executor.local_worker.NAME) in ``/proc/PID/comm``."""
    from lakesink.executor.local_worker import MODULE, NAME

    text = cmdline.decode(errors="replace") if isinstance(cmdline, bytes) else cmdline
    if MODULE in text:
        return True
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip() == NAME
    except OSError:
        return False


def local_worker_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) local worker (:func:`is_local_worker`)."""
    info = proc_info(pid)
    return info is not None and info[1][0] != "Z" and is_local_worker(pid, info[0])


def local_workers_of(driver: int) -> list[int]:
    """Pids of the live local workers of driver process ``driver``: the one it started, and those that one
    forked (lakesink.runners.local)."""
    import os

    workers: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and local_worker_alive(int(d)):
            info = proc_info(int(d))
            if info is not None:
                workers[int(d)] = int(info[1][1])
    started = {w for w, parent in workers.items() if parent == driver}
    return sorted(started | {w for w, parent in workers.items() if parent in started})


def consume(kafka, topic: str, partition: int = 0, isolation: str = "read_committed",
            offsets: bool = False) -> list[tuple]:
    """Every record of ``topic``-``partition`` visible at ``isolation``: (key, value, headers, timestamp, type),
    with the record's offset first when ``offsets``."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": isolation,
                  "auto.offset.reset": "earliest"})
    out = []
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(m.error().str())
            rec = (m.key(), m.value(), list(m.headers() or []), m.timestamp()[1], m.timestamp()[0])
            out.append((m.offset(), *rec) if offsets else rec)
        raise AssertionError("no end of partition within 60 s")
    finally:
        c.close()


def stored_versions(s3, bucket: str) -> dict[str, int]:
    """Every data key of ``bucket`` (not the manifest's) with its number of stored versions (delete markers not
    counted)."""
    out: dict[str, int] = {}
    for page in s3.client().get_paginator("list_object_versions").paginate(Bucket=bucket):
        for v in page.get("Versions", []):
            if not v["Key"].startswith("_lakesink/"):
                out[v["Key"]] = out.get(v["Key"], 0) + 1
    return out


def sql_rows(path: str, query: str) -> list[dict]:
    """The rows of ``lakesink --format json sql --config path query`` (exit 0 asserted)."""
    rc, out = run_cli(["--format", "json", "sql", "--config", path, query])
    assert rc == 0, out
    doc = json.loads(next(ln for ln in out.splitlines() if ln.startswith("{")))
    return doc["rows"]
