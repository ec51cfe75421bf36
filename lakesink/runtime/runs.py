"""Recording a sink run's outcome (:mod:`lakesink.manifest.runs`) around the run itself, for every entry point:
``lakesink sink`` and ``lakesink.run()`` (notebooks, ``jobs/sink.py``) both run inside a :class:`RunRecorder`."""
from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, Callable

__all__ = ["RunRecorder"]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class RunRecorder:
    """Records the run's outcome in the runs table when the block ends: OK, or FAILED with the error's exit code
    and line, or INTERRUPTED, with the batches committed so far (:meth:`add`). Best effort: it never replaces the
    run's own error; a failed write is handed to ``on_warning`` after a good run."""

    def __init__(self, cfg: Any, on_warning: Callable[[str], None] | None = None, command: str = "sink") -> None:
        self.cfg, self.on_warning, self.command = cfg, on_warning, command
        self.started = _now()
        self.run_id = f"{self.started:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"  # the job's own once it exists
        self.batches: list = []

    def add(self, batch: Any) -> None:
        """One batch the run finished (committed or not: only committed ones are counted)."""
        self.batches.append(batch)

    def __enter__(self) -> "RunRecorder":
        return self

    def __exit__(self, typ, exc, _tb) -> None:
        from lakesink import wiring
        from lakesink.errors import LakesinkError
        from lakesink.manifest.runs import FAILED, INTERRUPTED, OK, RunRow, record_run
        from lakesink.runtime.logs import run_log_file

        if exc is None:
            outcome, code, error = OK, 0, None
        elif isinstance(exc, KeyboardInterrupt):
            outcome, code, error = INTERRUPTED, 130, "interrupted"
        else:
            outcome = FAILED
            code = exc.exit_code if isinstance(exc, LakesinkError) else 1
            error = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)[:1000]
        committed = [b for b in self.batches if getattr(b, "committed", False)]
        row = RunRow(job=self.cfg.name, run_id=self.run_id, command=self.command, started_at=self.started,
                     ended_at=_now(), outcome=outcome, exit_code=code, error=error, log_path=run_log_file(),
                     batches=len(committed), records=sum(b.records for b in committed))
        warning = record_run(self.cfg.manifest_location, wiring.s3_settings(self.cfg), row)
        if warning and exc is None and self.on_warning is not None:
            self.on_warning(warning)
