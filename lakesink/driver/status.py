"""``lakesink status``: is the job keeping up? Per topic-partition of one job: the committed offset (next offset
to archive), the broker's end offset, the lag, the age of the last commit and the orphan objects.

Made for a scheduler's health check: a path manifest is read with delta-rs and the broker with the admin
client, so no Spark session (no JVM) is started. Thresholds (:class:`Thresholds`) turn the report unhealthy:
``max_lag`` records behind on any partition, or a partition with lag whose last commit is older than
``max_age_s`` (a caught-up partition is healthy however old its last commit: nothing arrived to archive).

A job with no row in the manifest (no table yet, or a table shared with other jobs that holds none of this
one's) has never committed a batch: its state is ``NEVER RUN``, never ``OK``, and its lag counts every record
the broker holds. Without thresholds it is unhealthy (exit 1) as soon as records wait (a job deployed against an
empty topic is not, exit 0, state still ``NEVER RUN``); with ``--max-lag``/``--max-age`` the thresholds judge it
as any job (``--max-age``: records waiting and nothing ever committed is past any age).
"""
from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from lakesink.manifest.queries import naive_utc, row_dicts

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.config import SinkConfig

__all__ = ["PartitionStatus", "Thresholds", "StatusReport", "partition_progress", "build_report", "status",
           "STATE_OK", "STATE_UNHEALTHY", "STATE_NEVER_RUN", "STATE_FAILED"]

UNHEALTHY_EXIT = 1

#: ``StatusReport.state`` values.
STATE_OK, STATE_UNHEALTHY, STATE_NEVER_RUN, STATE_FAILED = "OK", "UNHEALTHY", "NEVER RUN", "FAILED"

#: Manifest columns :func:`partition_progress` reads.
PROGRESS_COLUMNS = ["job", "topic", "kafka_partition", "range_end", "committed_at"]


@dataclass(frozen=True)
class Thresholds:
    """Limits past which the report is unhealthy; None: not checked."""

    max_lag: int | None = None
    max_age_s: float | None = None
    #: consecutive failed runs tolerated (0: the last run failing is a problem)
    max_failures: int = 0


@dataclass
class PartitionStatus:
    topic: str
    partition: int
    committed_offset: int | None     # next offset to archive; None: never committed
    end_offset: int | None           # the broker's (LSO with read_committed); None: partition no longer exists
    earliest_offset: int | None
    lag: int | None                  # records between committed_offset (or earliest) and end_offset
    last_commit_at: dt.datetime | None
    last_commit_age_s: float | None
    orphans: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class StatusReport:
    job: str
    manifest: str
    partitions: list[PartitionStatus]
    orphans_unplaced: int = 0        # orphans whose key names no topic-partition of the job
    thresholds: Thresholds = field(default_factory=Thresholds)
    seconds: float = 0.0
    never_ran: bool = False          # the manifest holds no row of this job (no batch ever committed)
    manifest_exists: bool = True
    job_problems: list[str] = field(default_factory=list)  # problems of the job as a whole, listed first
    runs: list[Any] = field(default_factory=list)  # the job's last runs, newest first (lakesink.manifest.runs.RunRow)
    runs_recorded: bool = True       # False: a catalog manifest, which has no runs table

    @property
    def problems(self) -> list[str]:
        return self.job_problems + [f"{p.topic}-{p.partition}: {msg}" for p in self.partitions for msg in p.problems]

    @property
    def state(self) -> str:
        """``FAILED`` (the last sink runs failed, more than ``--max-failures`` in a row), ``NEVER RUN`` (whether or
        not it is also unhealthy: see :attr:`healthy`), ``OK`` or ``UNHEALTHY``."""
        if self.failures > self.thresholds.max_failures:  # it ran: FAILED, whether or not it ever committed
            return STATE_FAILED
        if self.never_ran:
            return STATE_NEVER_RUN
        return STATE_OK if self.healthy else STATE_UNHEALTHY

    @property
    def last_run(self) -> Any:
        """The newest run of the job (None: no run recorded)."""
        return self.runs[0] if self.runs else None

    @property
    def failures(self) -> int:
        """How many of the newest runs in a row did not end OK."""
        from lakesink.manifest.runs import consecutive_failures

        return consecutive_failures(self.runs)

    @property
    def note(self) -> str | None:
        """Why a never-run job is said to be one: which manifest was read and what it lacks."""
        if not self.never_ran:
            return None
        lacks = "no table there yet" if not self.manifest_exists else f"no row of job {self.job!r}"
        return f"no batch committed yet for job {self.job!r} (manifest {self.manifest}: {lacks})"

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def exit_code(self) -> int:
        return 0 if self.healthy else UNHEALTHY_EXIT

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    @property
    def orphans(self) -> int:
        return sum(p.orphans for p in self.partitions) + self.orphans_unplaced


def partition_progress(rows: Any, job: str) -> dict[tuple[str, int], tuple[int, dt.datetime | None]]:
    """``(topic, partition) → (next offset, last commit time as naive UTC)`` of ``job`` from manifest rows."""
    out: dict[tuple[str, int], tuple[int, dt.datetime | None]] = {}
    for r in row_dicts(rows):
        if r.get("job", job) != job:
            continue
        k = (r["topic"], int(r["kafka_partition"]))
        nxt, at = int(r["range_end"]) + 1, naive_utc(r.get("committed_at"))
        cur = out.get(k)
        if cur is None:
            out[k] = (nxt, at)
        else:
            out[k] = (max(cur[0], nxt), at if cur[1] is None or (at is not None and at > cur[1]) else cur[1])
    return out


def build_report(job: str, manifest: str, progress: dict[tuple[str, int], tuple[int, dt.datetime | None]],
                 bounds: dict[tuple[str, int], tuple[int, int]], orphans: Iterable[tuple[str, int] | None],
                 thresholds: Thresholds, now: dt.datetime, manifest_exists: bool = True) -> StatusReport:
    """Pure: the report from the manifest's progress, the broker's ``(earliest, end)`` per partition and one
    ``(topic, partition)`` (or None) per orphan object, judged at ``now`` (naive UTC). Empty ``progress``: the
    job never ran (see the module docstring for how that is judged)."""
    parts: dict[tuple[str, int], PartitionStatus] = {}
    for k in sorted(set(progress) | set(bounds)):
        nxt, at = progress.get(k, (None, None))
        earliest, end = bounds.get(k, (None, None))
        lag = None if end is None else max(0, end - max(nxt if nxt is not None else earliest, earliest))
        age = None if at is None else max(0.0, (now - at).total_seconds())
        p = PartitionStatus(k[0], k[1], nxt, end, earliest, lag, at, age)
        if end is None:
            p.problems.append("partition not found on the broker (topic deleted or recreated?)")
        if thresholds.max_lag is not None and lag is not None and lag > thresholds.max_lag:
            p.problems.append(f"lag {lag} > --max-lag {thresholds.max_lag}")
        if thresholds.max_age_s is not None and lag:
            if age is None:
                p.problems.append(f"{lag} record(s) waiting and nothing ever committed")
            elif age > thresholds.max_age_s:
                p.problems.append(f"last commit {_age(age)} ago > --max-age {_age(thresholds.max_age_s)} "
                                  f"with {lag} record(s) waiting")
        parts[k] = p
    unplaced = 0
    for tp in orphans:
        if tp is not None and tp in parts:
            parts[tp].orphans += 1
        else:
            unplaced += 1
    report = StatusReport(job, manifest, list(parts.values()), unplaced, thresholds, never_ran=not progress,
                          manifest_exists=manifest_exists)
    if report.never_ran and thresholds == Thresholds() and report.total_lag:
        report.job_problems.append(f"{report.total_lag} record(s) waiting and no batch committed yet for job "
                                   f"{job!r}; pass --max-lag or --max-age to judge a job that has not run by "
                                   f"thresholds")
    return report


def add_runs(report: StatusReport, cfg: "SinkConfig") -> None:
    """The job's last runs from the runs table, and the problem a failing streak is past ``--max-failures``."""
    from lakesink import wiring
    from lakesink.manifest.runs import RunsTable, runs_location

    loc = runs_location(cfg.manifest_location)
    if loc is None:
        report.runs_recorded = False
        return
    report.runs = RunsTable(loc, wiring.s3_settings(cfg)).last(cfg.name)
    failed = report.failures
    if failed > report.thresholds.max_failures:
        last = report.last_run
        streak = f"the last {failed} runs failed" if failed > 1 else "the last run failed"
        log = f" (log: {last.log_path})" if last.log_path else ""
        report.job_problems.insert(0, f"{streak}; the last at {last.ended_at:%Y-%m-%d %H:%M:%S} UTC, exit "
                                      f"{last.exit_code}: {last.error}{log}")


def _age(seconds: float) -> str:
    s = int(round(seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    return f"{s / 3600:.1f}h"


def status(cfg: "SinkConfig", thresholds: Thresholds = Thresholds(), spark: Any = None,
           now: dt.datetime | None = None) -> StatusReport:
    """The status of job ``cfg.name``. ``spark`` (a session or a callable returning one) is used only by a
    catalog-table manifest."""
    from lakesink import wiring
    from lakesink.driver.kafka_admin import job_bounds
    from lakesink.driver.vacuum import vacuum
    from lakesink.errors import KeyNameError
    from lakesink.objects.naming import parse_key

    t0 = time.monotonic()
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    manifest = wiring.manifest(cfg, spark)
    exists = manifest.exists()
    if not exists:
        rows: list = []
    elif hasattr(manifest, "arrow"):
        rows = manifest.arrow(PROGRESS_COLUMNS, job=cfg.name)
    else:
        rows = [r.asDict() for r in manifest.df().where(f"job = '{cfg.name}'").select(*PROGRESS_COLUMNS).collect()]
    progress = partition_progress(rows, cfg.name)

    found = job_bounds(cfg.kafka_options, list(cfg.topics), cfg.topics_regex, {t for t, _ in progress},
                       cfg.kafka_retry_deadline_ms / 1000.0)
    bounds = {k: (b.earliest, b.latest) for k, b in found.items()}

    # every unreferenced object of the job, however young (a running batch's uploads count too)
    rep = vacuum(spark, cfg, retention_s=0.0, execute=False)
    naming, exts = wiring.naming(cfg), wiring.key_extensions(cfg)
    placed: list[tuple[str, int] | None] = []
    for o in rep.orphans:
        try:
            pk = parse_key(o.key, naming, exts)
            placed.append((pk.topic, pk.partition))
        except KeyNameError:
            placed.append(None)
    report = build_report(cfg.name, cfg.manifest_location, progress, bounds, placed, thresholds, now,
                          manifest_exists=exists)
    add_runs(report, cfg)
    report.seconds = time.monotonic() - t0
    return report
