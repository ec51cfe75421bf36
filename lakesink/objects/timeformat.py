"""Joda-Time compatible time zones, bucketing and ``path.format`` printing (no JVM).

Confluent's TimeBasedPartitioner formats the bucket start with Joda ``DateTimeFormat`` in a Joda
``DateTimeZone``. This module reproduces the parts lakesink needs, exactly:

* :class:`Zone` — a time zone accepted by Joda ``DateTimeZone.forID``: ``UTC``, IANA ids
  (``America/New_York``) and fixed offsets (``+05:30``, ``-0800``, ``+05``). Offsets come from the
  system tz database via :mod:`zoneinfo`. :meth:`Zone.local_to_utc` is a transcription of Joda's
  ``convertLocalToUTC(instantLocal, strict)``: for a local time inside a DST *gap* the result is
  shifted forward (02:30 on a spring-forward night in New York becomes 03:30 EDT); inside an
  *overlap* Joda uses the offset in force at ``instantLocal`` read as a UTC instant, which is the
  earlier (summer) offset in the Western hemisphere and the later (winter) one in the Eastern.
* :func:`bucket_start` — ``TimeBasedPartitioner.getPartition``: local epoch ms, Java long division
  (truncates toward zero, unlike Python ``//`` for instants before 1970), back to UTC.
* :class:`JodaFormatter` — compiles a Joda pattern with an explicit token table. Joda ``Y`` is
  year-of-era (NOT week-year as in ``java.time``/Spark), ``x`` is week-year. Text tokens
  (``MMM``, ``EEE``, ``a``, ``G``, ``z``) are supported for English locales (``en``, ``en-US``,
  ``en_GB`` …) only; for other locales they raise :class:`PatternError` at compile time rather
  than print something Joda would not. ``zzzz`` (full zone names) is not supported. ``z`` prints the
  tz database abbreviation (``EST``/``EDT``); Joda prints Java's name, which matches for the common
  zones but can differ where the tz database only has numeric abbreviations (``+03``).
* :func:`next_time_adjusted_by_day` — Confluent ``DateTimeUtils.getNextTimeAdjustedByDay`` for
  ``rotate.schedule.interval.ms`` (non-strict local→UTC: Joda's strict mode would throw for a zone
  whose midnight falls into a DST gap; lakesink shifts forward instead).
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
from lakesink.errors import PatternError

__all__ = [
    "PatternError",
    "Zone",
    "zone",
    "JodaFormatter",
    "java_div",
    "bucket_start",
    "next_time_adjusted_by_day",
    "is_english_locale",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
DAY_MS = 86_400_000


def java_div(a: int, b: int) -> int:
    """Java ``long`` division: truncates toward zero (Python ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# --------------------------------------------------------------------------- zones

_OFFSET_RE = re.compile(r"^([+-])(\d{2})(?::?(\d{2})(?::?(\d{2})(?:\.(\d{3}))?)?)?$")


def _print_offset(offset_ms: int) -> str:
    """Joda ``printOffset``: ``+HH:mm`` plus ``:ss``/``.SSS`` only when needed."""
    sign = "+" if offset_ms >= 0 else "-"
    v = abs(offset_ms)
    h, v = divmod(v, 3_600_000)
    m, v = divmod(v, 60_000)
    out = f"{sign}{h:02d}:{m:02d}"
    s, ms = divmod(v, 1000)
    if s or ms:
        out += f":{s:02d}"
        if ms:
            out += f".{ms:03d}"
    return out


class Zone:
    """A Joda ``DateTimeZone`` equivalent. Raises :class:`PatternError` for unknown ids."""

    __slots__ = ("id", "_tz", "fixed_offset_ms")

    def __init__(self, zone_id: str):
        if not isinstance(zone_id, str) or not zone_id.strip():
            raise PatternError("time zone id is empty")
        zid = zone_id.strip()
        self.fixed_offset_ms: int | None = None
        m = _OFFSET_RE.match(zid)
        if zid == "UTC":
            self.fixed_offset_ms = 0
            self.id = "UTC"
            self._tz: tzinfo = timezone.utc
        elif m:
            sign, hh, mm, ss, sss = m.groups()
            ms = ((int(hh) * 60 + int(mm or 0)) * 60 + int(ss or 0)) * 1000 + int(sss or 0)
            if int(hh) > 23 or int(mm or 0) > 59 or int(ss or 0) > 59:
                raise PatternError(f"invalid UTC offset {zone_id!r}")
            ms = -ms if sign == "-" else ms
            self.fixed_offset_ms = ms
            # Joda normalises offset ids (``+0530`` → ``+05:30``) and maps a zero offset to UTC.
            self.id = "UTC" if ms == 0 else _print_offset(ms)
            self._tz = timezone(timedelta(milliseconds=ms))
        else:
            if ".." in zid or zid.startswith("/"):
                raise PatternError(f"unknown time zone id {zone_id!r}")
            try:
                self._tz = ZoneInfo(zid)
            except (ZoneInfoNotFoundError, ValueError, OSError):
                raise PatternError(
                    f"unknown time zone id {zone_id!r} (use an IANA id like 'America/New_York', "
                    "'UTC', or a fixed offset like '+05:30')"
                ) from None
            self.id = zid

    def __repr__(self) -> str:
        return f"Zone({self.id!r})"

    def __reduce__(self):  # ZoneInfo pickles by key; keep Zone cheap to ship to executors
        return (Zone, (self.id,))

    @property
    def tzinfo(self) -> tzinfo:
        return self._tz

    def offset_ms(self, utc_ms: int) -> int:
        """Offset (ms) in force at the UTC instant ``utc_ms`` (Joda ``getOffset``)."""
        if self.fixed_offset_ms is not None:
            return self.fixed_offset_ms
        dt = (_EPOCH + timedelta(milliseconds=utc_ms)).astimezone(self._tz)
        off = dt.utcoffset()
        return (off.days * 86_400 + off.seconds) * 1000 + off.microseconds // 1000

    def utc_to_local(self, utc_ms: int) -> int:
        """Joda ``convertUTCToLocal``: the local wall time, as epoch ms."""
        return utc_ms + self.offset_ms(utc_ms)

    def local_to_utc(self, local_ms: int, strict: bool = False) -> int:
        """Joda ``convertLocalToUTC(instantLocal, strict)``, line for line.

        ``nextTransition(a) != nextTransition(b)`` is evaluated as "the offset changes between
        a and b", which is equivalent for zones whose transitions are more than a few hours apart.
        """
        offset_local = self.offset_ms(local_ms)
        offset = self.offset_ms(local_ms - offset_local)
        if offset_local != offset and (strict or offset_local < 0):
            a, b = local_ms - offset_local, local_ms - offset
            lo, hi = (a, b) if a <= b else (b, a)
            if self.offset_ms(lo) != self.offset_ms(hi):
                if strict:
                    raise PatternError(f"local time {local_ms} does not exist in {self.id}")
                offset = offset_local
        return local_ms - offset

    def local_datetime(self, utc_ms: int) -> tuple[datetime, int]:
        """(naive local datetime, offset ms) of the UTC instant ``utc_ms``."""
        off = self.offset_ms(utc_ms)
        return _EPOCH.replace(tzinfo=None) + timedelta(milliseconds=utc_ms + off), off

    def short_name(self, utc_ms: int) -> str:
        if self.fixed_offset_ms is not None:
            return self.id
        dt = (_EPOCH + timedelta(milliseconds=utc_ms)).astimezone(self._tz)
        return dt.tzname() or self.id


@lru_cache(maxsize=256)
def zone(zone_id: str) -> Zone:
    """Cached :class:`Zone` constructor."""
    return Zone(zone_id)


def bucket_start(timestamp_ms: int, duration_ms: int, tz: Zone) -> int:
    """UTC start of the ``duration_ms`` bucket holding ``timestamp_ms``, aligned in local time.

    ``TimeBasedPartitioner.getPartition``: ``tz.convertLocalToUTC((local / d) * d, false)``.
    """
    if duration_ms <= 0:
        raise PatternError(f"partition duration must be > 0, got {duration_ms}")
    local = tz.utc_to_local(timestamp_ms)
    return tz.local_to_utc(java_div(local, duration_ms) * duration_ms, False)


def next_time_adjusted_by_day(now_ms: int, period_ms: int, tz: Zone) -> int:
    """Next ``start of local day + k·period`` after ``now_ms``, capped at start of day + 24 h."""
    start_of_day = tz.local_to_utc(java_div(tz.utc_to_local(now_ms), DAY_MS) * DAY_MS, False)
    next_offset = (java_div(now_ms - start_of_day, period_ms) + 1) * period_ms
    return start_of_day + min(next_offset, DAY_MS)


# --------------------------------------------------------------------------- formatter

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_TEXT_LETTERS = {"G", "E", "a", "z"}  # plus M with count >= 3
_KNOWN_LETTERS = set("GCYxwepEyDMdaKhHkmsSzZ")


def is_english_locale(locale: str) -> bool:
    """``en``, ``en-US``, ``en_GB``… (Java ``new Locale(s)`` keeps only the language)."""
    lang = re.split(r"[-_]", (locale or "").strip(), maxsplit=1)[0].lower()
    return lang == "en"


class _Ctx:
    """Fields of one instant, computed once per format call."""

    __slots__ = ("dt", "off", "utc_ms", "zone")

    def __init__(self, dt: datetime, off: int, utc_ms: int, zone_: Zone):
        self.dt, self.off, self.utc_ms, self.zone = dt, off, utc_ms, zone_


def _pad(v: int, n: int) -> str:
    return f"-{(-v):0{n}d}" if v < 0 else f"{v:0{n}d}"


def _year_of_era(y: int) -> int:
    return y if y > 0 else 1 - y


def _offset_text(off: int, colon: bool) -> str:
    sign = "+" if off >= 0 else "-"
    h, rem = divmod(abs(off) // 60_000, 60)
    return f"{sign}{h:02d}{':' if colon else ''}{rem:02d}"


def _tokenize(pattern: str) -> list[tuple[str, str | int]]:
    """Joda ``DateTimeFormat.parseToken``: ('L', letter-count) tokens and ('T', literal)."""
    out: list[tuple[str, str | int]] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if ("A" <= c <= "Z") or ("a" <= c <= "z"):
            j = i
            while j < n and pattern[j] == c:
                j += 1
            out.append((c, j - i))
            i = j
            continue
        # literal run: quotes toggle literal mode, '' is a quote, letters end the run unless quoted
        buf: list[str] = []
        in_lit = False
        while i < n:
            c = pattern[i]
            if c == "'":
                if i + 1 < n and pattern[i + 1] == "'":
                    buf.append("'")
                    i += 2
                    continue
                in_lit = not in_lit
                i += 1
                continue
            if not in_lit and (("A" <= c <= "Z") or ("a" <= c <= "z")):
                break
            buf.append(c)
            i += 1
        out.append(("'", "".join(buf)))
    return out


def _compile_letter(c: str, n: int, english: bool) -> Callable[[_Ctx], str]:
    if c not in _KNOWN_LETTERS:
        raise PatternError(f"illegal pattern component {c * n!r} (not a Joda DateTimeFormat letter)")
    if (c in _TEXT_LETTERS or (c == "M" and n >= 3)) and not english:
        raise PatternError(
            f"pattern letter {c * n!r} prints locale text; lakesink supports text tokens for English "
            "locales only (use numeric tokens like 'MM', or locale=en)"
        )
    if c in ("y", "Y", "x"):
        def year(x: _Ctx) -> int:
            if c == "x":
                return x.dt.isocalendar()[0]
            return x.dt.year if c == "y" else _year_of_era(x.dt.year)
        if n == 2:
            return lambda x: f"{year(x) % 100:02d}"
        return lambda x: _pad(year(x), n)
    if c == "M":
        if n >= 4:
            return lambda x: _MONTHS[x.dt.month - 1]
        if n == 3:
            return lambda x: _MONTHS[x.dt.month - 1][:3]
        return lambda x: _pad(x.dt.month, n)
    if c == "E":
        if n >= 4:
            return lambda x: _DAYS[x.dt.weekday()]
        return lambda x: _DAYS[x.dt.weekday()][:3]
    if c == "z":
        if n >= 4:
            raise PatternError("'zzzz' (full time zone names) is not supported; use 'z', 'Z', 'ZZ' or 'ZZZ'")
        return lambda x: x.zone.short_name(x.utc_ms)
    if c == "Z":
        if n == 1:
            return lambda x: _offset_text(x.off, False)
        if n == 2:
            return lambda x: _offset_text(x.off, True)
        return lambda x: x.zone.id
    if c == "S":
        def frac(x: _Ctx) -> str:
            s = f"{x.dt.microsecond // 1000:03d}"
            return s[:n] if n <= 3 else s + "0" * (n - 3)
        return frac
    simple: dict[str, Callable[[datetime], int]] = {
        "C": lambda d: _year_of_era(d.year) // 100,
        "w": lambda d: d.isocalendar()[1],
        "e": lambda d: d.isoweekday(),
        "D": lambda d: d.timetuple().tm_yday,
        "d": lambda d: d.day,
        "K": lambda d: d.hour % 12,
        "h": lambda d: (d.hour % 12) or 12,
        "H": lambda d: d.hour,
        "k": lambda d: d.hour or 24,
        "m": lambda d: d.minute,
        "s": lambda d: d.second,
    }
    if c in simple:
        f = simple[c]
        return lambda x: _pad(f(x.dt), n)
    if c == "a":
        return lambda x: "AM" if x.dt.hour < 12 else "PM"
    if c == "G":
        return lambda x: "AD" if x.dt.year > 0 else "BC"
    raise PatternError(f"pattern letter {c!r} not supported")  # pragma: no cover


class JodaFormatter:
    """``DateTimeFormat.forPattern(pattern).withZone(zone).withLocale(locale)``, print only."""

    def __init__(self, pattern: str, tz: Zone | str, locale: str = "en"):
        self.pattern = pattern
        self.zone = tz if isinstance(tz, Zone) else zone(tz)
        self.locale = locale
        english = is_english_locale(locale)
        parts: list[Callable[[_Ctx], str] | str] = []
        for kind, val in _tokenize(pattern):
            if kind == "'":
                parts.append(str(val))
            else:
                parts.append(_compile_letter(kind, int(val), english))
        self._parts = parts

    @property
    def literals(self) -> list[str]:
        """Literal text of the pattern (used to vet path safety at config time)."""
        return [p for p in self._parts if isinstance(p, str)]

    def format(self, utc_ms: int) -> str:
        """Print the instant ``utc_ms`` in the formatter's zone."""
        dt, off = self.zone.local_datetime(utc_ms)
        ctx = _Ctx(dt, off, utc_ms, self.zone)
        return "".join(p if isinstance(p, str) else p(ctx) for p in self._parts)
