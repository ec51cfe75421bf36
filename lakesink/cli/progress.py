"""The progress display of `lakesink sink` (one per batch) and `lakesink restore`, on stderr (stdout keeps the
batch lines / JSON documents).

What it shows: records done of the plan's total (records read by a sink batch, produced by a restore), the
percentage, bytes, the rate and an ETA (:class:`Eta`), the time so far and the tasks done. On a terminal one line
redrawn in place (``\\r``, cleared when the batch ends: its summary line follows), as wide as the terminal is
*now* (measured at every draw; a pty that reports 0 columns counts as 80): fields that do not fit are left out,
least useful first (:func:`fit`), never cut. Elsewhere a plain line every ``--progress-every`` (30 s by default:
a batch shorter than that prints none, so logs of short batches hold only their summary), and one more, ``done``,
at the end of a batch that printed some.

The numbers come from :func:`lakesink.runners.progress.track`: live counts from the tasks (about every 0.5 s)
and what completed tasks returned.
"""
from __future__ import annotations

import os
import sys
import time
from collections import deque
from typing import Any, Callable, TextIO

__all__ = ["MODES", "add_arguments", "display_for", "ProgressDisplay", "Eta", "progress_line", "bar_line", "fit", "human_bytes", "human_duration",
           "terminal_width", "DEFAULT_WIDTH"]

#: ``--progress`` values: auto (a bar on a terminal, else lines), bar, lines, none
MODES = ("auto", "bar", "lines", "none")

#: the width of a terminal that does not tell its own (a pty with 0 columns)
DEFAULT_WIDTH = 80


def add_arguments(p: Any, what: str = "each batch's") -> None:
    """``--progress`` and ``--progress-every`` on a command's parser."""
    p.add_argument("--progress", choices=MODES, default="auto",
                   help=f"{what} progress on stderr (records of the plan's total, bytes, rate, ETA): a line redrawn "
                        f"in place on a terminal, as wide as it is, else a line every --progress-every (auto, the "
                        f"default), or always bar/lines, or none")
    p.add_argument("--progress-every", default="30s", help="interval of the plain progress lines (30s, 1m, ...)")


def display_for(args: Any) -> "ProgressDisplay":
    """The display ``--progress`` / ``--progress-every`` ask for (a bad interval: exit 2)."""
    from lakesink.driver.batch import parse_interval

    every = parse_interval(getattr(args, "progress_every", "30s"), "--progress-every")
    return ProgressDisplay(getattr(args, "progress", "auto"), every_s=every)


def human_bytes(n: int) -> str:
    """``1536`` → ``1.5 KiB``."""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{int(v)} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} B"  # pragma: no cover


def human_duration(s: float) -> str:
    """``75`` → ``1:15``, ``3725`` → ``1:02:05`` (whole seconds, rounded up: an ETA of 0.2 s is ``0:01``)."""
    total = int(-(-max(0.0, s) // 1))
    h, rest = divmod(total, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class Eta:
    """Rate and time left from ``(elapsed_s, done)`` samples (:meth:`update`), given ``total``.

    The rate is measured over the recent past: the last half of the time since records started to move (at
    least ``min_window_s``), so a slow start (a cold worker, a first fetch) weighs less and less while the
    rate of a steady run is measured over a long span. Only samples where the count moved are kept: live counts
    arrive every half second while the display is asked more often, so a sample that repeats the last count at a
    later time says when it was asked, not when the records moved, and would bias the rate low. The time left
    is counted from the last move (less what went by since). No ETA before the first records moved, or while
    nothing moved over the window (a stalled read shows no ETA rather than a wrong one)."""

    def __init__(self, min_window_s: float = 1.5):
        self.min_window_s = min_window_s
        self.samples: deque[tuple[float, int]] = deque()
        self.started: float | None = None  # elapsed at the last sample with nothing done yet
        self.now: float | None = None  # elapsed at the last update, moved or not

    def _window(self) -> float:
        return max(self.min_window_s, ((self.now or 0.0) - (self.started or 0.0)) / 2)

    def update(self, elapsed_s: float, done: int) -> None:
        self.now = elapsed_s if self.now is None else max(self.now, elapsed_s)
        if done <= 0:
            self.started, self.samples = elapsed_s, deque()
            return
        if self.started is None:
            self.started = 0.0
        if self.samples and (done <= self.samples[-1][1] or elapsed_s <= self.samples[-1][0]):
            if done > self.samples[-1][1]:
                self.samples[-1] = (self.samples[-1][0], done)
            return  # nothing moved since the last sample
        self.samples.append((elapsed_s, done))
        horizon = elapsed_s - self._window()
        while len(self.samples) > 2 and self.samples[1][0] <= horizon:
            self.samples.popleft()

    def rate(self) -> float | None:
        """Records per second (None: not known yet, or nothing moved over the window)."""
        if self.started is None or not self.samples:
            return None
        t1, d1 = self.samples[-1]
        if self.now is not None and self.now - t1 > self._window():
            return None  # stalled
        t0, d0 = self.samples[0]
        if t1 - t0 < 0.5:  # too short a span: what moved since nothing had (the first records came after it)
            t0, d0 = self.started, 0
        if t1 - t0 < 0.5 or d1 <= d0:  # still too short: a count that just arrived says little of a rate
            return None
        return (d1 - d0) / (t1 - t0)

    def eta(self, total: int | None) -> float | None:
        """Seconds left to ``total`` (None: unknown)."""
        if total is None or not self.samples:
            return None
        t1, d1 = self.samples[-1]
        left = total - d1
        if left <= 0:
            return 0.0
        r = self.rate()
        if r is None:
            return None
        return max(0.0, left / r - ((self.now or t1) - t1))


def fields(p: Any, eta: Eta | None) -> list[tuple[int, str]]:
    """The display's fields of a :class:`~lakesink.runners.progress.Progress` in order, each with its rank (0:
    kept longest; the widest rank goes first when the line is too long)."""
    total = getattr(p, "records_total", None)
    done = p.records_read
    out: list[tuple[int, str]] = [(2, p.name)]
    if total:
        out.append((3, f"{min(100, 100 * done // total)}%"))
        out.append((0, f"{done:,}/{total:,} records"))
    else:
        out.append((0, f"{done:,} records"))
    nbytes = getattr(p, "bytes_read", 0) or p.bytes
    if nbytes:
        out.append((5, human_bytes(nbytes)))
    r = eta.rate() if eta is not None else None
    if r is not None:
        out.append((4, f"{r:,.0f} rec/s"))
    left = eta.eta(total) if eta is not None and not p.done else None
    if left is not None:
        out.append((1, f"ETA {human_duration(left)}"))
    if p.done:
        out.append((1, "done"))
    out.append((6, f"{human_duration(p.elapsed_s)} elapsed"))
    out.append((7, f"{p.partitions_done}/{p.partitions_total} partitions"))
    return out


SEP = "  "


def fit(parts: list[tuple[int, str]], width: int) -> list[str]:
    """The parts (``(rank, text)``) that fit in ``width`` columns joined by two spaces, leaving out the widest
    ranks first; the rank-0 part stays even when it alone is wider (text is never cut)."""
    keep = list(parts)
    while len(keep) > 1 and len(SEP.join(t for _r, t in keep)) > width:
        worst = max(r for r, _t in keep)
        if worst == 0:
            break
        keep = [(r, t) for r, t in keep if r != worst]
    return [t for _r, t in keep]


def bar_line(p: Any, eta: Eta | None, width: int) -> str:
    """The terminal line of ``p`` in at most ``width`` columns (unless its record count alone is wider): the
    fields that fit and, when at least 12 columns are left and the total is known, a bar ``[####----]``."""
    texts = fit(fields(p, eta), width)
    line = SEP.join(texts)
    total = getattr(p, "records_total", None)
    room = width - len(line) - len(SEP)
    if total and room >= 12:
        inner = min(room, 40) - 2
        filled = min(inner, inner * p.records_read // total)
        at = 1 if texts and texts[0] == p.name else 0
        texts.insert(at, "[" + "#" * filled + "-" * (inner - filled) + "]")
        line = SEP.join(texts)
    return line


def progress_line(p: Any, eta: Eta | None = None) -> str:
    """The plain line of a :class:`~lakesink.runners.progress.Progress` (every field, no width)."""
    f = [t for _r, t in fields(p, eta)]
    return f"{f[0]}: " + ", ".join(f[1:])


def terminal_width(stream: TextIO) -> int:
    """``stream``'s terminal width now: ``COLUMNS`` when set, else the terminal's, else :data:`DEFAULT_WIDTH`
    (a terminal that says 0 columns too)."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        cols = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        cols = 0
    return cols if cols > 0 else DEFAULT_WIDTH


class ProgressDisplay:
    """Renders the :class:`~lakesink.runners.progress.Progress` of each batch (call it; :meth:`close` at the end).

    ``width``: a fixed terminal width (tests); None measures ``stream`` at every draw."""

    def __init__(self, mode: str = "auto", stream: TextIO | None = None, every_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, width: int | None = None):
        self.stream = stream or sys.stderr
        if mode == "auto":
            isatty = getattr(self.stream, "isatty", None)
            mode = "bar" if isatty is not None and isatty() else "lines"
        self.mode, self.every_s, self.clock, self.width = mode, every_s, clock, width
        self._drawn = False
        self._batch: Any = None
        self._last_line: float | None = None
        self._lines = 0  # plain lines printed for this batch
        self.eta = Eta()

    def __call__(self, p: Any) -> None:
        if self.mode == "none":
            return
        key = (p.batch_id, p.name)
        if key != self._batch:
            self.close()
            self._batch, self._last_line, self.eta, self._lines = key, self.clock(), Eta(), 0
        self.eta.update(p.elapsed_s, p.records_read)
        if self.mode == "bar":
            if not p.done:
                width = self.width if self.width is not None else terminal_width(self.stream)
                # one column spare: a line as wide as the terminal would wrap on some terminals
                self.stream.write("\r" + bar_line(p, self.eta, max(1, width - 1)) + "\x1b[K")
                self.stream.flush()
                self._drawn = True
        elif (p.done and self._lines) or (not p.done and self.clock() - self._last_line >= self.every_s):
            # a line every every_s; and the last one of a batch that printed some (its end in the log)
            self._last_line = self.clock()
            self._lines += 1
            print(progress_line(p, self.eta), file=self.stream, flush=True)
        if p.done:
            self.close()

    def close(self) -> None:
        """Clear the terminal line (the batch's summary line follows it)."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False
        self._batch = None

    def __enter__(self) -> "ProgressDisplay":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
