"""What each command returns: one dataclass per command, rendered by :mod:`lakesink.cli.output`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["CheckResult", "SinkResult", "VacuumResult", "RestoreResult", "ImportResult", "SchemaHistoryResult",
           "SchemaCheckResult", "TranslateResult", "TableResult", "StatusResult", "DemoResult", "HandoverResult"]


@dataclass
class CheckResult:
    """``lakesink check``: a config that validated."""

    path: str
    name: str
    topics: list[str]
    topics_regex: str | None
    format: str
    partitioner: str
    flush_size: int
    bucket: str
    topics_dir: str
    manifest_location: str
    ignored_keys: list[tuple[str, str]] = field(default_factory=list)  # (key, reason), sorted by key
    warnings: list[str] = field(default_factory=list)


@dataclass
class SinkResult:
    """``lakesink sink``: every batch was already rendered as it committed; this is the run's total."""

    batches: list[Any] = field(default_factory=list)  # lakesink.driver.sink.BatchResult


@dataclass
class VacuumResult:
    """``lakesink vacuum``: the report plus how to name its keys (``uri(key)``)."""

    report: Any  # lakesink.driver.vacuum.VacuumReport
    uri: Callable[[str], str]
    execute: bool


@dataclass
class RestoreResult:
    """``lakesink restore``: the report of the run (or of the dry run)."""

    report: Any  # lakesink.driver.restore.RestoreReport


@dataclass
class ImportResult:
    """``lakesink manifest import``: the report plus how to name its keys (``uri(key)``)."""

    report: Any  # lakesink.driver.manifest_import.ImportReport
    uri: Callable[[str], str]


@dataclass
class HandoverResult:
    """``lakesink manifest handover``: the advance rows committed (or that would be)."""

    report: Any  # lakesink.driver.handover.HandoverReport


@dataclass
class SchemaHistoryResult:
    """``lakesink schema history``: the manifest's value schemas per topic."""

    report: Any  # lakesink.driver.schema_check.SchemaHistoryReport


@dataclass
class SchemaCheckResult:
    """``lakesink schema check``: exit 0 when the candidate is compatible, 1 when not."""

    report: Any  # lakesink.driver.schema_check.SchemaCheckReport

    @property
    def exit_code(self) -> int:
        return self.report.exit_code


@dataclass
class TranslateResult:
    """``lakesink check --translate``: another connector's config as a lakesink config."""

    path: str
    connector: str
    mapping: list[tuple[str, str, str]]  # (their key, lakesink key or "-", what differs)
    differences: list[str]               # how the objects differ
    properties: str                      # the translated config, secrets left out
    withheld: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # choices made (cut policy, hand-over), also in the header


@dataclass
class TableResult:
    """``lakesink sql``: a query's columns and rows (Python values), printed as an aligned table, JSON or CSV."""

    columns: list[str]
    rows: list[tuple]
    notes: list[str] = field(default_factory=list)
    exit_code: int = 0


@dataclass
class StatusResult:
    """``lakesink status``: exit 0 when healthy, 1 past a threshold."""

    report: Any  # lakesink.driver.status.StatusReport

    @property
    def exit_code(self) -> int:
        return self.report.exit_code


@dataclass
class DemoResult:
    """``lakesink demo``: what the end-to-end run archived."""

    ok: bool
    records: int
    archived: int
    objects: int
    batches: list[Any] = field(default_factory=list)  # BatchResult
    sample_keys: list[str] = field(default_factory=list)
    partitions: list[dict] = field(default_factory=list)  # the manifest query's rows
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


