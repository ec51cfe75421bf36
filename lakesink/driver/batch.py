"""What one sink batch planned and did (:class:`PartitionPlan`, :class:`BatchResult`), and the words the driver
says about it: a failed task's cause (:func:`executor_error`) and a batch interval (:func:`parse_interval`)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from lakesink.errors import InvalidArgumentError
from lakesink.manifest import ManifestRow

__all__ = ["PartitionPlan", "BatchResult", "executor_error", "parse_interval"]


_EXECUTOR_ERROR = re.compile(r"((?:lakesink\.[\w.]+|[\w.]*(?:Error|Exception))): (.+)")


def executor_error(e: BaseException) -> str:
    """The root cause of a failed Spark action, preferring lakesink's own error line over the wrappers."""
    text = str(e)
    found = [m for m in _EXECUTOR_ERROR.finditer(text) if m.group(1).startswith("lakesink.")]
    if found:
        m = found[-1]
        return f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2).strip()}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0][:500] if lines else type(e).__name__


@dataclass
class PartitionPlan:
    topic: str
    partition: int
    start: int  # manifest next offset (range_start of the first group)
    end: int  # exclusive: Kafka latest offset at snapshot time (capped by batch.max.records)


@dataclass
class BatchResult:
    batch_id: int
    run_id: str
    committed_rows: int = 0
    objects: int = 0
    records: int = 0
    bytes: int = 0
    partitions: list[PartitionPlan] = field(default_factory=list)
    rows: list[ManifestRow] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    s3_retries: int = 0  # S3 requests retried by the executors (throttling, dropped connections)
    records_read: int = 0  # Kafka records read (records counts those archived: transforms may drop or add)
    metrics_warning: str | None = None  # the metrics table could not be written (lakesink.manifest.metrics)
    dead_lettered: int = 0  # records sent to the dead-letter topic (errors.tolerance=all)
    #: records the executors archived on the columnar path (lakesink.executor.columnar), not record by record
    columnar_records: int = 0
    #: This job object's attempt number (1, 2, ...): a batch id is only taken by a commit, so while nothing
    #: commits the same id comes back, and what did not commit is told by its poll number instead
    poll: int = 0
    #: the earliest time (epoch ms, record time) a file this batch left open becomes closable by
    #: rotate.interval.ms, or None; with ``snapshot_ms`` (the wall clock when the batch took its Kafka snapshot),
    #: what :mod:`lakesink.driver.poll_schedule` times the next poll of a continuous run by
    due_ms: int | None = None
    snapshot_ms: int | None = None

    @property
    def committed(self) -> bool:
        """Whether this batch committed rows to the manifest (else its batch id is still the next one)."""
        return self.committed_rows > 0

    def summary(self) -> str:
        """One line: ``batch N: ...`` for a committed batch; ``poll P: ...`` saying why nothing was committed."""
        times = f"({', '.join(f'{k} {v:.2f}s' for k, v in self.seconds.items())})"
        retries = f", {self.s3_retries} S3 retries" if self.s3_retries else ""
        if not self.committed:
            return f"{f'poll {self.poll}' if self.poll else 'poll'}: {self.uncommitted_words()}{retries} {times}"
        dead = f", {self.dead_lettered} dead letters" if self.dead_lettered else ""
        return (f"batch {self.batch_id}: {self.objects} objects, {self.records} records, {self.bytes} bytes, "
                f"{self.committed_rows} manifest rows{retries}{dead} {times}")

    def uncommitted_words(self) -> str:
        """Why a batch that committed nothing did not: nothing new, or records read into files still open."""
        if not self.partitions:
            return "nothing new to archive, nothing committed"
        if self.records_read:  # read, but every file stayed below flush.size (or its rotation): aborted, re-read
            return (f"{self.records_read} records read, nothing committed: their files are not closed yet "
                    f"(flush.size or a rotation closes them; the next poll reads them again)")
        return "nothing committed"


def parse_interval(text: str, what: str = "--interval") -> float:
    """'30s', '5m', '1h', '250ms' or plain seconds → seconds; ``what`` names the option in the error."""
    t = text.strip().lower()
    for suffix, mult in (("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)):
        if t.endswith(suffix) and t[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(t[: -len(suffix)]) * mult
    if t.replace(".", "", 1).isdigit():
        return float(t)
    raise InvalidArgumentError(f"{what} {text!r}: expected a duration like 30s, 5m, 1h or 250ms")
