"""Joda DateTimeFormat tokens, zones, DST semantics and Java arithmetic (lakesink.objects.timeformat)."""
from datetime import datetime

import pytest

from lakesink.objects.timeformat import (JodaFormatter, Zone, bucket_start, is_english_locale, java_div, next_time_adjusted_by_day, zone)
from lakesink.errors import PatternError

H = 3_600_000
D = 86_400_000


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def fmt(pattern: str, iso: str, tz: str = "UTC", locale: str = "en") -> str:
    return JodaFormatter(pattern, tz, locale).format(ms(iso))


@pytest.mark.parametrize(
    "pattern,expected",
    [
        ("yyyy", "2026"), ("YYYY", "2026"), ("yy", "26"), ("y", "2026"), ("yyyyy", "02026"),
        ("MM", "03"), ("M", "3"), ("MMM", "Mar"), ("MMMM", "March"),
        ("dd", "05"), ("d", "5"), ("HH", "14"), ("H", "14"), ("hh", "02"), ("h", "2"), ("k", "14"), ("K", "2"),
        ("mm", "07"), ("ss", "09"), ("SSS", "045"), ("S", "0"), ("SSSS", "0450"),
        ("a", "PM"), ("EEE", "Thu"), ("EEEE", "Thursday"), ("e", "4"), ("D", "64"), ("w", "10"),
        ("G", "AD"), ("C", "20"), ("Z", "+0000"), ("ZZ", "+00:00"), ("ZZZ", "UTC"), ("z", "UTC"),
    ],
)
def test_tokens(pattern: str, expected: str) -> None:
    assert fmt(pattern, "2026-03-05T14:07:09.045+00:00") == expected


def test_year_of_era_is_not_week_year() -> None:
    # 2027-01-01 is in ISO week 2026-W53: Joda Y/y print 2027, only x is the week-year
    assert fmt("YYYY yyyy xxxx ww", "2027-01-01T12:00:00+00:00") == "2027 2027 2026 53"
    assert fmt("YYYY xxxx-'W'ww", "2024-12-30T12:00:00+00:00") == "2024 2025-W01"


def test_quoted_literals_and_escaped_quote() -> None:
    assert fmt("'year'=YYYY/'month'=MM", "2015-12-07T15:00:00+00:00") == "year=2015/month=12"
    assert fmt("''HH''", "2015-12-07T15:00:00+00:00") == "'15'"
    assert fmt("'it''s' HH", "2015-12-07T15:00:00+00:00") == "it's 15"
    assert fmt("dd-MM_HH.mm", "2015-12-07T15:04:00+00:00") == "07-12_15.04"


def test_zone_tokens_in_new_york() -> None:
    winter, summer = "2026-01-15T17:00:00+00:00", "2026-07-15T16:00:00+00:00"
    assert fmt("HH Z ZZ z ZZZ", winter, "America/New_York") == "12 -0500 -05:00 EST America/New_York"
    assert fmt("HH Z ZZ z", summer, "America/New_York") == "12 -0400 -04:00 EDT"


def test_fixed_offset_zone() -> None:
    assert fmt("HH:mm ZZ ZZZ", "2026-01-01T00:00:00+00:00", "+05:30") == "05:30 +05:30 +05:30"
    assert zone("+0530").id == "+05:30"
    assert zone("-08").id == "-08:00"
    assert zone("+00:00").id == "UTC"


@pytest.mark.parametrize("bad", ["Mars/Olympus", "", "+25:00", "../etc/passwd", "+5"])
def test_invalid_zone(bad: str) -> None:
    with pytest.raises(PatternError):
        Zone(bad)


@pytest.mark.parametrize("pattern", ["qq", "YYYY-ii", "uuuu", "LL"])
def test_unknown_letters_rejected(pattern: str) -> None:
    with pytest.raises(PatternError, match="illegal pattern component"):
        JodaFormatter(pattern, "UTC", "en")


def test_text_tokens_need_english_locale() -> None:
    for p in ("MMM", "EEE", "a", "G", "z"):
        with pytest.raises(PatternError, match="English"):
            JodaFormatter(p, "UTC", "fr")
    # numeric tokens are locale independent
    assert JodaFormatter("YYYY/MM/dd", "UTC", "fr").format(0) == "1970/01/01"
    assert is_english_locale("en-US") and is_english_locale("en_GB") and not is_english_locale("de")


def test_full_zone_names_not_supported() -> None:
    with pytest.raises(PatternError, match="zzzz"):
        JodaFormatter("zzzz", "UTC", "en")


def test_java_division_truncates_toward_zero() -> None:
    assert java_div(-7, 2) == -3 and java_div(7, 2) == 3 and java_div(-6, 3) == -2
    # pre-1970: Java's (local / d) * d rounds toward zero, so -1 ms lands in the 1970-01-01T00 bucket
    assert bucket_start(-1, H, zone("UTC")) == 0
    assert bucket_start(-H - 1, H, zone("UTC")) == -H


def test_local_to_utc_gap_shifts_forward() -> None:
    ny = zone("America/New_York")
    # 02:30 does not exist on 2026-03-08; Joda (non-strict) gives 07:30Z = 03:30 EDT
    assert ny.local_to_utc(ms("2026-03-08T02:30:00+00:00")) == ms("2026-03-08T07:30:00+00:00")
    with pytest.raises(PatternError):
        ny.local_to_utc(ms("2026-03-08T02:30:00+00:00"), strict=True)


def test_local_to_utc_overlap_matches_joda() -> None:
    # New York (offset < 0): the earlier, daylight offset → 01:30 EDT = 05:30Z
    ny = zone("America/New_York")
    assert ny.local_to_utc(ms("2026-11-01T01:30:00+00:00")) == ms("2026-11-01T05:30:00+00:00")
    # Berlin (offset > 0): Joda keeps the offset found at the local instant → 02:30 CET = 01:30Z
    be = zone("Europe/Berlin")
    assert be.local_to_utc(ms("2026-10-25T02:30:00+00:00")) == ms("2026-10-25T01:30:00+00:00")


def test_bucket_start_aligns_to_local_time() -> None:
    ny = zone("America/New_York")
    assert bucket_start(ms("2026-01-15T04:59:00+00:00"), D, ny) == ms("2026-01-14T05:00:00+00:00")
    assert bucket_start(ms("2026-07-15T04:00:00+00:00"), D, ny) == ms("2026-07-15T04:00:00+00:00")
    kolkata = zone("Asia/Kolkata")  # half-hour offset: hourly buckets start at :30 UTC
    assert bucket_start(ms("2026-01-01T10:45:00+00:00"), H, kolkata) == ms("2026-01-01T10:30:00+00:00")
    with pytest.raises(PatternError):
        bucket_start(0, 0, ny)


def test_next_time_adjusted_by_day() -> None:
    utc = zone("UTC")
    midnight = ms("2026-05-01T00:00:00+00:00")
    assert next_time_adjusted_by_day(midnight, H, utc) == midnight + H
    assert next_time_adjusted_by_day(midnight - 1000, H, utc) == midnight
    assert next_time_adjusted_by_day(midnight + 1000, H, utc) == midnight + H
    # a period that does not divide the day is capped at the next midnight
    assert next_time_adjusted_by_day(midnight + 22 * H, 7 * H, utc) == midnight + D
    ny = zone("America/New_York")
    t = ms("2026-05-01T13:10:00+00:00")  # 09:10 EDT
    assert next_time_adjusted_by_day(t, H, ny) == ms("2026-05-01T14:00:00+00:00")


def test_formatter_exposes_literals() -> None:
    assert JodaFormatter("'year'=YYYY/'x'", "UTC").literals == ["year=", "/x"]
