"""What earlier restores already produced into one destination topic-partition (pure; no Kafka here).

A restore's progress is keyed by *what is restored where*, not by how the command was spelt: for each
destination topic-partition the restore's progress group holds one committed offset whose metadata string is
this module's :class:`Coverage`, committed in the same Kafka transaction as the records it describes. Per source
topic-partition it keeps two lists of inclusive source-offset intervals:

* **exact** entries ``(lo, hi, from_ts, to_ts)``: every archived record of the source partition with an offset in
  ``[lo, hi]`` (and, when the entry has a time window, a timestamp inside it) is in the destination. A record
  they cover is skipped by any later restore into the same destination, whatever its ``--where``, bounds or
  spelling.
* **dirty** entries ``(lo, hi)``: *some* records in ``[lo, hi]`` may be in the destination (a ``--where`` that
  selected only some of the objects whose offsets interleave there, or an entry squeezed to fit the metadata
  limit). A later restore whose selection reaches into one refuses, naming the group, unless told to restore
  again.

The metadata is JSON behind :data:`PREFIX`; :meth:`Coverage.encode` keeps it under :data:`MAX_METADATA`
characters (Kafka's ``offset.metadata.max.bytes`` defaults to 4096) by turning exact entries into dirty ones,
never the other way round, so a squeezed coverage can only make a later restore refuse, never skip a record
that is not there. Metadata written by lakesink before this format (``lakesink-restore source=T-P`` with the
next source offset) reads as a dirty ``[0, offset - 1]``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

__all__ = ["PREFIX", "MAX_METADATA", "Interval", "merge", "subtract", "intersect", "SourceCoverage", "Coverage"]

PREFIX = "lakesink-restore/2 "
#: stay well below Kafka's default offset.metadata.max.bytes (4096)
MAX_METADATA = 3800
_LEGACY = re.compile(r"lakesink-restore source=(.+)-(\d+)$")

Interval = tuple[int, int]  # inclusive source offsets
Window = tuple["int | None", "int | None"]  # inclusive epoch ms; (None, None): every timestamp


def merge(spans: list[Interval]) -> list[Interval]:
    """Sorted, with overlapping or adjacent intervals joined."""
    out: list[list[int]] = []
    for lo, hi in sorted(spans):
        if hi < lo:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(a, b) for a, b in out]


def subtract(spans: list[Interval], holes: list[Interval]) -> list[Interval]:
    """The parts of ``spans`` outside every interval of ``holes``."""
    out: list[Interval] = []
    holes = merge(holes)
    for lo, hi in merge(spans):
        cur = lo
        for a, b in holes:
            if b < cur or a > hi:
                continue
            if a > cur:
                out.append((cur, a - 1))
            cur = max(cur, b + 1)
            if cur > hi:
                break
        if cur <= hi:
            out.append((cur, hi))
    return out


def intersect(xs: list[Interval], ys: list[Interval]) -> list[Interval]:
    """The parts of ``xs`` inside some interval of ``ys``."""
    out = [(max(a, c), min(b, d)) for a, b in merge(xs) for c, d in merge(ys) if max(a, c) <= min(b, d)]
    return merge(out)


@dataclass
class SourceCoverage:
    """One source topic-partition's records in one destination partition (see the module docstring)."""

    exact: list[tuple[int, int, "int | None", "int | None"]] = field(default_factory=list)
    dirty: list[Interval] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.exact or self.dirty)

    def touches(self, lo: int, hi: int) -> bool:
        """Whether any exact entry reaches into ``[lo, hi]`` (else no record there needs a check)."""
        return any(a <= hi and b >= lo for a, b, _f, _t in self.exact)

    def covers(self, offset: int, ts: int | None) -> bool:
        """Whether the record at ``offset`` (timestamp ``ts``) is already in the destination."""
        for a, b, f, t in self.exact:
            if a <= offset <= b:
                if f is None and t is None:
                    return True
                if ts is not None and (f is None or ts >= f) and (t is None or ts <= t):
                    return True
        return False

    def holds(self, lo: int, hi: int, tmin: int | None = None, tmax: int | None = None) -> bool:
        """Whether every record with an offset in ``[lo, hi]`` and a timestamp in ``[tmin, tmax]`` (an object's
        span and time range, None: unknown) is already in the destination: one entry spans the offsets and its
        window, if any, holds the time range. Such an object need not be read."""
        for a, b, f, t in self.exact:
            if a <= lo and hi <= b:
                if f is None and t is None:
                    return True
                if tmin is not None and tmax is not None and (f is None or tmin >= f) and (t is None or tmax <= t):
                    return True
        return False

    def conflicts(self, spans: list[Interval], foreign: bool = False) -> list[Interval]:
        """The parts of ``spans`` (a selection's offsets) that may hold records already produced without this
        coverage saying which: the dirty entries, and for another group's coverage (``foreign``) every entry."""
        mine = list(self.dirty) + ([(a, b) for a, b, _f, _t in self.exact] if foreign else [])
        return intersect(spans, mine)

    def high(self) -> int | None:
        """The highest offset any entry reaches."""
        his = [b for _a, b, _f, _t in self.exact] + [b for _a, b in self.dirty]
        return max(his) if his else None

    def add(self, lo: int, hi: int, window: Window = (None, None), holes: list[Interval] = (),
            selected: list[Interval] | None = None) -> "SourceCoverage":
        """A copy that also holds what a run produced up to ``hi`` since ``lo``: every record in ``[lo, hi]``
        inside ``window``, except in ``holes`` (spans of objects the run did not select), where only records of
        the ``selected`` spans were produced (dirty)."""
        if hi < lo:
            return SourceCoverage(list(self.exact), list(self.dirty))
        done = subtract([(lo, hi)], list(holes))
        maybe = intersect(intersect([(lo, hi)], list(holes)), selected if selected is not None else [(lo, hi)])
        f, t = window
        return _normalized(self.exact + [(a, b, f, t) for a, b in done], self.dirty + maybe)


def _normalized(exact, dirty) -> SourceCoverage:
    by_window: dict[tuple, list[Interval]] = {}
    for a, b, f, t in exact:
        by_window.setdefault((f, t), []).append((a, b))
    full = merge(by_window.pop((None, None), []))
    out = [(a, b, None, None) for a, b in full]
    for (f, t), spans in sorted(by_window.items(), key=lambda kv: (kv[0][0] is None, kv[0])):
        out += [(a, b, f, t) for a, b in subtract(merge(spans), full)]  # an unbounded entry says more
    out.sort(key=lambda e: (e[0], e[1]))
    return SourceCoverage(out, subtract(merge(dirty), full))


@dataclass
class Coverage:
    """Every source's coverage in one destination topic-partition, by (source topic, source partition)."""

    sources: dict[tuple[str, int], SourceCoverage] = field(default_factory=dict)

    def source(self, topic: str, partition: int) -> SourceCoverage:
        return self.sources.get((topic, partition), SourceCoverage())

    def with_source(self, topic: str, partition: int, cov: SourceCoverage) -> "Coverage":
        return Coverage({**self.sources, (topic, partition): cov})

    @classmethod
    def decode(cls, offset: int | None, metadata: str | None) -> "Coverage":
        """The coverage a committed ``offset`` and its ``metadata`` describe (empty when nothing is committed)."""
        if offset is None or offset < 0:
            return cls()
        md = metadata or ""
        if md.startswith(PREFIX):
            try:
                doc = json.loads(md[len(PREFIX):])
                return cls({(s[0], int(s[1])): SourceCoverage([tuple(e) for e in s[2]], [tuple(e) for e in s[3]])
                            for s in doc["s"]})
            except (ValueError, KeyError, IndexError, TypeError):
                pass
        m = _LEGACY.match(md)
        if m:
            return cls({(m.group(1), int(m.group(2))): SourceCoverage([], [(0, offset - 1)] if offset > 0 else [])})
        raise ValueError(f"progress metadata {md[:80]!r} was not written by lakesink's restore")

    def encode(self, limit: int = MAX_METADATA) -> tuple[int, str]:
        """``(offset, metadata)`` to commit: the offset is one past the highest offset covered (a watermark for
        people reading the group; the metadata is what counts)."""
        sources = {k: SourceCoverage(list(v.exact), list(v.dirty)) for k, v in self.sources.items() if v}
        step = 0
        while True:
            md = PREFIX + json.dumps({"s": [[t, p, [list(e) for e in c.exact], [list(e) for e in c.dirty]]
                                            for (t, p), c in sorted(sources.items())]}, separators=(",", ":"))
            if len(md) <= limit:
                break
            step += 1
            if not _squeeze(sources, step) and step > 1:
                raise ValueError(f"the progress of {len(sources)} source partitions in one destination partition "
                                 f"does not fit Kafka's offset metadata ({len(md)} characters): use --name to "
                                 f"keep this restore's progress in a group of its own")
        highs = [h for c in sources.values() if (h := c.high()) is not None]
        return (max(highs) + 1 if highs else 0), md


def _squeeze(sources: dict[tuple[str, int], SourceCoverage], step: int) -> bool:
    """Make the coverage shorter, only ever by claiming less: exact entries become dirty, dirty ones widen.
    False when nothing is left to squeeze."""
    before = dict(sources)
    for key, c in sources.items():
        if step == 1:  # windowed entries first: they are the least likely to be skipped by a later restore
            dirty = c.dirty + [(a, b) for a, b, f, t in c.exact if f is not None or t is not None]
            sources[key] = SourceCoverage([e for e in c.exact if e[2] is None and e[3] is None], merge(dirty))
        elif len(c.dirty) > 1:  # join the two dirty intervals with the smallest gap between them
            d = merge(c.dirty)
            i = min(range(len(d) - 1), key=lambda j: d[j + 1][0] - d[j][1])
            sources[key] = SourceCoverage(c.exact, d[:i] + [(d[i][0], d[i + 1][1])] + d[i + 2:])
        elif c.exact:  # the smallest exact entry gives up its claim
            j = min(range(len(c.exact)), key=lambda k: c.exact[k][1] - c.exact[k][0])
            a, b, _f, _t = c.exact[j]
            sources[key] = SourceCoverage(c.exact[:j] + c.exact[j + 1:], merge(c.dirty + [(a, b)]))
    return sources != before
