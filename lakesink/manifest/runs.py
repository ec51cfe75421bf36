"""The runs table: one row per `lakesink sink` run that got as far as reading its config, whatever its outcome.

The manifest records what was committed, so a job whose runs fail commits nothing and looks, from the manifest
alone, like a job that has not run lately. Kafka Connect's REST status shows a failed task with its trace; this
table is lakesink's answer: ``<manifest>_runs`` next to a path manifest (delta-rs, no JVM), with the run's start,
end, outcome (``OK``, ``FAILED``, ``INTERRUPTED``), exit code, error line and log file. ``lakesink status`` reads
the job's last runs from it. A catalog manifest has no runs table yet (its writes need Spark, which a failing run
may not have): status says so.

A row is written when the run ends, best effort: recording must never replace the run's own error (an S3
outage that failed the run fails this write too, and the run's error line is what the user sees). A run killed
with SIGKILL writes nothing; its start is still visible as the absence of a newer row.
"""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["RunRow", "RunsTable", "runs_location", "OK", "FAILED", "INTERRUPTED", "consecutive_failures"]

OK, FAILED, INTERRUPTED = "OK", "FAILED", "INTERRUPTED"
log = logging.getLogger("lakesink.manifest.runs")


@dataclass(frozen=True)
class RunRow:
    """One run of one job."""

    job: str
    run_id: str
    command: str
    started_at: dt.datetime
    ended_at: dt.datetime
    outcome: str
    exit_code: int
    error: str | None
    log_path: str | None
    batches: int
    records: int


def arrow_schema() -> "pa.Schema":
    import pyarrow as pa

    types = {"job": pa.string(), "run_id": pa.string(), "command": pa.string(),
             "started_at": pa.timestamp("us", tz="UTC"), "ended_at": pa.timestamp("us", tz="UTC"),
             "outcome": pa.string(), "exit_code": pa.int32(), "error": pa.string(), "log_path": pa.string(),
             "batches": pa.int32(), "records": pa.int64()}
    return pa.schema([(f.name, types[f.name]) for f in fields(RunRow)])


def runs_location(manifest_location: str) -> str | None:
    """``<manifest>_runs`` for a path manifest; None for a catalog table."""
    from lakesink.manifest.location import parse_location

    loc = parse_location(manifest_location)
    return loc.with_suffix("_runs").text if loc.is_path else None


class RunsTable:
    """The runs table at ``location`` (a path), read and written with delta-rs."""

    def __init__(self, location: str, s3: Any = None):
        from lakesink.manifest.deltars import RETRY_OPTIONS
        from lakesink.manifest.location import parse_location

        self.location = location
        self.uri = parse_location(location).uri
        self.storage_options = {**RETRY_OPTIONS, **s3.object_store_options()} if s3 is not None else {}

    def __repr__(self) -> str:  # storage options hold credentials: never shown
        return f"RunsTable({self.location!r})"

    def append(self, row: RunRow) -> None:
        import pyarrow as pa
        from deltalake import write_deltalake

        data = pa.Table.from_pylist([asdict(row)], schema=arrow_schema())
        write_deltalake(self.uri, data, mode="append", storage_options=self.storage_options or None)

    def last(self, job: str, n: int = 20) -> list[RunRow]:
        """The job's last ``n`` runs, newest first (none when the table does not exist)."""
        from deltalake import DeltaTable, QueryBuilder
        import pyarrow as pa

        opts = self.storage_options or None
        if not DeltaTable.is_deltatable(self.uri, storage_options=opts):
            return []
        query = ("SELECT * FROM runs WHERE job = '" + job.replace("'", "''") + f"' ORDER BY ended_at DESC LIMIT {int(n)}")
        rows = QueryBuilder().register("runs", DeltaTable(self.uri, storage_options=opts)).execute(query)
        table = pa.RecordBatchReader.from_stream(rows.read_all()).read_all()
        out = []
        for r in table.to_pylist():
            for k in ("started_at", "ended_at"):
                if r[k] is not None and r[k].tzinfo is not None:
                    r[k] = r[k].astimezone(dt.timezone.utc).replace(tzinfo=None)
            out.append(RunRow(**r))
        return out


def consecutive_failures(runs: list[RunRow]) -> int:
    """How many of the newest runs in a row did not end OK (``runs`` newest first)."""
    n = 0
    for r in runs:
        if r.outcome == OK:
            break
        n += 1
    return n


def record_run(manifest_location: str, s3: Any, row: RunRow) -> str | None:
    """Append ``row``; a warning line instead of an exception (None when written, or when the manifest is a
    catalog table and there is no runs table)."""
    loc = runs_location(manifest_location)
    if loc is None:
        return None
    try:
        RunsTable(loc, s3).append(row)
    except Exception as e:  # noqa: BLE001 - recording must not replace the run's own outcome
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        msg = f"run {row.run_id}: outcome not recorded in {loc}: {type(e).__name__}: {first[:300]}"
        log.warning(msg)
        return msg
    return None
