"""Reading the progress lines of `lakesink sink` / `lakesink restore` (:mod:`lakesink.cli.progress`) back, and
judging their ETAs against what really happened: the unit tests (a scripted clock) and the integration tests (a
throttled run, lines time-stamped by the test as they arrive) share this check."""
from __future__ import annotations

import re
from dataclasses import dataclass

_RECORDS = re.compile(r"([\d,]+)(?:/([\d,]+))? records")
_ETA = re.compile(r"ETA (\d+(?::\d\d){1,2})")
_ELAPSED = re.compile(r"(\d+(?::\d\d){1,2}) elapsed")


def seconds(text: str) -> int:
    """``1:02:05`` / ``1:15`` → seconds."""
    out = 0
    for part in text.split(":"):
        out = out * 60 + int(part)
    return out


@dataclass(frozen=True)
class Line:
    at: float  # when the test saw it (its own clock)
    done: int
    total: int | None
    eta_s: int | None
    elapsed_s: int | None


def parse(at: float, text: str) -> Line | None:
    """One progress line (a plain line, or one redraw of the terminal line); None: not a progress line."""
    m = _RECORDS.search(text)
    if m is None:
        return None
    eta, elapsed = _ETA.search(text), _ELAPSED.search(text)
    return Line(at, int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")) if m.group(2) else None,
                seconds(eta.group(1)) if eta else None, seconds(elapsed.group(1)) if elapsed else None)


def eta_errors(lines: list[Line], started: float, ended: float, after: float = 0.2) -> list[tuple[Line, float]]:
    """For each line with an ETA seen after the first ``after`` of the run (``started`` .. ``ended`` on the
    test's clock), the relative error of the run's length it predicts (time so far + ETA) against the real one."""
    real = ended - started
    out = []
    for ln in lines:
        if ln.eta_s is None or ln.at - started < after * real:
            continue
        predicted = (ln.at - started) + ln.eta_s
        out.append((ln, abs(predicted - real) / real))
    return out
