"""`lakesink sink`'s progress display: one per batch, on stderr (stdout keeps the batch lines / JSON documents).

On a terminal a tqdm bar (partitions done of the batch's, with records, bytes and objects archived so far) that
is cleared when the batch ends (its summary line follows); otherwise a plain line every ``--progress-every``
(30 s by default: a batch shorter than that prints none, so logs of short batches hold only their summary). The
numbers come from :func:`lakesink.runners.progress.track`: they grow as the batch's Spark tasks complete.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, TextIO

__all__ = ["MODES", "ProgressDisplay", "progress_line", "human_bytes"]

#: ``--progress`` values: auto (a bar on a terminal, else lines), bar, lines, none
MODES = ("auto", "bar", "lines", "none")


def human_bytes(n: int) -> str:
    """``1536`` → ``1.5 KiB``."""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{int(v)} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} B"  # pragma: no cover


def counts_text(p: Any) -> str:
    return (f"{p.records_read} records read, {p.records} archived in {p.objects} objects "
            f"({human_bytes(p.bytes)})")


def progress_line(p: Any) -> str:
    """The plain line of a :class:`~lakesink.runners.progress.Progress`."""
    return (f"batch {p.batch_id}: {p.partitions_done}/{p.partitions_total} partitions done, {counts_text(p)}, "
            f"{p.elapsed_s:.0f}s")


class ProgressDisplay:
    """Renders the :class:`~lakesink.runners.progress.Progress` of each batch (call it; :meth:`close` at the end)."""

    def __init__(self, mode: str = "auto", stream: TextIO | None = None, every_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream or sys.stderr
        if mode == "auto":
            isatty = getattr(self.stream, "isatty", None)
            mode = "bar" if isatty is not None and isatty() else "lines"
        self.mode, self.every_s, self.clock = mode, every_s, clock
        self._bar: Any = None
        self._batch: int | None = None
        self._last_line: float | None = None

    def __call__(self, p: Any) -> None:
        if self.mode == "none":
            return
        if p.batch_id != self._batch:
            self.close()
            self._batch, self._last_line = p.batch_id, self.clock()
        if self.mode == "bar":
            self._draw(p)
        elif not p.done and self.clock() - self._last_line >= self.every_s:
            self._last_line = self.clock()
            print(progress_line(p), file=self.stream, flush=True)
        if p.done:
            self.close()

    def _draw(self, p: Any) -> None:
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=p.partitions_total, desc=f"batch {p.batch_id}", unit="partition",
                             file=self.stream, leave=False, dynamic_ncols=True)
        self._bar.n = p.partitions_done
        self._bar.set_postfix_str(counts_text(p), refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        """Clear the bar (the batch's summary line follows it)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._batch = None
