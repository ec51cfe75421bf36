"""Data validation of an archive with Great Expectations (issue #11 item 6): ``lakesink validate`` and
``lakesink.validate(...)`` in a notebook. No Spark for a path manifest.

The built-in suite runs over frames derived from the job's manifest rows (pure functions below, unit-tested):

* ``ranges``: the distinct commit ranges of each Kafka partition, oldest first; ``chain_gap`` is
  ``range_start - (previous range_end + 1)``: 0 when the ranges chain, > 0 a gap, < 0 an overlap
  (null for a partition's first range). Expectation: ``chain_gap`` between 0 and 0; ``span`` >= 0.
* ``objects``: every object row; ``offsets_in_range`` (``range_start <= first_offset <= last_offset <=
  range_end``) and ``count_fits`` (``1 <= record_count <= last_offset - first_offset + 1``) must be true.
* ``sample``: a sample of objects read back at their recorded ETag
  (:func:`lakesink.executor.readback.read_object`); ``read_count_matches`` must be true (the object holds the
  manifest's ``record_count``, and it can be read at all).
* ``schemas`` (only under ``schema.compatibility`` BACKWARD or FULL, where older records are projected to the
  newest schema): per topic, Kafka partition and encoded partition, objects in offset order;
  ``version_step`` (this object's ``schema_version`` minus the previous one's) must be >= 0.

A user suite (``suite``: a GX 1.x expectation-suite JSON file, ``{"name": ..., "expectations": [{"type":
"expect_...", "kwargs": {...}}]}``) runs over the sampled objects' records: one row per record, a record's
fields as columns (a non-record value as the column ``value``), plus ``__object`` (its object key) and
``__record`` (``topic-partition@offset``). A failed expectation names up to :data:`MAX_EXAMPLES` failing rows:
the failing value, the record's topic-partition@offset and its object.
"""
from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from lakesink import wiring
from lakesink.errors import ArchiveReadError, InvalidArgumentError, LakesinkError, StoreError
from lakesink.manifest.rows import CHAIN_KINDS, REWRITTEN_NOTE, live_objects, value_omitted

__all__ = ["CheckOutcome", "ValidationReport", "validate", "range_frame", "object_frame", "schema_frame",
           "sample_objects", "load_suite", "PROJECTING_MODES", "DEFAULT_SAMPLE"]

#: Modes under which each encoded partition's schema versions only go up (older records are projected).
PROJECTING_MODES = ("BACKWARD", "FULL")
#: Objects read back by default.
DEFAULT_SAMPLE = 10
#: Failing rows named per check in the report.
MAX_EXAMPLES = 5


@dataclass
class CheckOutcome:
    """One expectation's result: which check, the GX expectation type and column, rows evaluated and failing."""

    check: str
    expectation: str
    column: str | None
    success: bool
    evaluated: int
    unexpected: int
    examples: list[str] = field(default_factory=list)   # failing rows, named (topic-partition@range, object key)


@dataclass
class ValidationReport:
    """What :func:`validate` found (CLI ``lakesink validate``, notebook ``lakesink.validate``)."""

    job: str
    rows: int
    objects_sampled: int
    records_sampled: int
    outcomes: list[CheckOutcome]
    notes: list[str] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return all(o.success for o in self.outcomes)

    @property
    def exit_code(self) -> int:
        return 0 if self.success else 1


# ------------------------------------------------------------------------------------------- pure frames

def _where(r: Mapping[str, Any]) -> str:
    return f"{r['topic']}-{r['kafka_partition']}@{r['range_start']}..{r['range_end']}"


def range_frame(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per distinct commit range of each partition, in offset order, with ``chain_gap`` (0 chains,
    > 0 gap, < 0 overlap, None for the partition's first range) and ``span`` (``range_end - range_start``)."""
    by: dict[tuple[str, int], set[tuple[int, int]]] = defaultdict(set)
    for r in rows:
        if r.get("kind") not in CHAIN_KINDS:  # deadletter/filtered: a note on offsets inside the chain, not a link
            continue
        by[(r["topic"], int(r["kafka_partition"]))].add((int(r["range_start"]), int(r["range_end"])))
    out = []
    for (topic, part), ranges in sorted(by.items()):
        prev_end = None
        for start, end in sorted(ranges):
            out.append({"where": f"{topic}-{part}@{start}..{end}", "topic": topic, "kafka_partition": part,
                        "range_start": start, "range_end": end,
                        "chain_gap": None if prev_end is None else start - (prev_end + 1), "span": end - start})
            prev_end = end if prev_end is None else max(prev_end, end)
    return out


def object_frame(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per object row: ``offsets_in_range`` and ``count_fits`` (see the module doc)."""
    out = []
    for r in rows:
        if r["kind"] != "object":
            continue
        first, last, n = r.get("first_offset"), r.get("last_offset"), int(r.get("record_count") or 0)
        known = first is not None and last is not None
        out.append({"where": f"{_where(r)} {r.get('object_key')}",
                    "offsets_in_range": known and r["range_start"] <= first <= last <= r["range_end"],
                    # an object an erase rewrote may hold no record any more (its note says so)
                    "count_fits": known and (0 if str(r.get("note") or "").startswith(REWRITTEN_NOTE) else 1)
                    <= n <= last - first + 1})
    return out


def schema_frame(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Object rows with a schema version, per topic / Kafka partition / encoded partition in offset order, with
    ``version_step`` (this version minus the previous object's; None for the first)."""
    by: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["kind"] == "object" and r.get("schema_version") is not None:
            by[(r["topic"], int(r["kafka_partition"]), r.get("encoded_partition") or "")].append(r)
    out = []
    for _, objs in sorted(by.items()):
        prev = None
        for r in sorted(objs, key=lambda r: (r.get("first_offset") or r["range_start"])):
            v = int(r["schema_version"])
            out.append({"where": f"{_where(r)} {r.get('object_key')} (version {v})",
                        "version_step": None if prev is None else v - prev})
            prev = v
    return out


def sample_objects(rows: Iterable[Mapping[str, Any]], n: int) -> list[Mapping[str, Any]]:
    """``n`` object rows spread evenly over the archive in (topic, partition, offset) order (all when fewer;
    deterministic, so a rerun reads the same objects); always includes the newest object."""
    objs = sorted((r for r in live_objects(rows) if not value_omitted(r)),  # expired: gone; tombstones: no values
                  key=lambda r: (r["topic"], r["kafka_partition"], r.get("first_offset") or r["range_start"]))
    if n <= 0:
        return []
    if len(objs) <= n:
        return objs
    if n == 1:
        return [objs[-1]]
    step = (len(objs) - 1) / (n - 1)
    return [objs[int(i * step + 0.5)] for i in range(n)]


def load_suite(suite: Any) -> dict[str, Any]:
    """A user suite as a dict: a path to a JSON file, a JSON string or a dict. Raises InvalidArgumentError
    naming the file when it is unreadable, not JSON, or has no ``expectations`` list of ``{"type", "kwargs"}``."""
    name = "the suite"
    obj = suite
    if isinstance(suite, (str, os.PathLike)) and not str(suite).lstrip().startswith("{"):
        name = f"suite file {suite}"
        try:
            with open(suite, encoding="utf-8") as f:
                obj = f.read()
        except OSError as e:
            raise InvalidArgumentError(f"{name}: cannot be read: {e.strerror or e}") from None
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except ValueError as e:
            raise InvalidArgumentError(f"{name}: not valid JSON: {e}") from None
    exps = obj.get("expectations") if isinstance(obj, dict) else None
    if not isinstance(exps, list) or not all(isinstance(e, dict) and (e.get("type") or e.get("expectation_type"))
                                             for e in exps):
        raise InvalidArgumentError(f"{name}: not an expectation suite: expected "
                                   '{"name": ..., "expectations": [{"type": "expect_...", "kwargs": {...}}]}')
    return obj


# ------------------------------------------------------------------------------------------- GX

def _gx():
    """Great Expectations (the ``validate`` extra), quiet: an ephemeral context, no analytics, no progress bars."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    try:
        import great_expectations as gx
    except ImportError:
        raise LakesinkError("lakesink validate needs Great Expectations: pip install 'lakesink[validate]'") from None
    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    return gx, ctx


class _Runner:
    """Runs expectation suites over pandas frames in one ephemeral GX context."""

    def __init__(self):
        self.gx, ctx = _gx()
        self.source = ctx.data_sources.add_pandas("lakesink")
        self.n = 0

    def run(self, check: str, frame: list[dict[str, Any]] | Any, expectations: list[Any]) -> list[CheckOutcome]:
        import pandas as pd

        df = frame if isinstance(frame, pd.DataFrame) else pd.DataFrame(frame)
        self.n += 1
        asset = self.source.add_dataframe_asset(name=f"{check}-{self.n}")
        batch = asset.add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": df})
        suite = self.gx.ExpectationSuite(name=check, expectations=expectations)
        fmt: dict[str, Any] = {"result_format": "COMPLETE"}
        index = ["__record", "__object"] if "__record" in df.columns else ["where"] if "where" in df.columns else []
        if index:
            fmt["unexpected_index_column_names"] = index
        res = batch.validate(suite, result_format=fmt)
        out = []
        for r in res.results:
            cfg, result = r.expectation_config, r.result or {}
            idx = result.get("unexpected_index_list") or []
            examples = [_example(i, index, cfg.kwargs.get("column")) for i in idx[:MAX_EXAMPLES]]
            if not r.success and not examples and r.exception_info and r.exception_info.get("exception_message"):
                examples = [r.exception_info["exception_message"]]
            out.append(CheckOutcome(check, cfg.type, cfg.kwargs.get("column"), bool(r.success),
                                    int(result.get("element_count", len(df))),
                                    int(result.get("unexpected_count") or (0 if r.success else 1)), examples))
        return out


def _user_expectations(suite: dict[str, Any]) -> list[Any]:
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    out = []
    for e in suite["expectations"]:
        try:
            out.append(ExpectationConfiguration(type=e.get("type") or e["expectation_type"],
                                                kwargs=e.get("kwargs") or {}, meta=e.get("meta")).to_domain_obj())
        except Exception as ex:  # noqa: BLE001 - GX raises its own errors for unknown types / bad kwargs
            raise InvalidArgumentError(f"suite {suite.get('name', '')!r}: expectation {e.get('type')!r}: {ex}") from None
    return out


# ------------------------------------------------------------------------------------------- driver

def manifest_rows(cfg, spark: Any, manifest: Any = None) -> list[dict[str, Any]]:
    """The rows of job ``cfg.name`` in its manifest (``manifest``, else the config's), as dicts (none when the table
    does not exist)."""
    from lakesink.manifest import queries

    m = manifest if manifest is not None else wiring.manifest(cfg, spark)
    if not m.exists():
        return []
    if hasattr(m, "arrow"):
        return queries.row_dicts(m.arrow(None, job=cfg.name))
    from pyspark.sql import functions as F

    return [r.asDict(recursive=True) for r in m.df().where(F.col("job") == cfg.name).collect()]


def _record_row(value: Any, key: str, where: str) -> dict[str, Any]:
    row = dict(value) if isinstance(value, Mapping) else {"value": value}
    row["__object"] = key
    row["__record"] = where
    return row


def record_places(store, obj: Any) -> list[str]:
    """``topic-partition@offset`` of each record of ``obj`` in order: offsets from its record-metadata side file,
    else counted from ``first_offset`` when its offsets are contiguous, else ``topic-partition@first..last #i``."""
    from lakesink.executor.readback import read_metadata

    tp = f"{obj.topic}-{obj.kafka_partition}"
    md = read_metadata(store, obj)
    if md is not None:
        return [f"{tp}@{int(o)}" for o in md[0]]
    if obj.last_offset - obj.first_offset + 1 == obj.record_count:
        return [f"{tp}@{obj.first_offset + i}" for i in range(obj.record_count)]
    return [f"{tp}@{obj.first_offset}..{obj.last_offset} #{i}" for i in range(obj.record_count)]


def _example(entry: Any, index: list[str], column: str | None) -> str:
    """One failing row as a user reads it: the failing value, where the record is, which object."""
    if not isinstance(entry, dict):
        return f"row {entry}"
    if "__record" in entry:
        v = entry.get(column) if column else None
        v = v.item() if hasattr(v, "item") else v  # pandas hands numpy scalars
        value = f"{column} = {v!r} " if column and column in entry else ""
        return f"{value}at {entry['__record']} in {entry.get('__object')}"
    return str(entry.get(index[0], entry)) if index else str(entry)


def validate(config: Any, suite: Any = None, *, sample: int = DEFAULT_SAMPLE, spark: Any = None,
             rows: list[Mapping[str, Any]] | None = None) -> ValidationReport:
    """Validate the job's archive: the built-in suite over its manifest (see the module doc) and ``suite``
    (a user expectation suite: path, JSON text or dict) over the records of ``sample`` objects read back.
    ``config``: a SinkConfig or a config file; ``spark``: only for a catalog-table manifest; ``rows``: manifest
    rows to validate instead of the table's (as dicts). Returns the report; ``report.success`` says whether
    every expectation held."""
    from lakesink.config import SinkConfig, load_config
    from lakesink.executor.readback import ArchivedObject, read_object

    cfg = config if isinstance(config, SinkConfig) else load_config(config)
    user = load_suite(suite) if suite is not None else None
    if sample < 0:
        raise InvalidArgumentError(f"sample {sample}: must be >= 0")
    rows = manifest_rows(cfg, spark) if rows is None else [dict(r) for r in rows]
    gx = _Runner()
    E = gx.gx.expectations
    outcomes: list[CheckOutcome] = []
    notes: list[str] = []
    if not rows:
        notes.append(f"no manifest rows for job {cfg.name!r}: nothing archived yet")
    ranges = range_frame(rows)
    if ranges:
        outcomes += gx.run("ranges chain per partition", ranges, [
            E.ExpectColumnValuesToBeBetween(column="chain_gap", min_value=0, max_value=0),
            E.ExpectColumnValuesToBeBetween(column="span", min_value=0)])
    objects = object_frame(rows)
    if objects:
        outcomes += gx.run("objects within their range", objects, [
            E.ExpectColumnValuesToBeInSet(column="offsets_in_range", value_set=[True]),
            E.ExpectColumnValuesToBeInSet(column="count_fits", value_set=[True])])
    mode = cfg.schema_compatibility.upper()
    if mode.split("_")[0] in PROJECTING_MODES:
        versions = schema_frame(rows)
        if versions:
            outcomes += gx.run(f"schema versions non-decreasing ({mode})", versions, [
                E.ExpectColumnValuesToBeBetween(column="version_step", min_value=0)])
    else:
        notes.append(f"schema versions not checked: schema.compatibility is {mode} (only BACKWARD/FULL project "
                     f"older records to the newest schema)")
    picked = sample_objects(rows, sample)
    records: list[dict[str, Any]] = []
    if picked:
        from lakesink.store import open_store

        from lakesink.objects import formats

        store = open_store(wiring.store_settings(cfg))
        fmts: dict[str, Any] = {}  # per the row's format: a job may have changed format.class over its life
        readback = []
        for r in picked:
            obj = ArchivedObject.from_row(r)
            name = r.get("format") or cfg.format_name
            try:
                if name not in fmts:
                    n, opts = wiring.format_spec(cfg, name)
                    fmts[name] = formats.create(n, **opts)
                values = read_object(store, fmts[name], obj)
                places = record_places(store, obj)
                ok, err = True, None
            except (ArchiveReadError, StoreError, InvalidArgumentError) as e:
                values, places, ok, err = [], [], False, str(e)
            readback.append({"where": f"{_where(r)} {obj.object_key}" + (f": {err}" if err else ""),
                             "read_count_matches": ok})
            records += [_record_row(v, obj.object_key, where) for v, where in zip(values, places)]
        outcomes += gx.run("record counts of sampled objects", readback, [
            E.ExpectColumnValuesToBeInSet(column="read_count_matches", value_set=[True])])
    if user is not None:
        if records:
            outcomes += gx.run(f"suite {user.get('name') or 'user'}", records, _user_expectations(user))
        else:
            notes.append("the user suite was not run: no records were sampled")
    return ValidationReport(cfg.name, len(rows), len(picked), len(records), outcomes, notes)
