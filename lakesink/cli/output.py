"""Rendering of what the subcommands return (modelled on pyiceberg's ``pyiceberg.cli.output``).

Commands never print their results: they return data (the dataclasses of :mod:`lakesink.cli.results`, or the library's own
``BatchResult`` / ``VacuumReport``) and an :class:`Output` chosen by the global ``--format`` option
renders it, as text for people (:class:`TextOutput`) or as JSON for scripts (:class:`JsonOutput`).
Streamed results (one per sink batch) go through :meth:`Output.batch` as they happen.

Size: one renderer per result type in each of the three formats, kept together so a result's text, JSON and CSV
forms are read and changed side by side; the dict forms shared by JSON and CSV sit below the classes.
"""
from __future__ import annotations

import json
import sys
from abc import ABC, abstractmethod
from dataclasses import asdict, is_dataclass
from typing import TYPE_CHECKING, Any, Callable, TextIO

from lakesink.cli.results import (CheckResult, DemoResult, HandoverResult, ImportResult, RestoreResult,  # noqa: F401
                                  SchemaCheckResult, SchemaHistoryResult, SinkResult, StatusResult, TableResult,
                                  TranslateResult, VacuumResult)

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.devstack.cli import DevResult


def __getattr__(name: str) -> Any:
    """``DevResult`` (:mod:`lakesink.devstack.cli`) on first use: importing it with this module cost every command
    the dev stack's modules."""
    if name == "DevResult":
        from lakesink.devstack.cli import DevResult

        return DevResult
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------------------------- outputs


def resolved_masked(text: str) -> str:
    """``text`` with the values config providers resolved in this process masked (lakesink.config.providers):
    an error at run time may quote one (an S3 error naming the bucket)."""
    providers = sys.modules.get("lakesink.config.providers")  # not loaded: nothing was resolved
    return providers.scrub_resolved(text) if providers is not None else text


class Output(ABC):
    """How a command's result reaches the user."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None):
        self._out, self._err = out, err

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout  # looked up late: pytest's capsys swaps sys.stdout

    @property
    def err(self) -> TextIO:
        return self._err or sys.stderr

    def render(self, result: Any) -> None:
        """Dispatch on the result's type; ``None`` renders nothing."""
        if result is None:
            return
        dev = sys.modules.get("lakesink.devstack.cli")  # not imported (0.04 s): the result is no DevResult
        for typ, method in ((CheckResult, self.check), (SinkResult, self.sink), (VacuumResult, self.vacuum),
                            (RestoreResult, self.restore), (ImportResult, self.manifest_import),
                            (HandoverResult, self.handover), (DemoResult, self.demo),
                            *(((dev.DevResult, self.dev),) if dev is not None else ()),
                            (SchemaHistoryResult, self.schema_history), (SchemaCheckResult, self.schema_check),
                            (TableResult, self.table), (StatusResult, self.status),
                            (TranslateResult, self.translated)):
            if isinstance(result, typ):
                return method(result)
        return self.data(result)

    def warning(self, text: str) -> None:
        print(f"lakesink: warning: {text}", file=self.err, flush=True)

    def progress(self, text: str) -> None:
        """Narration of a long command (the demo); not part of its result."""

    def exception(self, ex: BaseException, internal: bool = False) -> None:
        """Called after the one-line ``lakesink: error:`` message went to stderr."""

    @abstractmethod
    def check(self, r: CheckResult) -> None: ...

    @abstractmethod
    def batch(self, res: Any) -> None: ...

    @abstractmethod
    def sink(self, r: SinkResult) -> None: ...

    @abstractmethod
    def vacuum(self, r: VacuumResult) -> None: ...

    def restore(self, r: RestoreResult) -> None:
        self.data(restore_dict(r))

    def manifest_import(self, r: ImportResult) -> None:
        self.data(import_dict(r))

    def handover(self, r: HandoverResult) -> None:
        rep = r.report
        self.data({"source": rep.source, "dry_run": rep.dry_run, "batch_id": rep.batch_id,
                   "advanced": [{"topic": t, "partition": p, "range_start": a, "range_end": b}
                                for t, p, a, b in rep.advanced],
                   "already": [{"topic": t, "partition": p, "next_offset": n, "given_offset": o}
                               for t, p, n, o in rep.already],
                   "uncovered": [{"topic": t, "partition": p} for t, p in rep.uncovered]})

    def schema_history(self, r: SchemaHistoryResult) -> None:
        self.data(schema_history_dict(r))

    def schema_check(self, r: SchemaCheckResult) -> None:
        self.data(schema_check_dict(r))

    def table(self, r: TableResult) -> None:
        rows = [{c: (v.asDict(recursive=True) if hasattr(v, "asDict") else v) for c, v in zip(r.columns, row)}
                for row in r.rows]
        self.data({"columns": r.columns, "rows": rows, "notes": r.notes})

    def status(self, r: StatusResult) -> None:
        self.data(status_dict(r))

    def translated(self, r: TranslateResult) -> None:
        self.data({"path": r.path, "connector": r.connector, "properties": r.properties, "withheld": r.withheld,
                   "mapping": [{"key": k, "lakesink": t, "note": n} for k, t, n in r.mapping],
                   "differences": r.differences, "notes": r.notes})

    @abstractmethod
    def demo(self, r: DemoResult) -> None: ...

    @abstractmethod
    def dev(self, r: DevResult) -> None: ...

    @abstractmethod
    def data(self, obj: Any) -> None: ...


class TextOutput(Output):
    """Plain lines, for people."""

    def _p(self, *lines: str) -> None:
        for line in lines:
            print(line, file=self.out, flush=True)

    def check(self, r: CheckResult) -> None:
        self._p(f"{r.path}: OK (job {r.name!r})")
        self._p(*(f"  ignored: {k} ({why})" for k, why in r.ignored_keys))
        self._p(*(f"  warning: {w}" for w in r.warnings))

    def batch(self, res: Any) -> None:
        self._p(res.summary())

    def sink(self, r: SinkResult) -> None:
        pass  # each batch's line was printed when it committed

    def vacuum(self, r: VacuumResult) -> None:
        self._p(*r.report.lines(r.uri))
        if not r.execute and (r.report.orphans or r.report.uploads):
            self._p("dry run: pass --execute to delete")

    def progress(self, text: str) -> None:
        self._p(text)

    def manifest_import(self, r: ImportResult) -> None:
        rep = r.report
        verb = "would import" if rep.dry_run else "imported"
        self._p(*(f"{verb} {r.uri(o.key)} ({o.topic}-{o.partition} offsets {o.first_offset}..{o.last_offset}, "
                  f"{o.records} records)" for o in rep.imported))
        self._p(*(f"overlap: {x}" for x in rep.overlaps), *(f"gap: {x}" for x in rep.gaps),
                *(f"empty, not imported: {r.uri(k)}" for k in rep.empty),
                *(f"unrecognized, not imported: {r.uri(k)}" for k in rep.unrecognized),
                *(f"refused: {x}" for x in rep.refused))
        tail = f" in batch {rep.batch_id}" if rep.batch_id is not None else ""
        self._p(f"{verb} {len(rep.imported)} object(s), {rep.records} record(s){tail}; {rep.already_in_manifest} "
                f"already in the manifest, {len(rep.overlaps)} overlap(s), {len(rep.gaps)} gap(s), "
                f"{len(rep.unrecognized)} unrecognized key(s)" + (f", {len(rep.refused)} refused" if rep.refused else ""))

    def handover(self, r: HandoverResult) -> None:
        rep = r.report
        verb = "would advance" if rep.dry_run else "advanced"
        self._p(*(f"{verb} {t}-{p} over offsets {a}..{b} (archived by the old connector); the job starts at {b + 1}"
                  for t, p, a, b in rep.advanced))
        self._p(*(f"left as it is: {t}-{p} (the manifest is at offset {n}, {rep.source} gives {o})"
                  for t, p, n, o in rep.already))
        self._p(*(f"no offset from {rep.source}: {t}-{p} (the sink archives it from its beginning)"
                  for t, p in rep.uncovered))
        tail = f" in batch {rep.batch_id}" if rep.batch_id is not None else ""
        self._p(f"hand-over from {rep.source}: {len(rep.advanced)} partition(s) {verb}{tail}")

    def restore(self, r: RestoreResult) -> None:
        rep = r.report
        head = ("source", "destination", "objects", "records", "bytes") + (
            () if rep.dry_run else ("produced", "skipped", "resumed_from", "next_offset"))
        rows = []
        for p in rep.partitions:
            row = (f"{p.source_topic}-{p.source_partition}", p.destination, str(p.objects),
                   f"{p.records}{'' if p.exact else ' (at most)'}", str(p.bytes))
            if not rep.dry_run:
                row += (str(p.produced), str(p.skipped), "-" if p.resumed_from is None else str(p.resumed_from),
                        "-" if p.next_offset is None else str(p.next_offset))
            rows.append(row)
        if rows:
            widths = [max(len(x) for x in col) for col in zip(head, *rows)]
            self._p(*("  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in (head, *rows)))
        at_most = "" if rep.exact else " at most"
        label = "restore" if rep.name is None else f"restore {rep.name!r}"
        mode = f" ({rep.mode}: it produces at most the records it reads)" if rep.latest_per_key else ""
        count = (f"{len(rep.partitions)} source partition(s)" if getattr(rep, "routing", None)
                 else f"{len(rep.partitions)} partition(s)")
        where = f"from {count}" if getattr(rep, "routing", None) else f"into {count}"
        if rep.dry_run:
            self._p(f"dry run of {label}: would read {rep.objects} object(s),{at_most} {rep.records} "
                    f"record(s), {rep.bytes} bytes, {where}{mode}")
        else:
            left = (f"{rep.superseded} older version(s) left out, "
                    + (f"{rep.tombstones_dropped} tombstone(s) dropped, " if rep.drop_tombstones else "")
                    if rep.latest_per_key else "")
            self._p(f"{label}: {rep.produced} record(s) produced, {rep.skipped} already restored, {left}"
                    f"{count}, {rep.seconds:.1f}s (progress in group {rep.group!r})")
        self._p(*(f"  schema copied: {c}" for c in getattr(rep, "schema_copies", None) or ()))
        self._p(*(f"  consumer group {c}" for c in getattr(rep, "groups", None) or ()))
        self._p(*(f"  routing: {line}" for line in getattr(rep, "routing", None) or ()))

    def schema_history(self, r: SchemaHistoryResult) -> None:
        head = ("topic", "subject", "version", "id", "fingerprint", "partitions", "first_offset", "last_offset",
                "min_timestamp", "max_timestamp", "objects", "records")
        dash = lambda v: "-" if v is None else str(v)  # noqa: E731
        rows = [(e.topic, dash(e.subject), dash(e.version), dash(e.id), dash(e.fingerprint and e.fingerprint[:12]),
                 ",".join(map(str, e.partitions)) or "-", dash(e.first_offset), dash(e.last_offset),
                 dash(e.min_timestamp and e.min_timestamp.isoformat(sep=" ")),
                 dash(e.max_timestamp and e.max_timestamp.isoformat(sep=" ")), str(e.objects), str(e.records))
                for e in r.report.entries]
        if not rows:
            self._p(f"no archived objects for job {r.report.job!r}"
                    + (f" and topic {r.report.topic!r}" if r.report.topic else ""))
            return
        widths = [max(len(x) for x in col) for col in zip(head, *rows)]
        self._p(*("  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in (head, *rows)))

    def schema_check(self, r: SchemaCheckResult) -> None:
        rep = r.report
        for w in rep.warnings:
            self.warning(w)
        self._p(f"topic {rep.topic}, subject {rep.subject or '-'}, mode {rep.mode}: "
                f"{len(rep.versions)} earlier version(s)")
        self._p(*(f"  {v.label}: {'; '.join(v.sources)}" for v in rep.versions))
        if rep.nothing_to_compare is not None and rep.compatible:
            verdict = "accepted (--allow-empty)" if rep.allow_empty else "not passed (--allow-empty accepts it)"
            self._p(f"NOTHING TO COMPARE ({rep.mode}): {rep.nothing_to_compare}; {verdict}")
        elif rep.compatible:
            against = ", ".join(rep.compared) if rep.compared else "nothing to compare"
            self._p(f"compatible ({rep.mode}; compared with {against})")
        else:
            self._p(f"INCOMPATIBLE: {len(rep.incompatibilities)} problem(s) ({rep.mode}; compared with "
                    f"{', '.join(rep.compared)})")
            self._p(*(f"  {i.message}" for i in rep.incompatibilities))

    def table(self, r: TableResult) -> None:
        self._p(*aligned(r.columns, [[display_text(v) for v in row] for row in r.rows]))
        self._p(f"({len(r.rows)} row{'' if len(r.rows) == 1 else 's'})", *r.notes)

    def translated(self, r: TranslateResult) -> None:
        """The config on stdout (redirect it to a file); the key mapping and differences as comments in it."""
        self._p(f"# {r.path}: recognised as {r.connector}")
        self._p(*(f"#   {k} -> {t}" + (f": {n}" if n else "") for k, t, n in r.mapping))
        self._p("# what differs in the objects:", *(f"#   - {d}" for d in r.differences))
        self.out.write(r.properties)
        self.out.flush()

    def status(self, r: StatusResult) -> None:
        rep = r.report
        cols, rows = status_table(rep)
        if rows:
            self._p(*aligned(cols, [[cell_text(v) for v in row] for row in rows]))
        unhealthy = f"UNHEALTHY ({len(rep.problems)} problem(s))"
        state = rep.state if rep.healthy else (f"{rep.state}, {unhealthy}" if rep.state in ("NEVER RUN", "FAILED")
                                               else unhealthy)
        self._p(f"job {rep.job!r}: {state}; {len(rep.partitions)} partition(s), lag {rep.total_lag} record(s), "
                f"{rep.orphans} orphan object(s)")
        self._p(*(f"  {line}" for line in ([rep.note] if rep.note else []) + rep.problems))
        last = rep.last_run
        if last is not None and rep.failures <= rep.thresholds.max_failures:
            self._p(f"  last run: {last.outcome} at {last.ended_at:%Y-%m-%d %H:%M:%S} UTC"
                    + (f", exit {last.exit_code}: {last.error}" if last.outcome != "OK" else
                       f", {last.batches} batch(es), {last.records} record(s)"))

    def demo(self, r: DemoResult) -> None:
        ok = "OK" if r.ok else "MISMATCH"
        print(f"== {ok}: {r.archived} of {r.records} records archived exactly once in {r.seconds:.0f}s",
              file=self.out if r.ok else self.err, flush=True)

    def dev(self, r: DevResult) -> None:
        if r.message:
            self._p(r.message)
        if r.state and (r.running or r.action == "up"):
            s = r.state
            self._p(f"Kafka bootstrap servers: {s['bootstrap_servers']}  (pid {s.get('kafka_pid')})",
                    f"S3 endpoint:             {s['s3_endpoint']}  (access/secret key "
                    f"{s['s3_access_key']}/{s['s3_secret_key']}, region {s['s3_region']}, path-style)",
                    *([f"Schema Registry:         {s['schema_registry_url']}  (pid {s.get('registry_pid')}, "
                       f"Apicurio, Confluent API)"] if s.get("schema_registry_url") else []),
                    *([f"Kafka SASL_SSL:          {s['secured_bootstrap_servers']}  (SCRAM-SHA-512, user "
                       f"{s['kafka_sasl_username']}, password in {r.state_file}; CA {s['kafka_ca_location']})"]
                      if s.get("secured_bootstrap_servers") else []),
                    f"Supervisor pid:          {s['supervisor_pid']}",
                    f"# export LAKESINK_BOOTSTRAP_SERVERS={s['bootstrap_servers']} "
                    f"AWS_ENDPOINT_URL={s['s3_endpoint']} AWS_ACCESS_KEY_ID={s['s3_access_key']} "
                    f"AWS_SECRET_ACCESS_KEY={s['s3_secret_key']} AWS_DEFAULT_REGION={s['s3_region']}")
        if r.ports_open is not None:
            k, s3 = r.ports_open.get("kafka"), r.ports_open.get("s3")
            reg = r.ports_open.get("registry")
            self._p(f"Kafka port {'open' if k else 'CLOSED'}, S3 port {'open' if s3 else 'CLOSED'}"
                    + ("" if reg is None else f", Schema Registry port {'open' if reg else 'CLOSED'}"))

    def data(self, obj: Any) -> None:
        self._p(str(obj))


def display_text(v: Any) -> str:
    """:func:`cell_text` for people: a fractional number rounded to 6 decimals (``1.5699211030000697`` ->
    ``1.569921``); JSON and CSV keep the exact value."""
    import decimal

    if isinstance(v, float) and v == v and v not in (float("inf"), float("-inf")) or isinstance(v, decimal.Decimal):
        text = f"{round(v, 6):.6f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return cell_text(v)


def cell_text(v: Any) -> str:
    """A value as one table cell: NULL for None, ISO time for datetimes, JSON for lists/dicts/rows."""
    import datetime as dt

    if v is None:
        return "NULL"
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if hasattr(v, "asDict"):
        v = v.asDict(recursive=True)
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(_plain(v), default=str)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return str(v)


def aligned(columns: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of an aligned text table (header, dashes, rows); numbers are right-aligned."""
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    numeric = [bool(rows) and all(r[i].lstrip("-").replace(".", "", 1).isdigit() or r[i] == "NULL" for r in rows)
               for i in range(len(columns))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()
    return [line(list(columns)), line(["-" * w for w in widths]), *(line(r) for r in rows)]


STATUS_COLUMNS = ["topic", "partition", "committed_offset", "end_offset", "lag", "last_commit_at",
                  "last_commit_age_s", "orphans", "problems"]


def status_table(rep: Any) -> tuple[list[str], list[list[Any]]]:
    """``lakesink status`` as columns and rows (the text and CSV forms)."""
    rows = [[p.topic, p.partition, p.committed_offset, p.end_offset, p.lag, p.last_commit_at,
             None if p.last_commit_age_s is None else round(p.last_commit_age_s), p.orphans,
             "; ".join(p.problems) or None] for p in rep.partitions]
    return STATUS_COLUMNS, rows


def status_dict(r: "StatusResult") -> dict:
    """The JSON form of ``lakesink status``."""
    rep = r.report
    return {"job": rep.job, "manifest": rep.manifest, "state": rep.state, "never_ran": rep.never_ran,
            "note": rep.note, "healthy": rep.healthy, "problems": rep.problems,
            "total_lag": rep.total_lag, "orphans": rep.orphans, "orphans_unplaced": rep.orphans_unplaced,
            "thresholds": _plain(rep.thresholds), "seconds": round(rep.seconds, 3),
            "failures": rep.failures, "runs_recorded": rep.runs_recorded,
            "last_run": None if rep.last_run is None else {
                **_plain(rep.last_run), "started_at": rep.last_run.started_at.isoformat() + "Z",
                "ended_at": rep.last_run.ended_at.isoformat() + "Z"},
            "partitions": [{**_plain(p), "last_commit_at": None if p.last_commit_at is None
                            else p.last_commit_at.isoformat() + "Z"} for p in rep.partitions]}


def batch_dict(res: Any) -> dict:
    """The JSON form of one sink batch (``lakesink.driver.sink.BatchResult``)."""
    return {"batch_id": res.batch_id, "run_id": res.run_id, "objects": res.objects, "records": res.records,
            "bytes": res.bytes, "committed_rows": res.committed_rows, "s3_retries": res.s3_retries,
            "seconds": dict(res.seconds),
            # the metrics table's numbers (lakesink.manifest.metrics)
            "partitions": len(getattr(res, "partitions", ()) or ()), "records_read": getattr(res, "records_read", 0),
            "metrics_warning": getattr(res, "metrics_warning", None),
            "dead_lettered": getattr(res, "dead_lettered", 0),  # errors.tolerance=all
            # a poll that committed nothing says why, as its text line does (its batch id is still the next one)
            "poll": getattr(res, "poll", 0), "committed": bool(getattr(res, "committed", True)),
            "note": None if getattr(res, "committed", True) else res.uncommitted_words()}


def _object_dict(o: Any, uri: Callable[[str], str]) -> dict:
    return {"key": o.key, "uri": uri(o.key), "size": o.size, "etag": o.etag, "last_modified": o.last_modified,
            "version_id": o.version_id, "owner": o.owner}


def vacuum_dict(r: VacuumResult) -> dict:
    rep = r.report
    return {
        "execute": r.execute,
        "deleted": rep.deleted,
        "orphans": [_object_dict(o, r.uri) for o in rep.orphans],
        "uploads": [{"key": k, "uri": r.uri(k), "upload_id": uid} for k, uid in rep.uploads],
        "unknown": [_object_dict(o, r.uri) for o in rep.unknown],
        "kept_recent": rep.kept_recent,
        "kept_changed": [{"key": k, "uri": r.uri(k)} for k in rep.kept_changed],
    }


def restore_dict(r: RestoreResult) -> dict:
    """The JSON form of a restore report (totals first, then one object per destination partition)."""
    rep = r.report
    return {"name": rep.name, "group": rep.group, "dry_run": rep.dry_run, "objects": rep.objects,
            "records": rep.records, "records_exact": rep.exact, "bytes": rep.bytes, "produced": rep.produced,
            "skipped": rep.skipped, "objects_read": getattr(rep, "objects_read", 0),
            "blocks_read": getattr(rep, "blocks_read", 0), "blocks_skipped": getattr(rep, "blocks_skipped", 0),
            "mode": rep.mode,
            "superseded": rep.superseded,
            "tombstones_dropped": rep.tombstones_dropped, "schema_copies": list(rep.schema_copies),
            "groups": list(getattr(rep, "groups", None) or ()),
            "seconds": round(rep.seconds, 3), "routing": list(getattr(rep, "routing", None) or ()),
            "partitions": _plain(rep.partitions)}


def import_dict(r: ImportResult) -> dict:
    """The JSON form of a manifest import report."""
    rep = r.report
    return {"dry_run": rep.dry_run, "batch_id": rep.batch_id, "objects": len(rep.imported), "records": rep.records,
            "already_in_manifest": rep.already_in_manifest, "overlaps": rep.overlaps, "gaps": rep.gaps,
            "empty": [r.uri(k) for k in rep.empty], "unrecognized": [r.uri(k) for k in rep.unrecognized],
            "refused": rep.refused,
            "imported": [{**_plain(o), "uri": r.uri(o.key)} for o in rep.imported]}


def schema_history_dict(r: SchemaHistoryResult) -> dict:
    """The JSON form of ``lakesink schema history`` (timestamps ISO 8601, UTC)."""
    entries = []
    for e in r.report.entries:
        d = _plain(e)
        for k in ("min_timestamp", "max_timestamp"):
            t = getattr(e, k)
            d[k] = None if t is None else t.isoformat() + "Z"
        entries.append(d)
    return {"job": r.report.job, "topic": r.report.topic, "schemas": entries}


def schema_check_dict(r: SchemaCheckResult) -> dict:
    """The JSON form of ``lakesink schema check`` (a document for CI: ``compatible`` and every incompatibility)."""
    rep = r.report
    return {"compatible": rep.compatible, "topic": rep.topic, "subject": rep.subject, "mode": rep.mode,
            "candidate_fingerprint": rep.candidate_fingerprint, "compared": rep.compared,
            "registry_checked": rep.registry_checked, "passed": rep.passed,
            "nothing_to_compare": rep.nothing_to_compare, "allow_empty": rep.allow_empty,
            "versions": [{"label": v.label, "subject": v.subject, "version": v.version, "id": v.id,
                          "fingerprint": v.fingerprint, "sources": v.sources} for v in rep.versions],
            "incompatibilities": _plain(rep.incompatibilities), "warnings": rep.warnings}


def _plain(obj: Any) -> Any:
    """JSON-ready copy: dataclasses -> dicts, tuples -> lists, anything else unknown -> str."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return _plain(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_plain(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


class JsonOutput(Output):
    """One JSON document per result (one per line), for scripts."""

    def _j(self, obj: Any) -> None:
        print(json.dumps(_plain(obj), sort_keys=False), file=self.out, flush=True)

    def check(self, r: CheckResult) -> None:
        d = asdict(r)
        d["ignored_keys"] = [{"key": k, "reason": why} for k, why in r.ignored_keys]
        self._j({"ok": True, **d})

    def batch(self, res: Any) -> None:
        self._j(batch_dict(res))

    def sink(self, r: SinkResult) -> None:
        pass  # one object per batch was printed when it committed

    def vacuum(self, r: VacuumResult) -> None:
        self._j(vacuum_dict(r))

    def restore(self, r: RestoreResult) -> None:
        self._j(restore_dict(r))

    def manifest_import(self, r: ImportResult) -> None:
        self._j(import_dict(r))

    def schema_history(self, r: SchemaHistoryResult) -> None:
        self._j(schema_history_dict(r))

    def schema_check(self, r: SchemaCheckResult) -> None:
        self._j(schema_check_dict(r))

    def demo(self, r: DemoResult) -> None:
        self._j({"ok": r.ok, "records": r.records, "archived": r.archived, "objects": r.objects,
                 "batches": [batch_dict(b) for b in r.batches], "sample_keys": r.sample_keys,
                 "partitions": r.partitions, "seconds": round(r.seconds, 3)})

    def dev(self, r: DevResult) -> None:
        self._j({"action": r.action, "running": r.running, "message": r.message, "state_file": r.state_file,
                 "log": r.log, "ports_open": r.ports_open,  # the SCRAM password stays in the state file
                 "state": {k: v for k, v in r.state.items() if k != "kafka_sasl_password"} if r.state else r.state})

    def data(self, obj: Any) -> None:
        self._j(obj)

    def exception(self, ex: BaseException, internal: bool = False) -> None:
        self._j({"error": {"type": type(ex).__name__, "message": resolved_masked(str(ex)), "internal": internal}})


class CsvOutput(JsonOutput):
    """CSV for tabular results (``sql``, ``status``: a header row, then one row per result row); every other
    result is printed as :class:`JsonOutput` prints it."""

    def _csv(self, columns: list[str], rows: list[list[Any]]) -> None:
        import csv

        w = csv.writer(self.out, lineterminator="\n")
        w.writerow(columns)
        w.writerows([["" if v is None else cell_text(v) for v in row] for row in rows])
        self.out.flush()

    def table(self, r: TableResult) -> None:
        self._csv(r.columns, [list(row) for row in r.rows])

    def status(self, r: StatusResult) -> None:
        self._csv(*status_table(r.report))


FORMATS: dict[str, type[Output]] = {"text": TextOutput, "json": JsonOutput, "csv": CsvOutput}


def make_output(name: str) -> Output:
    return FORMATS[name]()
