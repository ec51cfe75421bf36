"""Crash recovery: the driver is SIGKILLed at each point of the commit protocol; a rerun archives
every produced offset exactly once (checked through the manifest and by reading the objects back).

The crashing run is a separate process (its own Spark driver, ``crash_job.py``) whose SinkJob gets a
``faults.KillAt`` hook; the rerun happens in this process with ``--flush-tail`` semantics. Cases run on both
engines: tasks in a local Spark session, and in local worker processes (the CLI's local engine).
Spark start-up dominates the cost, so a module fixture sets every case up (own topic, own bucket)
(:data:`CASES`: the time-based combination runs on the local engine only)
and runs the crashing processes two at a time in the background while the tests rerun and check.
Data is tiny (2 partitions x 23 records, flush.size 5): the crashing run would commit 4 groups per
partition and leave a 3-record tail open, the rerun closes the tail too.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.archive_checks import (AVRO_SCHEMA, avro_values, base_config, check_exactly_once, json_payloads,
                                    manifest_rows, produce, run_cli, write_config)

from lakesink import wiring
from lakesink.config import load_config
from lakesink.driver.sink import SinkJob
from lakesink.store import open_store

HERE = Path(__file__).parent
# crash_job.py imports the KillAt hook as support.faults and the executors unpickle it: both need tests/ on
# their path
CRASH_ENV = {"PYTHONPATH": os.pathsep.join(p for p in (str(HERE.parent), os.environ.get("PYTHONPATH", "")) if p)}
PER_PARTITION = 23
FLUSH = 5

COMBOS = {
    "avro-default": {"format.class": "avro", "value.schema": json.dumps(AVRO_SCHEMA)},
    "json-timebased-wallclock": {
        "format.class": "json",
        "partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
        "path.format": "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH",
        "partition.duration.ms": "3600000", "locale": "en", "timezone": "UTC",
        "timestamp.extractor": "Wallclock"},
}

#: what runs the crashing run's tasks (crash_job.py's ENGINE)
ENGINES = ("spark", "local")

# fault spec → what the manifest must hold when the crashed run is dead
POINTS = {
    "after_upload:1": "nothing",      # SIGKILL from an executor after its 2nd uploaded object
    "before_commit": "nothing",       # every object uploaded and resolved, Delta not yet written
    "during_commit:1500": "either",   # timer fires while the Delta write (or its read-back) runs
    "after_commit": "batch0",         # committed and verified, killed before returning
}

#: every fault point on the local engine with both partitioners; on Spark the point where the engines differ -- a
#: kill from inside a task (``after_upload``: a Spark Python worker rather than a local worker process) -- with the
#: default partitioner. The other points interrupt the driver's commit protocol, the same code on either engine,
#: and a Spark crash process costs a JVM start: 6 fewer of them than the full matrix keep make test in budget.
CASES = [(f, c, e) for f in POINTS for c in COMBOS for e in ENGINES
         if e == "local" or (c == "avro-default" and f.startswith("after_upload"))]


@dataclass
class Case:
    topic: str
    bucket: str
    cfg_file: str
    sent: dict
    crash: Future  # -> (returncode, output) of the crashing process


@pytest.fixture(scope="module")
def crashed(kafka, s3, tmp_path_factory):
    """Every (fault, combo, engine) case: topic produced, config written, crashing run started in the
    background."""
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="crash")
    cases: dict[tuple[str, str, str], Case] = {}
    try:
        for fault, combo, engine in CASES:
            over = COMBOS[combo]
            topic = f"t-{uuid.uuid4().hex[:10]}"
            bucket = s3.create_bucket(f"crash-{uuid.uuid4().hex[:12]}")
            kafka.create_topic(topic, partitions=2)
            make = avro_values if over["format.class"] == "avro" else json_payloads
            sent = produce(kafka, topic, make(2 * PER_PARTITION), partition_of=lambda i: i % 2)
            d = tmp_path_factory.mktemp(f"{fault.split(':')[0]}-{combo}-{engine}")
            cfg_file = write_config(d, base_config(kafka, s3, bucket, topic, **{"flush.size": str(FLUSH), **over}))
            fut = pool.submit(run_cli, [fault, cfg_file, "local[2]", engine], CRASH_ENV, 600, d / "crash.log",
                              command=[sys.executable, str(HERE / "crash_job.py")])
            cases[(fault, combo, engine)] = Case(topic, bucket, cfg_file, sent, fut)
        yield cases
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("fault, combo, engine", CASES)
def test_sigkill_then_rerun_is_exactly_once(spark, s3, crashed, fault, combo, engine):
    case = crashed[(fault, combo, engine)]
    fmt = COMBOS[combo]["format.class"]
    sent, topic_name = case.sent, case.topic
    assert {p: len(r) for p, r in sent.items()} == {0: PER_PARTITION, 1: PER_PARTITION}
    cfg = load_config(case.cfg_file)

    rc, out = case.crash.result()
    assert rc == -signal.SIGKILL, f"the faulted run did not die by SIGKILL (rc {rc}):\n{out[-3000:]}"
    assert "batch 0:" not in out, "the faulted run reported success"

    store = open_store(wiring.store_settings(cfg))
    uploaded = {o.key for o in store.list(f"topics/{topic_name}/")}
    before = manifest_rows(spark, cfg)
    expect = POINTS[fault]
    if expect == "nothing":
        assert before == [], f"{fault}: the killed run committed {len(before)} rows"
        assert uploaded, f"{fault}: the killed run uploaded nothing (the fault fired too early)"
    elif expect == "batch0":
        assert {r.batch_id for r in before} == {0}
        assert sum(r.record_count for r in before) == 2 * (PER_PARTITION // FLUSH) * FLUSH
    else:
        assert {r.batch_id for r in before} <= {0}
        assert len(before) in (0, 2 * (PER_PARTITION // FLUSH)), "a partial Delta commit is visible"
    # orphans, if any, are never visible through the manifest
    assert {r.object_key for r in before} <= uploaded

    res = SinkJob(spark, cfg).run_batch(flush_tail=True)
    assert res.batch_id == (1 if before else 0)
    rows = check_exactly_once(spark, cfg, sent, fmt)
    assert {r.batch_id for r in rows} == ({0, 1} if before else {0})
