"""Partitioners: where a record goes inside a topic (spec §1.3–1.5).

Built-ins mirror Confluent: :class:`DefaultPartitioner` (``partition=<n>``),
:class:`FieldPartitioner`, :class:`TimeBasedPartitioner` and its fixed forms
:class:`DailyPartitioner` / :class:`HourlyPartitioner`, plus the S3 sink's
:class:`TombstonePartitioner` wrapper for ``behavior.on.null.values=write``.

Custom partitioners (``partitioner.class=pkg.mod.Class``) subclass :class:`Partitioner`:

* ``__init__(self, config: SinkConfig)`` — receives the validated config (:mod:`lakesink.wiring` passes it);
* ``encode_partition(self, record, timestamp_ms) -> str`` — required; raise
  :class:`~lakesink.errors.PartitionError` (use :meth:`Partitioner.fail`) for records it cannot place;
* optional: ``time_based = True`` with ``extract_timestamp(self, record, now_ms) -> int`` to take part
  in ``rotate.interval.ms``; ``partitioned_path(self, topic, encoded)`` to change the directory
  (it must stay under ``<topic>``; :mod:`lakesink.objects.naming` enforces it).

Field values follow Confluent's rules (ints → decimal, strings raw, booleans ``true``/``false``,
null → ``null``; floats, bytes, records, lists → error) and additionally work on schemaless dict
values (JSON objects), which Confluent rejects. String values go through
:func:`lakesink.objects.naming.encode_field_value` (see that module for the path-safety choice).

``RecordField`` timestamps: int/float epoch ms, numeric strings ``^-?[0-9]{1,19}$`` as ms, ISO-8601
strings (a string without a zone is read as **UTC** — Joda would use the JVM default zone, which is
not reproducible across machines), and ``datetime`` objects (naive → UTC).
"""
from __future__ import annotations

import importlib
import re
from abc import ABC, abstractmethod
from datetime import date, datetime, timezone
from dataclasses import dataclass
from typing import Any, Sequence

from lakesink.errors import InvalidArgumentError, KeyNameError, PartitionError
from lakesink.objects.naming import encode_field_value, validate_topic
from lakesink.objects.records import SinkRecord
from lakesink.objects.timeformat import JodaFormatter, Zone, bucket_start, zone

__all__ = [
    "Partitioner",
    "DefaultPartitioner",
    "FieldPartitioner",
    "TimeBasedPartitioner",
    "DailyPartitioner",
    "HourlyPartitioner",
    "TombstonePartitioner",
    "TimestampExtractor",
    "WallclockExtractor",
    "RecordExtractor",
    "RecordFieldExtractor",
    "make_extractor",
    "load_partitioner_class",
    "PartitionerSettings",
    "build_partitioner",
    "BUILTIN_KINDS",
    "DAILY_PATH_FORMAT",
    "HOURLY_PATH_FORMAT",
]

DAILY_PATH_FORMAT = "'year'=YYYY/'month'=MM/'day'=dd"
HOURLY_PATH_FORMAT = "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH"
_NUMERIC_TS = re.compile(r"^-?[0-9]{1,19}$")
_MISSING = object()
#: the timestamps :meth:`TimeBasedPartitioner.record_time_buckets` takes (years 2..9998, any offset: well inside
#: what :mod:`datetime` formats); the record path handles the others
_MIN_TS, _MAX_TS = -62_104_060_800_000, 253_370_678_400_000


def _fail(record: SinkRecord, reason: str) -> PartitionError:
    return PartitionError(record.topic, record.partition, record.offset, reason)


class Partitioner(ABC):
    """Maps a record to its encoded partition (a relative directory under the topic)."""

    time_based: bool = False
    directory_delim: str = "/"

    @abstractmethod
    def encode_partition(self, record: SinkRecord, timestamp_ms: int | None = None) -> str:
        """The encoded partition of ``record``; ``timestamp_ms`` is the extracted time (time-based)."""

    def extract_timestamp(self, record: SinkRecord, now_ms: int) -> int | None:
        """Record time used for bucketing and ``rotate.interval.ms``; None when not time-based."""
        return None

    def partitioned_path(self, topic: str, encoded_partition: str) -> str:
        """``topic + directory.delim + encodedPartition`` (Confluent ``generatePartitionedPath``)."""
        return validate_topic(topic) + self.directory_delim + encoded_partition

    @staticmethod
    def fail(record: SinkRecord, reason: str) -> PartitionError:
        """A PartitionError naming the record (topic, partition, offset) and the reason."""
        return _fail(record, reason)


class DefaultPartitioner(Partitioner):
    """``partition=<kafka partition>``."""

    def __init__(self, directory_delim: str = "/"):
        self.directory_delim = directory_delim

    def encode_partition(self, record: SinkRecord, timestamp_ms: int | None = None) -> str:
        return f"partition={record.partition}"


def _lookup(value: Any, dotted: str) -> Any:
    """Nested field of a dict value (``a.b.c``); ``_MISSING`` when absent."""
    cur = value
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


class FieldPartitioner(Partitioner):
    """``<field>=<value>`` for each configured field, joined with ``directory.delim``."""

    def __init__(self, fields: Sequence[str], directory_delim: str = "/"):
        if not fields:
            raise InvalidArgumentError("FieldPartitioner needs at least one field name")
        self.fields = tuple(fields)
        self.directory_delim = directory_delim

    def _text(self, record: SinkRecord, name: str, v: Any) -> str:
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, str):
            try:
                return encode_field_value(v, self.directory_delim)
            except KeyNameError as e:  # a value no key can hold: the record's fault, named as such
                raise _fail(record, f"field {name!r}: {e}") from None
        raise _fail(record, f"field {name!r} has unsupported type {type(v).__name__} for partitioning "
                            "(only integers, strings, booleans and null)")

    def encode_partition(self, record: SinkRecord, timestamp_ms: int | None = None) -> str:
        value = record.value
        if not isinstance(value, dict):
            raise _fail(record, f"FieldPartitioner needs a record/object value, got {type(value).__name__}")
        parts = []
        for name in self.fields:
            v = _lookup(value, name)
            if v is _MISSING:
                raise _fail(record, f"field {name!r} not found in value")
            parts.append(f"{name}={self._text(record, name, v)}")
        return self.directory_delim.join(parts)


# --------------------------------------------------------------------------- timestamps

class TimestampExtractor(ABC):
    """Confluent ``TimestampExtractor``; ``deterministic`` is False for wall-clock time."""

    deterministic = True

    @abstractmethod
    def extract(self, record: SinkRecord, now_ms: int) -> int:
        """Epoch ms for ``record``; raises PartitionError when there is none."""


class WallclockExtractor(TimestampExtractor):
    deterministic = False

    def extract(self, record: SinkRecord, now_ms: int) -> int:
        return now_ms


class RecordExtractor(TimestampExtractor):
    def extract(self, record: SinkRecord, now_ms: int) -> int:
        if record.timestamp is None:
            raise _fail(record, "record has no timestamp (timestamp.extractor=Record)")
        return int(record.timestamp)


def _datetime_ms(dt: datetime) -> int:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    delta = dt - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _parse_iso(s: str) -> datetime | None:
    t = s.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(t)
    except ValueError:
        return None


def timestamp_from_value(v: Any) -> int | None:
    """RecordField conversion rules; None when ``v`` cannot be a timestamp."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v) if v == v and abs(v) < 9.3e18 else None
    if isinstance(v, str):
        if _NUMERIC_TS.match(v):
            n = int(v)
            return n if -(2**63) <= n < 2**63 else None
        dt = _parse_iso(v)
        return _datetime_ms(dt) if dt else None
    if isinstance(v, datetime):
        return _datetime_ms(v)
    if isinstance(v, date):
        return _datetime_ms(datetime(v.year, v.month, v.day))
    return None


class RecordFieldExtractor(TimestampExtractor):
    """``timestamp.field`` (dotted path) of the record value."""

    def __init__(self, field: str):
        self.field = field

    def extract(self, record: SinkRecord, now_ms: int) -> int:
        value = record.value
        v = _lookup(value, self.field) if isinstance(value, dict) else _MISSING
        if v is _MISSING:
            raise _fail(record, f"timestamp field {self.field!r} not found in value")
        if v is None:
            raise _fail(record, f"timestamp field {self.field!r} is null")
        ts = timestamp_from_value(v)
        if ts is None:
            raise _fail(record, f"timestamp field {self.field!r} value {v!r} "
                                f"({type(v).__name__}) is not epoch ms, a numeric string or ISO-8601")
        return ts


def make_extractor(name: str, field: str = "timestamp") -> TimestampExtractor:
    """``Wallclock`` / ``Record`` / ``RecordField`` (already normalised by the config)."""
    if name == "Wallclock":
        return WallclockExtractor()
    if name == "Record":
        return RecordExtractor()
    if name == "RecordField":
        return RecordFieldExtractor(field)
    raise InvalidArgumentError(f"unknown timestamp extractor {name!r}")


class TimeBasedPartitioner(Partitioner):
    """Bucket start (``partition.duration.ms``, local-time aligned) printed with ``path.format``."""

    time_based = True

    def __init__(
        self,
        path_format: str,
        partition_duration_ms: int,
        timezone_id: str,
        locale: str = "en",
        extractor: TimestampExtractor | None = None,
        directory_delim: str = "/",
    ):
        if partition_duration_ms <= 0:
            raise InvalidArgumentError("partition.duration.ms must be > 0")
        # Confluent strips one trailing directory.delim from path.format
        if path_format.endswith(directory_delim):
            path_format = path_format[: -len(directory_delim)]
        self.path_format = path_format
        self.duration_ms = partition_duration_ms
        self.zone: Zone = zone(timezone_id)
        self.formatter = JodaFormatter(path_format, self.zone, locale)
        self.extractor = extractor or WallclockExtractor()
        self.directory_delim = directory_delim
        self._cache: dict[int, str] = {}

    def extract_timestamp(self, record: SinkRecord, now_ms: int) -> int | None:
        return self.extractor.extract(record, now_ms)

    def encode_partition(self, record: SinkRecord, timestamp_ms: int | None = None) -> str:
        if timestamp_ms is None:
            raise _fail(record, "no timestamp for time-based partitioning")
        try:
            return self._path(bucket_start(int(timestamp_ms), self.duration_ms, self.zone))
        except (OverflowError, ValueError) as e:
            raise _fail(record, f"timestamp {timestamp_ms} cannot be formatted: {e}") from None

    def _path(self, start: int) -> str:
        """The encoded partition of the bucket starting at ``start`` (UTC ms), cached."""
        hit = self._cache.get(start)
        if hit is None:
            if len(self._cache) > 4096:
                self._cache.clear()
            hit = self._cache[start] = self.formatter.format(start)
        return hit

    @property
    def encodes_record_times(self) -> bool:
        """Whether :meth:`record_time_buckets` may stand for :meth:`encode_partition` (the Record extractor, and
        this class's own bucketing and formatting: a subclass that overrides them is not vouched for)."""
        return (type(self.extractor) is RecordExtractor
                and type(self).encode_partition is TimeBasedPartitioner.encode_partition
                and type(self).extract_timestamp is TimeBasedPartitioner.extract_timestamp)

    def record_time_buckets(self, timestamps: Sequence[int]) -> "tuple[Any, list[str]] | None":
        """The encoded partitions of records whose timestamps (the Record extractor's time) are ``timestamps``,
        as ``(codes, paths)``: an int64 numpy array with one code per record, ascending with the bucket, and the
        path of each code (two codes may print alike, for a ``path.format`` that leaves out what tells their
        buckets apart). The columnar path (``lakesink.executor.columnar``) cuts runs from a batch's timestamp
        column with it (:meth:`Rotator.process_time_run <lakesink.objects.rotation.Rotator.process_time_run>`).

        Exactly :meth:`encode_partition`'s strings, computed once per distinct bucket rather than per record:
        each timestamp's local time is ``ts + offset(ts)`` as :meth:`Zone.utc_to_local
        <lakesink.objects.timeformat.Zone.utc_to_local>` gives it, the offset read once per whole second (tz
        database transitions fall on whole seconds; a second whose two ends disagree is not vouched for), the
        local bucket truncated as Java does, and each distinct bucket start converted (:meth:`Zone.local_to_utc
        <lakesink.objects.timeformat.Zone.local_to_utc>`) and printed by this partitioner's own :meth:`_path`.
        None when it cannot vouch for them (not :attr:`encodes_record_times`, or a timestamp outside the years
        2..9998, where the record path names the record it cannot format)."""
        import numpy as np

        if not self.encodes_record_times:
            return None
        n = len(timestamps)
        if n == 0:
            return np.zeros(0, dtype=np.int64), []
        ts = np.asarray(timestamps, dtype=np.int64)
        if int(ts.min()) < _MIN_TS or int(ts.max()) > _MAX_TS:
            return None
        z, d = self.zone, self.duration_ms
        if z.fixed_offset_ms is not None:
            local = ts + z.fixed_offset_ms
        else:
            secs, inv = np.unique(ts // 1000, return_inverse=True)
            offsets = np.empty(len(secs), dtype=np.int64)
            for k, s in enumerate(secs.tolist()):
                a = z.offset_ms(s * 1000)
                if a != z.offset_ms(s * 1000 + 999):
                    return None
                offsets[k] = a
            local = ts + offsets[inv.reshape(-1)]
        q = local // d  # floor; Java's long division truncates toward zero (timeformat.java_div)
        q += (local < 0) & (q * d != local)
        lo, hi = int(q.min()), int(q.max())
        if lo == hi:  # one bucket (the common case): no sort
            buckets, codes = [lo * d], np.zeros(n, dtype=np.int64)
        else:
            uniq, codes = np.unique(q, return_inverse=True)
            buckets, codes = [b * d for b in uniq.tolist()], codes.reshape(-1).astype(np.int64, copy=False)
        try:
            return codes, [self._path(z.local_to_utc(b, False)) for b in buckets]
        except (OverflowError, ValueError):
            return None


class DailyPartitioner(TimeBasedPartitioner):
    """``'year'=YYYY/'month'=MM/'day'=dd``, one day buckets (user path.format/duration ignored)."""

    def __init__(self, timezone_id: str, locale: str = "en", extractor: TimestampExtractor | None = None,
                 directory_delim: str = "/"):
        super().__init__(DAILY_PATH_FORMAT.replace("/", directory_delim), 86_400_000, timezone_id, locale,
                         extractor, directory_delim)


class HourlyPartitioner(TimeBasedPartitioner):
    """``'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH``, one hour buckets."""

    def __init__(self, timezone_id: str, locale: str = "en", extractor: TimestampExtractor | None = None,
                 directory_delim: str = "/"):
        super().__init__(HOURLY_PATH_FORMAT.replace("/", directory_delim), 3_600_000, timezone_id, locale,
                         extractor, directory_delim)


class TombstonePartitioner(Partitioner):
    """``behavior.on.null.values=write``: tombstones go to ``tombstone.encoded.partition``.

    Their timestamp is the Kafka record timestamp (Confluent ``TombstoneTimestampExtractor``);
    other records are delegated.
    """

    def __init__(self, inner: Partitioner, tombstone_partition: str = "tombstone"):
        self.inner = inner
        self.tombstone_partition = tombstone_partition
        self.time_based = inner.time_based
        self.directory_delim = inner.directory_delim

    def extract_timestamp(self, record: SinkRecord, now_ms: int) -> int | None:
        if record.value is None and self.time_based:
            if record.timestamp is None:
                raise _fail(record, "tombstone has no record timestamp")
            return int(record.timestamp)
        return self.inner.extract_timestamp(record, now_ms)

    def encode_partition(self, record: SinkRecord, timestamp_ms: int | None = None) -> str:
        if record.value is None:
            return self.tombstone_partition
        return self.inner.encode_partition(record, timestamp_ms)

    def partitioned_path(self, topic: str, encoded_partition: str) -> str:
        return self.inner.partitioned_path(topic, encoded_partition)


def load_partitioner_class(path: str) -> type[Partitioner]:
    """Import ``pkg.mod.Class`` and check it subclasses :class:`Partitioner` (ValueError if not)."""
    mod_name, _, cls_name = path.rpartition(".")
    if not mod_name or not cls_name:
        raise InvalidArgumentError(f"{path!r} is not a dotted 'package.module.Class' path")
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:  # ImportError, or an error raised by the module itself
        raise InvalidArgumentError(f"cannot import module {mod_name!r}: {type(e).__name__}: {e}") from None
    cls = getattr(mod, cls_name, None)
    if cls is None:
        raise InvalidArgumentError(f"module {mod_name!r} has no attribute {cls_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Partitioner)):
        raise InvalidArgumentError(f"{path!r} is not a subclass of lakesink.objects.partitioners.Partitioner")
    return cls


@dataclass(frozen=True)
class PartitionerSettings:
    """What a built-in partitioner needs (already validated and normalised by the config;
    :func:`lakesink.wiring.partitioner` fills it in)."""

    kind: str = "default"                    # default | field | time | daily | hourly | pkg.mod.Class
    directory_delim: str = "/"
    fields: tuple[str, ...] = ()
    path_format: str = ""
    partition_duration_ms: int = -1
    timezone: str = ""
    locale: str = "en"
    timestamp_extractor: str = "Wallclock"
    timestamp_field: str = "timestamp"
    behavior_on_null_values: str = "fail"
    tombstone_encoded_partition: str = "tombstone"


BUILTIN_KINDS = ("default", "field", "time", "daily", "hourly")


def build_partitioner(settings: PartitionerSettings, custom: Partitioner | None = None) -> Partitioner:
    """The partitioner ``settings`` describe, wrapped for tombstones when needed.

    A custom ``kind`` (``pkg.mod.Class``) is instantiated by the caller, which passes it as ``custom``
    (custom partitioners receive the whole config; see the module docstring)."""
    kind = settings.kind
    delim = settings.directory_delim
    p: Partitioner
    if kind == "default":
        p = DefaultPartitioner(delim)
    elif kind == "field":
        p = FieldPartitioner(settings.fields, delim)
    elif kind in ("time", "daily", "hourly"):
        ext = make_extractor(settings.timestamp_extractor, settings.timestamp_field)
        if kind == "daily":
            p = DailyPartitioner(settings.timezone, settings.locale, ext, delim)
        elif kind == "hourly":
            p = HourlyPartitioner(settings.timezone, settings.locale, ext, delim)
        else:
            p = TimeBasedPartitioner(settings.path_format, settings.partition_duration_ms, settings.timezone,
                                     settings.locale, ext, delim)
    elif custom is not None:
        p = custom
    else:
        raise InvalidArgumentError(f"partitioner {kind!r} is not built in: pass the custom instance")
    if settings.behavior_on_null_values == "write":
        p = TombstonePartitioner(p, settings.tombstone_encoded_partition)
    return p
