"""``lakesink verify``: the whole archive of one job checked against its manifest, with a JSON evidence report.

What is checked, and the fault kinds a report names:

* the offset chain of every Kafka partition (from the manifest alone): its commit ranges chain with no gap
  (``offset-gap``) or overlap (``offset-overlap``); every object lies inside its commit range and holds no more
  records than its offsets span (``object-outside-range``); whatever a range holds beyond its objects is
  explained by the ``gaps`` view's reasons (advance, skipped, transaction markers, compaction, transforms, dead
  letters), so it is not a fault;
* every object and side file the manifest names exists (``missing-object``, ``missing-side-file``) with the ETag
  (``*-etag-mismatch``) and size (``*-size-mismatch``) it recorded;
* with ``deep`` (the default), every object's records are read back and counted, its side files with it
  (``unreadable``: the reader's line: a count that differs, bytes that do not parse, a side file out of step);
  an object ``lakesink erase`` rewrote must hold no record at an offset it erased (``erased-record-present``);
  the erased offsets themselves are holes the ``erased`` rows explain, not faults.

The object checks run as tasks of the job's runner (:mod:`lakesink.runners`: local worker processes or Spark),
one group of objects per task. The report carries what was checked, when, the manifest's version and every fault;
its exit code is 1 when there is any fault.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from lakesink import wiring
from lakesink.driver.archive import as_config, object_bytes, pack_objects
from lakesink.driver.validate import manifest_rows, object_frame, range_frame
from lakesink.manifest.rows import ERASED, erased_offsets, live_objects
from lakesink.errors import ManifestError

__all__ = ["Fault", "PartitionEvidence", "VerifyReport", "chain_faults", "verify"]


@dataclass(frozen=True)
class Fault:
    """One thing wrong: its kind (see the module docstring), where, and a line saying what."""

    kind: str
    topic: str
    kafka_partition: int
    object_key: str | None
    detail: str


@dataclass(frozen=True)
class PartitionEvidence:
    """What the manifest says of one Kafka partition: the offsets its commit ranges cover, and its objects."""

    topic: str
    kafka_partition: int
    first_offset: int
    next_offset: int
    objects: int
    records: int


@dataclass
class VerifyReport:
    """The evidence of one ``verify`` run (:meth:`to_json` is the report file)."""

    job: str
    manifest: str
    manifest_version: int | None
    started_at: str
    finished_at: str
    deep: bool
    runner: str
    objects: int
    side_files: int
    records_counted: int
    partitions: list[PartitionEvidence] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.faults

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "ok": self.ok}, indent=2, sort_keys=True)


def chain_faults(rows: Iterable[Mapping[str, Any]]) -> tuple[list[Fault], list[PartitionEvidence]]:
    """Offset-chain faults of a job's manifest rows and each partition's evidence (pure: no store, no Spark)."""
    rows = list(rows)
    ranges = range_frame(rows)
    faults = []
    for r in ranges:
        gap = r["chain_gap"]
        if gap is None or gap == 0:
            continue
        start = r["range_start"]
        if gap > 0:
            detail = (f"offsets {start - gap}..{start - 1} are in no committed range: neither archived nor "
                      f"explained by an advance or skipped row")
            kind = "offset-gap"
        else:
            detail = f"the range {start}..{r['range_end']} overlaps {-gap} offset(s) of the range before it"
            kind = "offset-overlap"
        faults.append(Fault(kind, r["topic"], r["kafka_partition"], None, f"{r['where']}: {detail}"))
    objects = [r for r in rows if r.get("kind") == "object"]
    for r, o in zip(objects, object_frame(objects)):
        if not (o["offsets_in_range"] and o["count_fits"]):
            faults.append(Fault("object-outside-range", r["topic"], int(r["kafka_partition"]), r.get("object_key"),
                                f"{o['where']}: offsets {r.get('first_offset')}..{r.get('last_offset')} "
                                f"({r.get('record_count')} records) do not fit the commit range"))
    live = live_objects(rows)  # an expired object is gone from the archive, not a fault
    evidence = []
    by: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for r in ranges:
        by.setdefault((r["topic"], r["kafka_partition"]), []).append(r)
    for (topic, part), ranges in sorted(by.items()):
        objs = [r for r in live if (r["topic"], int(r["kafka_partition"])) == (topic, part)]
        evidence.append(PartitionEvidence(topic, part, min(x["range_start"] for x in ranges),
                                          max(x["range_end"] for x in ranges) + 1, len(objs),
                                          sum(int(x.get("record_count") or 0) for x in objs)))
    return faults, evidence


def erased_runs(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[int, int]]]:
    """Per object key, the offset runs ``erased`` rows say an erase removed from it (the holes are not faults;
    a record back in one is: ``erased-record-present``)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for r in rows:
        if r.get("kind") == ERASED and r.get("object_key"):
            out.setdefault(r["object_key"], []).extend(erased_offsets(r.get("note")))
    return out


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def verify(config: Any, *, runner: Any = None, spark: Any = None, deep: bool = True) -> VerifyReport:
    """Verify ``config``'s job (a SinkConfig, dict or config file path). ``runner``: what runs the object checks
    (:mod:`lakesink.runners`; default Spark, in ``spark``); ``spark``: a session or a callable returning one, needed
    for a catalog-table manifest and the Spark runner. ``deep=False`` checks existence, ETags and sizes only."""
    from lakesink.executor.readback import ArchivedObject
    from lakesink.executor.verify import VERIFY_DDL, verify_task

    cfg = as_config(config)
    started = _now()
    manifest = wiring.manifest(cfg, spark)
    if not manifest.exists():
        raise ManifestError(f"no manifest table at {cfg.manifest_location}: job {cfg.name!r} has not committed "
                            f"anything yet")
    version = manifest.version()
    rows = manifest_rows(cfg, spark, manifest)
    faults, evidence = chain_faults(rows)
    objects = [ArchivedObject.from_row(r) for r in live_objects(rows)]  # expired objects are gone, not faults
    objects.sort(key=lambda o: (o.topic, o.kafka_partition, o.first_offset))
    if runner is None:
        from lakesink.runners.spark import SparkRunner

        runner = SparkRunner(spark)
    groups: list[list[ArchivedObject]] = []
    if objects:
        tasks = pack_objects([object_bytes(o) for o in objects], parallelism=runner.parallelism())
        groups = [[objects[i] for i in t] for t in tasks]
    parts = wiring.task_parts(cfg)
    erased = erased_runs(rows)
    out = (runner.run(lambda ids: verify_task(ids, groups, parts, deep, erased), len(groups), VERIFY_DDL)
           if groups else [])
    counted = 0
    for line in out:
        res = json.loads(line)
        counted += res["records"] or 0
        faults += [Fault(kind, res["topic"], res["kafka_partition"], res["object_key"], detail)
                   for kind, detail in res["faults"]]
    return VerifyReport(job=cfg.name, manifest=cfg.manifest_location, manifest_version=version, started_at=started,
                        finished_at=_now(), deep=deep, runner=runner.name, objects=len(objects),
                        side_files=sum(len(o.side_files) for o in objects), records_counted=counted,
                        partitions=evidence, faults=faults)
