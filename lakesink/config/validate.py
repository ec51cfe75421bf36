"""Validation: a flat key → value mapping becomes a :class:`~lakesink.config.model.SinkConfig`, or one
:class:`~lakesink.errors.ConfigError` listing every problem.

:func:`build_values` reads the keys against the key table, then runs one small validator per section
(name, kafka, topics, naming/delimiters, formats, decoders, null values, affix, time zone,
partitioner/time, store/S3). Each validator reads the parsed values, reports into a
:class:`Problems` collector and returns the effective values of its section. Format and partitioner
names are resolved by :mod:`lakesink.plugins` (one alias table per kind).
Size: over the ~500-line guide on purpose. The section validators share one :class:`Problems` collector and one
order (later sections read earlier sections' values); split across modules they would pass that state around
for no reader's gain. A new section with its own rules gets its own module, as :mod:`.kafka` and
:mod:`.schema_registry` did.
"""
from __future__ import annotations

import difflib
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping

from lakesink import plugins
from lakesink.objects.formats.base import RecordView
from lakesink.config.keys import BY_NAME, KEYS, KNOWN_KEYS, Secret, ignored_reason, shown
from lakesink.config.layout import check_layout, check_locations, manifest_engine
from lakesink.config.overrides import apply_overrides, is_override
from lakesink.config.parse import as_str, unescape_java
from lakesink.config.schema_registry import check_registry, lift_converter_keys
from lakesink.config.translate import foreign_key
from lakesink.errors import BadValue, ConfigError, ConfigProblem, KeyNameError, PatternError

__all__ = ["Problems", "ParsedKeys", "build_values", "check_name", "check_kafka", "check_topics",
           "check_naming", "check_formats", "check_decoders", "check_null_values", "check_affix",
           "check_timezone", "check_partitioner", "check_store", "canonical_extractor", "EXTRACTORS",
           "DEFAULT_DECODER"]

EXTRACTORS = ("Wallclock", "Record", "RecordField")
#: ``value.decoder`` when unset, by (canonical) ``format.class``
DEFAULT_DECODER = {"avro": "avro", "parquet": "avro", "json": "json", "bytearray": "bytes", "blockgzip": "bytes"}
_TIME_BASED = "io.confluent.connect.storage.partitioner.TimeBasedPartitioner"


class Problems:
    """Collects problems (key, shown value, message) and warnings; secrets are masked on the way in."""

    def __init__(self) -> None:
        self.problems: list[ConfigProblem] = []
        self.warnings: list[str] = []
        self.bad_keys: set[str] = set()

    def __call__(self, key: str, value: Any, msg: str) -> None:
        self.bad_keys.add(key)
        self.problems.append(ConfigProblem(key, shown(key, value), msg))

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)


@dataclass
class ParsedKeys:
    """The mapping read against the key table: ``vals`` by attribute (defaults filled in)."""

    vals: dict[str, Any]
    kafka: dict[str, str]
    registry: dict[str, str]
    ignored: list[tuple[str, str]]
    overrides: dict[str, Any] | None = None  # Connect client overrides (lakesink.config.overrides)


# ----------------------------------------------------------------------------- keys

def read_keys(flat: Mapping[str, Any], problem: Problems) -> ParsedKeys:
    """Parse every key (table keys, ``kafka.*``, ``schema.registry.*``, ignored Connect keys); unknown
    keys are problems with a did-you-mean hint; missing keys get their defaults."""
    vals: dict[str, Any] = {}
    kafka: dict[str, str] = {}
    reg: dict[str, str] = {}
    ignored: list[tuple[str, str]] = []
    overrides: dict[str, Any] = {}
    for key, value in flat.items():
        key = str(key).strip()
        if key in BY_NAME:
            spec = BY_NAME[key]
            if value is None:
                continue
            try:
                parsed = spec.parse(value)
            except BadValue as e:
                problem(key, value, str(e))
                continue
            if spec.check is not None:
                msg = spec.check(parsed)
                if msg:
                    problem(key, value, msg)
                    continue
            vals[spec.attr] = Secret(parsed) if spec.secret else parsed
        elif key.startswith("kafka.") and len(key) > 6:
            try:
                kafka[key[6:]] = as_str(value)
            except BadValue as e:
                problem(key, value, str(e))
        elif key.startswith("schema.registry.") and len(key) > 16:
            try:
                reg[key[16:]] = as_str(value)
            except BadValue as e:
                problem(key, value, str(e))
        elif is_override(key):  # applied as kafka.* or ignored with a reason: lakesink.config.overrides
            overrides[key] = value
        elif (reason := ignored_reason(key)) is not None:
            ignored.append((key, reason))
            if reason.startswith("Confluent S3 sink key"):
                problem.warn(f"{key} is a Confluent S3 sink key lakesink does not implement; ignored")
            elif key == "transforms" and as_str(value):  # Connect SMTs: the archive would differ from Connect's
                problem.warn(f"transforms={as_str(value)}: {reason}")
        elif (foreign := foreign_key(key)) is not None:  # another connector's key: say what it is, not a guess
            conn, entry = foreign
            target = f"lakesink's is {entry.target!r}" if entry.target else "lakesink has no equivalent"
            note = f" ({entry.note})" if entry.note else ""
            problem(key, value, f"is a key of {conn.name}: {target}{note}; `lakesink check --translate` "
                                f"translates the whole config")
        else:
            close = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problem(key, value, f"unknown key{hint}")

    for spec in KEYS:
        if spec.attr not in vals:
            if spec.required and spec.name not in problem.bad_keys:
                problem(spec.name, None, "is required")
            vals[spec.attr] = spec.default
    return ParsedKeys(vals, kafka, reg, ignored, overrides)


# ----------------------------------------------------------------------------- sections

def check_name(vals: dict[str, Any], job_name: str | None, problem: Problems) -> str | None:
    name = job_name or vals.get("name")
    if job_name and vals.get("name") and vals["name"] != job_name:
        problem.warn(f"config 'name'={vals['name']!r} differs from the Connect name {job_name!r}; using the latter")
    if not name:
        problem("name", None, "is required (the job name)")
    elif not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", name):
        problem("name", name, "must be 1..200 characters of [A-Za-z0-9._-]")
    return name


def check_kafka(kafka: dict[str, str], problem: Problems, sources: dict[str, str] | None = None) -> str:
    """``kafka.bootstrap.servers``; every ``kafka.*`` key must mean the same to librdkafka (admin client,
    direct reader) as to Spark's Java consumer (see :mod:`lakesink.config.kafka`). ``isolation.level``
    defaults to read_committed wherever it is used (``kafka_options`` holds only what the config says).
    ``sources``: setting → the Connect override key it came from, named in its problems instead of kafka.*."""
    from lakesink.config.kafka import check_kafka_options
    from lakesink.config.keys import is_secret

    bootstrap = kafka.get("bootstrap.servers", "")
    if not bootstrap:
        problem("kafka.bootstrap.servers", None, "is required (Kafka brokers, host:port[,host:port])")
    _conf, problems = check_kafka_options(kafka, secret=is_secret)
    for key, msg in problems:
        problem((sources or {}).get(key[6:], key), kafka.get(key[6:]), msg)
    return bootstrap


def check_topics(vals: dict[str, Any], problem: Problems) -> tuple[tuple[str, ...], str | None]:
    topics = tuple(vals["topics"])
    regex = vals["topics_regex"] or None
    if topics and regex:
        problem("topics", ",".join(topics), "set either 'topics' or 'topics.regex', not both")
    elif not topics and not regex:
        problem("topics", None, "one of 'topics' or 'topics.regex' is required")
    for t in topics:
        if not re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", t) or t in (".", ".."):
            problem("topics", t, "is not a legal Kafka topic name ([a-zA-Z0-9._-], 1..249 chars)")
    if regex:
        try:
            re.compile(regex)
        except re.error as e:
            problem("topics.regex", regex, f"invalid regular expression: {e}")
    return topics, regex


def _check_segments(key: str, value: str, ddelim: str, problem: Problems) -> None:
    from lakesink.objects.naming import check_path_segments

    try:
        check_path_segments(value, ddelim, key)
    except KeyNameError as e:
        problem(key, value, str(e))


def check_naming(vals: dict[str, Any], problem: Problems) -> tuple[str, str, str]:
    """``directory.delim``, ``file.delim``, ``topics.dir``."""
    ddelim, fdelim = vals["directory_delim"], vals["file_delim"]
    if not ddelim:
        problem("directory.delim", ddelim, "must not be empty")
    elif "\\" in ddelim or ddelim in (".", ".."):
        problem("directory.delim", ddelim, "must not contain a backslash or be '.'/'..'")
    if not fdelim or any(c.isdigit() for c in fdelim) or (ddelim and ddelim in fdelim):
        problem("file.delim", fdelim, "must be non-empty, contain no digits and not contain directory.delim")
    tdir = vals["topics_dir"]
    if tdir and ddelim:
        _check_segments("topics.dir", tdir, ddelim, problem)
        if tdir.endswith(ddelim) or tdir.endswith("/"):
            problem("topics.dir", tdir, "must not end with the directory delimiter")
    return ddelim, fdelim, tdir


def check_formats(vals: dict[str, Any], problem: Problems) -> tuple[str, str, str, bytes, str]:
    """``format.class``, ``keys.format.class``, ``headers.format.class``, gzip compatibility,
    ByteArray separator/extension → (value, keys, headers format, separator, extension)."""
    fmt = plugins.canonical("format", vals["format_name"])
    if fmt is None:
        problem("format.class", vals["format_name"], "must be one of avro, json, bytearray, parquet, blockgzip "
                "(or io.confluent.connect.s3.format.<x>.<X>Format)")
        fmt = "avro"
    def holding(view: RecordView) -> list[str]:  # the format classes say which can hold a side file's view
        return [n for n in plugins.names("format") if plugins.load("format", n).supports_view(view)]

    kfmt = plugins.canonical("format", vals["keys_format_name"])
    if kfmt not in holding(RecordView.KEYS):
        problem("keys.format.class", vals["keys_format_name"], f"must be one of {', '.join(holding(RecordView.KEYS))}")
        kfmt = "avro"
    hfmt = plugins.canonical("format", vals["headers_format_name"])
    if hfmt not in holding(RecordView.HEADERS):
        why = f"{hfmt} is not allowed for headers; use " if hfmt is not None else "must be one of "
        problem("headers.format.class", vals["headers_format_name"], why + ", ".join(holding(RecordView.HEADERS)))
        hfmt = "avro"
    if vals["s3_compression_type"] == "gzip":
        checks = [("format.class", fmt, vals["format_name"])]
        if vals["store_kafka_keys"]:
            checks.append(("keys.format.class", kfmt, vals["keys_format_name"]))
        if vals["store_kafka_headers"]:
            checks.append(("headers.format.class", hfmt, vals["headers_format_name"]))
        takers = [n for n in plugins.names("format") if plugins.load("format", n).takes_s3_compression]
        for key, canon, given in checks:
            if canon not in takers:
                problem("s3.compression.type", "gzip",
                        f"is only supported with {' or '.join(takers)} formats, but {key}={given}")
    sep_text = vals["bytearray_separator_text"]
    separator = (unescape_java(sep_text) if sep_text is not None else "\n").encode("utf-8")
    bext = vals["bytearray_extension"]
    if not bext.startswith(".") or "/" in bext or "\\" in bext:
        problem("format.bytearray.extension", bext, "must start with '.' and contain no '/' or '\\'")
    return fmt, kfmt, hfmt, separator, bext


def check_decoders(vals: dict[str, Any], fmt: str, problem: Problems) -> tuple[str, str]:
    """``value.decoder`` (default by format), ``key.decoder``, ``value.schema``."""
    value_decoder = (vals["value_decoder"] or DEFAULT_DECODER[fmt]).lower()
    key_decoder = vals["key_decoder"].lower()
    if vals["value_schema"]:
        vs = vals["value_schema"]
        if vs.lstrip().startswith(("{", "[", '"')):
            try:
                json.loads(vs)
            except ValueError as e:
                problem("value.schema", vs[:80], f"is not valid JSON: {e}")
        elif not os.path.isfile(vs):
            problem("value.schema", vs, "names no file here (the driver reads it when the job starts; give an "
                                        "inline schema or a path that exists where the job runs)")
        else:
            try:
                with open(vs, encoding="utf-8") as f:
                    json.load(f)
            except (OSError, UnicodeDecodeError, ValueError) as e:
                problem("value.schema", vs, f"is not a readable Avro schema file (JSON): {e}")
    return value_decoder, key_decoder


def check_null_values(vals: dict[str, Any], problem: Problems) -> str:
    bonv = vals["behavior_on_null_values"].lower()
    if bonv == "write" and not vals["store_kafka_keys"]:
        problem("behavior.on.null.values", "write", "requires store.kafka.keys=true (tombstones are archived as keys)")
    return bonv


def check_affix(vals: dict[str, Any], problem: Problems) -> str:
    affix = vals["s3_schema_partition_affix_type"]
    if affix in ("PREFIX", "SUFFIX"):
        problem("s3.schema.partition.affix.type", affix, "is not supported by lakesink (only NONE)")
    elif affix != "NONE":
        problem("s3.schema.partition.affix.type", affix, "must be NONE (PREFIX/SUFFIX are not supported)")
    return affix


def check_timezone(vals: dict[str, Any], problem: Problems) -> tuple[str, bool]:
    """→ (timezone, whether it names a known zone)."""
    tz = vals["timezone"]
    tz_ok = False
    if tz:
        from lakesink.objects.timeformat import zone

        try:
            zone(tz)
        except PatternError as e:
            problem("timezone", tz, str(e))
        else:
            tz_ok = True
    if vals["rotate_schedule_interval_ms"] > 0 and not tz:
        problem("rotate.schedule.interval.ms", vals["rotate_schedule_interval_ms"],
                "requires 'timezone' (deadlines are aligned to the local day)")
    return tz, tz_ok


def canonical_extractor(v: str) -> str | None:
    """``Wallclock``/``Record``/``RecordField`` for any accepted spelling (Confluent nested class names,
    ``...TimestampExtractor`` suffix, any case); None when unknown."""
    base = v
    for pre in (_TIME_BASED + "$", _TIME_BASED + "."):
        if v.startswith(pre):
            base = v[len(pre):]
            break
    for e in EXTRACTORS:
        if base == e or base.lower() == e.lower() or base.lower() == e.lower() + "timestampextractor":
            return e
    return None


def _canonical_partitioner(raw: str, problem: Problems) -> str:
    pclass = plugins.canonical("partitioner", raw)
    if pclass is None:
        if "." in raw and re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+", raw):
            try:
                plugins.load("partitioner", raw)  # imports and checks the custom class
                pclass = raw
            except ValueError as e:
                problem("partitioner.class", raw, f"custom partitioner: {e}")
        else:
            problem("partitioner.class", raw, "must be one of default, field, time, daily, hourly, "
                    "io.confluent.connect.storage.partitioner.<X>Partitioner, or a Python 'pkg.mod.Class'")
    return pclass or "default"


def check_partitioner(vals: dict[str, Any], ddelim: str, tz: str, tz_ok: bool, bonv: str,
                      problem: Problems) -> dict[str, Any]:
    """``partitioner.class`` and its keys (fields, extractor, ``path.format``, duration, locale,
    time zone, tombstone partition) → the effective values, keyed by SinkConfig attribute."""
    pclass = _canonical_partitioner(vals["partitioner_class"], problem)
    time_based = pclass in ("time", "daily", "hourly")
    fields_ = tuple(vals["partition_field_name"])
    if pclass == "field":
        if not fields_:
            problem("partition.field.name", None, "is required for FieldPartitioner")
        for fname in fields_:
            if (ddelim and ddelim in fname) or "/" in fname or "\\" in fname or fname in (".", ".."):
                problem("partition.field.name", fname, "field names must not contain a directory delimiter")
    extractor = canonical_extractor(vals["timestamp_extractor"])
    if extractor is None:
        problem("timestamp.extractor", vals["timestamp_extractor"], "must be one of Wallclock, Record, RecordField")
        extractor = "Wallclock"
    path_format = vals["path_format"]
    duration = vals["partition_duration_ms"]
    if time_based:
        if pclass == "daily":
            from lakesink.objects.partitioners import DAILY_PATH_FORMAT

            path_format, duration = DAILY_PATH_FORMAT.replace("/", ddelim or "/"), 86_400_000
        elif pclass == "hourly":
            from lakesink.objects.partitioners import HOURLY_PATH_FORMAT

            path_format, duration = HOURLY_PATH_FORMAT.replace("/", ddelim or "/"), 3_600_000
        else:
            if not path_format.strip():
                problem("path.format", path_format or None, "is required for TimeBasedPartitioner "
                        "(Joda pattern, e.g. 'year'=YYYY/'month'=MM/'day'=dd)")
            if duration <= 0:
                problem("partition.duration.ms", duration, "must be > 0 for TimeBasedPartitioner")
        if ddelim and path_format.endswith(ddelim):
            path_format = path_format[: -len(ddelim)]
        if not vals["locale"]:
            problem("locale", None, "is required for time-based partitioners (e.g. en)")
        if not tz:
            problem("timezone", None, "is required for time-based partitioners (e.g. UTC, America/New_York)")
        if path_format.strip() and tz_ok and ddelim:
            check_path_format(path_format, tz, vals["locale"] or "en", ddelim, problem)
        if extractor == "Wallclock" or vals["rotate_schedule_interval_ms"] > 0:
            problem.warn("timestamp.extractor=Wallclock / rotate.schedule.interval.ms are non-deterministic: "
                         "replays may produce different object keys (exactly-once needs Record or RecordField)")
    else:
        if vals["rotate_interval_ms"] > 0:
            problem.warn("rotate.interval.ms is ignored: it only applies to time-based partitioners")
        if vals["rotate_schedule_interval_ms"] > 0:
            problem.warn("rotate.schedule.interval.ms is non-deterministic: replays may produce different keys")
    tomb = vals["tombstone_encoded_partition"]
    if bonv == "write" and ddelim:
        _check_segments("tombstone.encoded.partition", tomb, ddelim, problem)
    return {"partitioner_class": pclass, "partition_field_name": fields_, "timestamp_extractor": extractor,
            "path_format": path_format, "partition_duration_ms": duration, "tombstone_encoded_partition": tomb}


def check_path_format(pattern: str, tz: str, locale: str, ddelim: str, problem: Problems) -> None:
    """Compile the Joda pattern and vet a sample of its output for path safety."""
    from lakesink.objects.naming import check_path_segments
    from lakesink.objects.timeformat import JodaFormatter

    try:
        fmt = JodaFormatter(pattern, tz, locale)
    except PatternError as e:
        problem("path.format", pattern, str(e))
        return
    # Letters only print digits, names, offsets; unsafe output can only come from literals, so
    # formatting two far-apart instants is enough to catch '..', empty segments, backslashes.
    for sample in (0, 1_767_225_600_000 + 12 * 3_600_000):
        try:
            check_path_segments(fmt.format(sample), ddelim, "path.format output")
        except KeyNameError as e:
            problem("path.format", pattern, str(e))
            return


def check_store(vals: dict[str, Any], problem: Problems) -> str:
    """S3 bucket name, SSE-KMS, static credentials → the bucket."""
    bucket = vals["s3_bucket_name"]
    if bucket and not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
        problem("s3.bucket.name", bucket, "is not a valid S3 bucket name (3-63 chars of a-z, 0-9, '.', '-')")
    if vals["s3_sse_kms_key_id"] and vals["s3_ssea_name"] not in ("aws:kms", "aws:kms:dsse"):
        problem("s3.sse.kms.key.id", vals["s3_sse_kms_key_id"], "requires s3.ssea.name=aws:kms or aws:kms:dsse")
    if (vals["aws_access_key_id"] is None) != (vals["aws_secret_access_key"] is None):
        problem("aws.secret.access.key" if vals["aws_secret_access_key"] is None else "aws.access.key.id", None,
                "aws.access.key.id and aws.secret.access.key must be set together")
    else:
        vals["s3_credentials_source"] = credentials_source(vals, problem)
    return bucket


def credentials_source(vals: dict[str, Any], problem: Problems) -> str:
    """The credentials mode (lakesink.credentials) from s3.credentials.source / .provider.class and the keys."""
    from lakesink.credentials import CredentialSettings

    def plain(attr: str) -> str | None:
        v = vals.get(attr)
        return v.reveal() if isinstance(v, Secret) else v

    try:
        return CredentialSettings.from_keys(
            vals.get("s3_credentials_source"), vals.get("s3_credentials_provider_class"),
            plain("aws_access_key_id"), plain("aws_secret_access_key"), plain("aws_session_token"),
            vals.get("s3_credentials_uc_name")).source
    except ConfigError as e:
        for p in e.problems:
            problem(p.key, p.value, p.message)
        return "default"


def check_transforms(vals: dict[str, Any], problem: Problems) -> None:
    """``transforms.sql`` is planned by DuckDB on an empty batch (a syntax error or unknown column is a config
    problem, not a failed batch); ``transforms.python`` must import."""
    from lakesink.transforms import check_python, check_sql

    if vals.get("transforms_sql"):
        import importlib.util

        if importlib.util.find_spec("duckdb") is None:
            problem.warn("transforms.sql is not checked here: the duckdb package is not installed (the driver and "
                         "the executors need it: pip install 'lakesink[transforms]')")
        msg = check_sql(vals["transforms_sql"])
        if msg:
            problem("transforms.sql", vals["transforms_sql"], msg)
    if vals.get("transforms_python"):
        msg = check_python(vals["transforms_python"])
        if msg:
            problem("transforms.python", vals["transforms_python"], msg)


def check_dead_letters(vals: dict[str, Any], topics: tuple[str, ...], regex: str | None, problem: Problems) -> None:
    """``errors.tolerance=all`` needs a dead-letter topic (Connect would log and drop the record: lakesink never
    loses one silently), which must be a legal topic name the job does not archive itself (a loop)."""
    tolerance = str(vals.get("errors_tolerance") or "none").lower()
    topic = vals.get("dlq_topic") or None
    if tolerance == "all" and not topic:
        problem("errors.tolerance", "all", "requires errors.deadletterqueue.topic.name: a record that cannot be "
                                           "decoded goes to that topic (lakesink never drops one silently)")
    if not topic:
        return
    if not re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", topic) or topic in (".", ".."):
        problem("errors.deadletterqueue.topic.name", topic,
                "is not a legal Kafka topic name ([a-zA-Z0-9._-], 1..249 chars)")
    elif topic in topics or (regex and _fullmatch(regex, topic)):
        problem("errors.deadletterqueue.topic.name", topic, "is a topic this job archives: dead letters would be "
                                                            "archived and fail again; use another topic")
    if tolerance != "all":
        problem.warn("errors.deadletterqueue.topic.name is unused: errors.tolerance is none (a record that cannot be "
                     "decoded fails the batch)")


def check_consumer_groups(vals: dict[str, Any], problem: Problems) -> None:
    """``consumer.groups``: group ids (any characters Kafka allows but ``,``, at most 255); ``consumer.groups.regex``:
    a regular expression matched against the whole group id. Both may be set: the groups recorded are the union.
    lakesink's own groups (``lakesink-*``: the sink's clients, restore progress) are never recorded."""
    for g in vals.get("consumer_groups") or ():
        if not g or len(g) > 255 or any(c.isspace() for c in g):
            problem("consumer.groups", g, "is not a consumer group id (1..255 characters, no whitespace)")
    regex = vals.get("consumer_groups_regex") or None
    if regex:
        try:
            re.compile(regex)
        except re.error as e:
            problem("consumer.groups.regex", regex, f"invalid regular expression: {e}")


def _fullmatch(regex: str, topic: str) -> bool:
    try:
        return re.fullmatch(regex, topic) is not None
    except re.error:
        return False


# ----------------------------------------------------------------------------- build / load

def build_values(flat: dict[str, Any], source: str | None, job_name: str | None) -> dict[str, Any]:
    """Validate a flat mapping: the :class:`~lakesink.config.model.SinkConfig` fields (the model builds the
    value, so this module does not import it back); raises one ConfigError listing every problem."""
    problem = Problems()
    keys = read_keys(lift_converter_keys(flat, problem), problem)  # Connect converter forms of registry keys
    vals = keys.vals

    name = check_name(vals, job_name, problem)
    overrides = apply_overrides(keys.overrides or {}, keys.kafka)  # Connect client overrides: kafka.* or ignored
    for key, value, msg in overrides.problems:
        problem(key, value, msg)
    for warning in overrides.warnings():
        problem.warn(warning)
    keys.ignored.extend(overrides.ignored)
    kafka = {**keys.kafka, **overrides.kafka}
    bootstrap = check_kafka(kafka, problem, {k: src for k, src in overrides.sources.items() if k not in keys.kafka})
    topics, regex = check_topics(vals, problem)
    ddelim, fdelim, tdir = check_naming(vals, problem)
    fmt, kfmt, hfmt, separator, bext = check_formats(vals, problem)
    value_decoder, key_decoder = check_decoders(vals, fmt, problem)
    bonv = check_null_values(vals, problem)
    affix = check_affix(vals, problem)
    tz, tz_ok = check_timezone(vals, problem)
    partitioning = check_partitioner(vals, ddelim, tz, tz_ok, bonv, problem)
    bucket = check_store(vals, problem)
    registry_cfg = check_registry(vals["schema_registry_url"], keys.registry, vals, value_decoder, key_decoder,
                                  fmt, kfmt, problem)

    check_transforms(vals, problem)
    check_dead_letters(vals, topics, regex, problem)
    check_consumer_groups(vals, problem)
    manifest, metrics = check_locations(vals, problem)  # one path-or-catalog rule; relative paths resolved here
    engine = manifest_engine(vals["manifest_engine"], manifest, problem)
    check_layout(vals, topics, regex, ddelim, manifest, metrics, problem)
    if problem.problems:
        raise ConfigError(problem.problems, source)

    return dict(
        name=name, topics=topics, topics_regex=regex, topics_dir=tdir,
        flush_size=vals["flush_size"], rotate_interval_ms=vals["rotate_interval_ms"],
        rotate_schedule_interval_ms=vals["rotate_schedule_interval_ms"],
        rotate_file_on_partition_change=vals["rotate_file_on_partition_change"],
        format_name=fmt, locale=vals["locale"], timezone=tz, timestamp_field=vals["timestamp_field"],
        directory_delim=ddelim, file_delim=fdelim, zero_pad_width=vals["zero_pad_width"],
        s3_bucket_name=bucket, s3_region=vals["s3_region"], store_url=vals["store_url"] or None,
        s3_path_style_access=vals["s3_path_style_access"], s3_compression_type=vals["s3_compression_type"],
        s3_compression_level=vals["s3_compression_level"], avro_codec=vals["avro_codec"],
        parquet_codec=vals["parquet_codec"], bytearray_separator=separator, bytearray_extension=bext,
        store_kafka_keys=vals["store_kafka_keys"], store_kafka_headers=vals["store_kafka_headers"],
        store_kafka_metadata=vals["store_kafka_metadata"],
        keys_format_name=kfmt, headers_format_name=hfmt, behavior_on_null_values=bonv,
        schema_compatibility=vals["schema_compatibility"],
        s3_part_size=vals["s3_part_size"], s3_part_retries=vals["s3_part_retries"],
        s3_retry_backoff_ms=vals["s3_retry_backoff_ms"], s3_retry_deadline_ms=vals["s3_retry_deadline_ms"],
        s3_ssea_name=vals["s3_ssea_name"],
        s3_sse_kms_key_id=vals["s3_sse_kms_key_id"], s3_acl_canned=vals["s3_acl_canned"],
        aws_access_key_id=vals["aws_access_key_id"], aws_secret_access_key=vals["aws_secret_access_key"],
        s3_credentials_source=vals["s3_credentials_source"], s3_credentials_uc_name=vals["s3_credentials_uc_name"],
        aws_session_token=vals["aws_session_token"],
        s3_schema_partition_affix_type=affix, manifest_location=vals["manifest_location"],
        manifest_engine=engine, kafka_bootstrap_servers=bootstrap, kafka_options=kafka,
        kafka_starting_offsets=vals["kafka_starting_offsets"].lower(),
        kafka_reader=vals["kafka_reader"].lower(), kafka_retry_deadline_ms=vals["kafka_retry_deadline_ms"],
        value_decoder=value_decoder, key_decoder=key_decoder,
        schema_registry_url=vals["schema_registry_url"], schema_registry_options=keys.registry,
        registry=registry_cfg,
        value_schema=vals["value_schema"], blockgzip_block_size=vals["blockgzip_block_size"],
        blockgzip_compression=vals["blockgzip_compression"], batch_max_records=vals["batch_max_records"],
        offsets_on_data_loss=vals["offsets_on_data_loss"].lower(),
        transforms_sql=vals["transforms_sql"] or None, transforms_python=vals["transforms_python"] or None,
        metrics_location=vals["metrics_location"] or None,
        consumer_groups=tuple(vals["consumer_groups"]), consumer_groups_regex=vals["consumer_groups_regex"] or None,
        archive_retention_ms=vals["archive_retention_ms"],
        errors_tolerance=vals["errors_tolerance"].lower(), dlq_topic=vals["dlq_topic"] or None,
        dlq_context_headers=vals["dlq_context_headers"],
        ignored_keys=tuple(keys.ignored), warnings=tuple(problem.warnings), source=source,
        raw={k: shown(k, v) for k, v in flat.items()},
        **partitioning,
    )
