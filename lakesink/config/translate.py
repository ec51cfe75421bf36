"""Configs of other S3 archivers, recognised and translated to lakesink's (Confluent's) keys.

Users of Aiven's S3 sink, the DeviantArt/Spredfast block-gzip sink and the Zooz connector (configured by
environment variables) paste their config: :func:`recognise` names the connector, :func:`explain` says for each
of its keys what lakesink's equivalent is (or that there is none, and what differs), and :func:`translate`
builds a lakesink config from it. Known foreign keys are answered here, never by fuzzy matching (which pointed
``file.max.records`` at ``batch.max.records``). Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

__all__ = ["ForeignKey", "Connector", "CONNECTORS", "recognise", "foreign_key", "explain", "translate",
           "to_properties", "Translation", "connect_group", "UNLIMITED_FLUSH_SIZE"]

Convert = Callable[[str], dict[str, str]]


def _to(key: str) -> Convert:
    return lambda v: {key: v}


@dataclass(frozen=True)
class ForeignKey:
    """One key of another connector: ``target`` is lakesink's key (None: no equivalent), ``convert`` turns the
    value into lakesink keys (default: the value under ``target``), ``note`` says what differs."""

    key: str
    target: str | None
    note: str = ""
    convert: Convert | None = None

    def lakesink_keys(self, value: str) -> dict[str, str]:
        if self.convert is not None:
            return self.convert(value)
        return {self.target: value} if self.target else {}


@dataclass(frozen=True)
class Connector:
    name: str
    classes: tuple[str, ...]
    keys: dict[str, ForeignKey]
    differences: tuple[str, ...]
    defaults: dict[str, str] = field(default_factory=dict)  # lakesink keys its behaviour implies
    #: carries the connector's cut policy (when it closes a file) into lakesink keys of the config being built;
    #: returns the line that says what was carried over or chosen (printed with the translation)
    cut_policy: Callable[[Mapping[str, object], dict[str, str]], str] | None = None
    #: the Kafka Connect consumer group its sink tasks commit to (Connect names it ``connect-<connector name>``)
    connect_group: bool = True


def _aiven_format(v: str) -> dict[str, str]:
    v = v.strip().lower()
    return {"jsonl": {"format.class": "json"}, "json": {"format.class": "json"},
            "parquet": {"format.class": "parquet"}, "avro": {"format.class": "avro"}}.get(v, {})


def _aiven_compression(v: str) -> dict[str, str]:
    v = v.strip().lower()
    return {"gzip": {"s3.compression.type": "gzip"}, "none": {"s3.compression.type": "none"},
            "snappy": {"parquet.codec": "snappy"}, "zstd": {"parquet.codec": "zstd"}}.get(v, {})


def _aiven_fields(v: str) -> dict[str, str]:
    fields = {f.strip().lower() for f in v.split(",")}
    out = {}
    if "key" in fields:
        out["store.kafka.keys"] = "true"
    if "headers" in fields:
        out["store.kafka.headers"] = "true"
    return out


def _prefix(v: str) -> dict[str, str]:
    """A name prefix as topics.dir: slashes trimmed; a templated prefix ({{utc_date}}) has no equivalent."""
    v = v.strip().strip("/")
    return {"topics.dir": v} if v and "{{" not in v else {}


def _flush(v: str) -> dict[str, str]:
    return {"flush.size": v} if v.strip() not in ("", "0") else {}


def _bool(key: str) -> Convert:
    return lambda v: {key: "true" if v.strip().lower() in ("true", "1", "yes") else "false"}


_AIVEN_KEYS = [
    ForeignKey("aws.s3.bucket.name", "s3.bucket.name"),
    ForeignKey("aws.s3.endpoint", "store.url"),
    ForeignKey("aws.s3.region", "s3.region"),
    ForeignKey("aws.s3.prefix", "topics.dir", "Aiven prepends the prefix to the file name (templates like "
               "{{utc_date}} allowed; a templated prefix is dropped); lakesink writes "
               "<topics.dir>/<topic>/partition=N/<topic>+N+<offset>", _prefix),
    ForeignKey("file.max.records", "flush.size", "0 (Aiven: unlimited, one file per flush interval) has no "
               "equivalent: set flush.size (and rotate.interval.ms for time-based cuts)", _flush),
    ForeignKey("file.compression.type", "s3.compression.type", "gzip for JSON; snappy/zstd become parquet.codec; "
               "lakesink's JSON takes gzip only", _aiven_compression),
    ForeignKey("format.output.type", "format.class", "jsonl → json (JSON lines, like Aiven's jsonl); Aiven's json is "
               "one JSON array per file, lakesink writes JSON lines; csv has no equivalent", _aiven_format),
    ForeignKey("format.output.fields", "store.kafka.keys", "lakesink stores the value in the object and keys, "
               "headers and record metadata (offset, timestamp) in side files next to it, not as fields of one "
               "line", _aiven_fields),
    ForeignKey("format.output.fields.value.encoding", None, "values are written as the format encodes them "
               "(base64 is not applied)"),
    ForeignKey("file.name.template", None, "object names are Confluent's: <topic>+<partition>+<offset padded to "
               "10 digits>.<ext>; use partitioner.class/path.format for directories"),
    ForeignKey("file.name.prefix", "topics.dir", "see aws.s3.prefix", _prefix),
    ForeignKey("file.name.timestamp.timezone", "timezone", "used by TimeBasedPartitioner's path.format"),
    ForeignKey("file.name.timestamp.source", "timestamp.extractor", "wallclock → Wallclock, record → Record",
               lambda v: {"timestamp.extractor": "Record" if v.strip().lower() == "record" else "Wallclock"}),
    ForeignKey("aws.sts.role.arn", None, "use the cluster's instance profile or the default credential chain"),
    ForeignKey("aws.sts.role.session.name", None, "see aws.sts.role.arn"),
    ForeignKey("aws.sts.role.external.id", None, "see aws.sts.role.arn"),
    ForeignKey("aws.sts.role.session.duration", None, "see aws.sts.role.arn"),
    ForeignKey("aws.sts.config.endpoint", None, "see aws.sts.role.arn"),
    ForeignKey("aws.s3.part.size.bytes", "s3.part.size"),
    ForeignKey("format.output.envelope", None, "lakesink writes the value alone (no envelope); keys, headers and "
               "record metadata go to side files"),
    ForeignKey("timestamp.timezone", "timezone", "see file.name.timestamp.timezone"),
    ForeignKey("timestamp.source", "timestamp.extractor", "see file.name.timestamp.source",
               lambda v: {"timestamp.extractor": "Record" if v.strip().lower() == "record" else "Wallclock"}),
    # the old (0.x) underscore names
    ForeignKey("aws_s3_bucket", "s3.bucket.name"),
    ForeignKey("aws_s3_endpoint", "store.url"),
    ForeignKey("aws_s3_region", "s3.region"),
    ForeignKey("aws_s3_prefix", "topics.dir", "see aws.s3.prefix", _prefix),
    ForeignKey("aws_access_key_id", "aws.access.key.id"),
    ForeignKey("aws_secret_access_key", "aws.secret.access.key"),
    ForeignKey("output_compression", "s3.compression.type", "gzip or none", _aiven_compression),
    ForeignKey("output_fields", "store.kafka.keys", "see format.output.fields", _aiven_fields),
]

_DEVIANTART_KEYS = [
    ForeignKey("s3.bucket", "s3.bucket.name"),
    ForeignKey("s3.prefix", "topics.dir", "DeviantArt writes <prefix>/<topic>-<partition>-<offset>; lakesink "
               "writes <topics.dir>/<topic>/partition=N/<topic>+N+<offset>", _prefix),
    ForeignKey("s3.endpoint", "store.url"),
    ForeignKey("s3.path_style", "s3.path.style.access.enabled", "", _bool("s3.path.style.access.enabled")),
    ForeignKey("compressed_block_size", "blockgzip.block.size", "uncompressed bytes per gzip member, as DeviantArt's"),
    ForeignKey("format", "format.class", "text → blockgzip (newline-delimited values in concatenated gzip members "
               "with a .index.json); binary has no equivalent",
               lambda v: {"format.class": "blockgzip"} if v.strip().lower() == "text" else {}),
    ForeignKey("local.buffer.dir", None, "lakesink streams objects to S3 with multipart uploads: no local buffer"),
    ForeignKey("s3.region", "s3.region"),
]

_ZOOZ_KEYS = [
    ForeignKey("KAFKA_HOST", "kafka.bootstrap.servers"),
    ForeignKey("SOURCE_KAFKA_TOPIC", "topics"),
    ForeignKey("S3_BUCKET_NAME", "s3.bucket.name"),
    ForeignKey("S3_ACCESS_KEY", "aws.access.key.id"),
    ForeignKey("S3_SECRET_KEY", "aws.secret.access.key"),
    ForeignKey("S3_ENDPOINT", "store.url"),
    ForeignKey("S3_REGION", "s3.region"),
    ForeignKey("LOADING_MODULE", None, "a Scala Loader/Mapper transforms records; lakesink archives records as "
               "they are (see issue #12's transforms)"),
    ForeignKey("APP_IMAGE", None, "lakesink runs as a Spark job, not a container image"),
]

#: flush.size lakesink chooses when the old connector had no record limit per file (it cut by time only)
UNLIMITED_FLUSH_SIZE = 100000


def _interval(raw: Mapping[str, object]) -> str:
    v = str(raw.get("offset.flush.interval.ms") or "").strip()
    return f"offset.flush.interval.ms={v}" if v else "offset.flush.interval.ms (60000 ms unless the worker sets it)"


def _time_cut_note(raw: Mapping[str, object]) -> str:
    return (f"its files were also closed at every Connect offset commit ({_interval(raw)}); lakesink does not cut "
            f"by wall clock unless told to (rotate.schedule.interval.ms with timezone: non-deterministic keys on "
            f"replay); files still open at the end of a batch are closed by --flush-tail")


def _aiven_cut(raw: Mapping[str, object], cfg: dict[str, str]) -> str:
    limit = next((str(raw[k]).strip() for k in ("file.max.records",) if k in raw), "")
    if limit not in ("", "0"):
        cfg["flush.size"] = limit
        return f"cut policy: flush.size={limit} carried over from file.max.records; {_time_cut_note(raw)}"
    cfg["flush.size"] = str(UNLIMITED_FLUSH_SIZE)
    return (f"cut policy: flush.size={UNLIMITED_FLUSH_SIZE} chosen by lakesink: Aiven had no record limit per file "
            f"(file.max.records {'0' if limit == '0' else 'not set'}); {_time_cut_note(raw)}")


def _deviantart_cut(raw: Mapping[str, object], cfg: dict[str, str]) -> str:
    cfg["flush.size"] = str(UNLIMITED_FLUSH_SIZE)
    return (f"cut policy: flush.size={UNLIMITED_FLUSH_SIZE} chosen by lakesink: the DeviantArt/Spredfast sink has no "
            f"record limit per file (compressed_block_size sizes the gzip members inside a file, not the file); "
            f"{_time_cut_note(raw)}")


def _zooz_cut(raw: Mapping[str, object], cfg: dict[str, str]) -> str:
    hourly = {"partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
              "path.format": "'date'=YYYY-MM-dd/'hour'=HH", "partition.duration.ms": "3600000",
              "timestamp.extractor": "Record", "timezone": "UTC", "locale": "en"}
    for k, v in hourly.items():
        cfg.setdefault(k, v)
    cfg["flush.size"] = str(UNLIMITED_FLUSH_SIZE)
    return (f"cut policy: Zooz's hourly files (date=YYYY-mm-dd/hour=HH by the record's creation time) carried over as "
            f"TimeBasedPartitioner with path.format='date'=YYYY-MM-dd/'hour'=HH, partition.duration.ms=3600000, "
            f"timestamp.extractor=Record, timezone=UTC; flush.size={UNLIMITED_FLUSH_SIZE} chosen by lakesink (Zooz "
            f"also flushed when its in-memory buffer filled: a size lakesink cannot read from these variables)")


CONNECTORS: dict[str, Connector] = {
    "aiven": Connector(
        "Aiven's S3 sink", ("io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector",
                            "io.aiven.kafka.connect.s3.S3SinkConnector"),
        {k.key: k for k in _AIVEN_KEYS},
        ("object names: Confluent's <topic>+<partition>+<offset>.<ext> under topics.dir/<topic>/partition=N/, "
         "not Aiven's <prefix><topic>-<partition>-<offset>",
         "offsets zero-padded to 10 digits (Aiven: unpadded)",
         "file cuts: every flush.size records per partition (plus rotate.interval.ms), not once per "
         "offset.flush.interval.ms",
         "JSON is JSON lines with only the value; keys, headers and offsets/timestamps go to side files"),
        {"format.class": "json"}, _aiven_cut),
    "deviantart": Connector(
        "the DeviantArt/Spredfast block-gzip sink", ("com.deviantart.kafka_connect_s3.S3SinkConnector",
                                                     "com.spredfast.kafka.connect.s3.sink.S3SinkConnector"),
        {k.key: k for k in _DEVIANTART_KEYS},
        ("object names: <topic>+<partition>+<offset>.gz (plus .index.json) under topics.dir/<topic>/partition=N/, "
         "not <prefix>/<topic>-<partition>-<offset>",
         "offsets zero-padded to 10 digits",
         "file cuts: every flush.size records, not when Connect commits offsets",
         "the .index.json layout is DeviantArt's (chunks with byte_offset, byte_length, first_record_offset, "
         "num_records)"),
        {"format.class": "blockgzip"}, _deviantart_cut),
    "zooz": Connector(
        "the Zooz kafka-s3-connector (environment variables)", (),
        {k.key: k for k in _ZOOZ_KEYS},
        ("object names: Confluent's <topic>/date=YYYY-MM-dd/hour=HH/<topic>+<partition>+<offset>.bin, not Zooz's "
         "<root>/date=YYYY-mm-dd/hour=HH/<partition>_<offset>.<ext>",
         "files are cut every hour of record time (as Zooz's) and every flush.size records, not when Zooz's "
         "buffer fills"),
        {"format.class": "bytearray"}, _zooz_cut, connect_group=False),
}


def foreign_key(key: str) -> tuple[Connector, ForeignKey] | None:
    """The connector and entry of a key that belongs to another connector (None: not a foreign key)."""
    for c in CONNECTORS.values():
        if key in c.keys:
            return c, c.keys[key]
    return None


def recognise(raw: Mapping[str, object]) -> Connector | None:
    """Which other connector wrote this config: by ``connector.class``, else by its own keys (two or more, or a
    key only it has)."""
    cls = str(raw.get("connector.class") or "")
    for c in CONNECTORS.values():
        if cls and cls in c.classes:
            return c
    best, hits = None, 0
    for c in CONNECTORS.values():
        n = sum(1 for k in raw if k in c.keys)
        if n > hits:
            best, hits = c, n
    return best if hits >= 2 else None


@dataclass
class Translation:
    connector: Connector
    config: dict[str, str]                      # the lakesink config
    mapping: list[tuple[str, str, str]]         # (their key, lakesink key or "-", note)
    kept: list[str] = field(default_factory=list)  # keys lakesink takes as they are
    notes: list[str] = field(default_factory=list)  # choices made for the user (cut policy, hand-over)


def explain(connector: Connector, raw: Mapping[str, object]) -> list[tuple[str, str, str]]:
    """Per foreign key present: (key, lakesink key or '-', what differs)."""
    out = []
    for k in raw:
        fk = connector.keys.get(k)
        if fk is not None:
            out.append((k, fk.target or "-", fk.note))
    return out


def translate(connector: Connector, raw: Mapping[str, object], known_keys: frozenset[str] | set[str] = frozenset()
              ) -> Translation:
    """A lakesink config from ``raw``: foreign keys converted, keys lakesink knows kept, the connector's implied
    defaults and lakesink's own required keys (``name``, ``manifest.location``, ``flush.size``) filled in."""
    from lakesink.config.keys import ignored_reason
    from lakesink.config.overrides import is_override

    cfg: dict[str, str] = dict(connector.defaults)
    kept, dropped = [], []
    for k, v in raw.items():
        fk = connector.keys.get(k)
        if fk is not None:
            cfg.update(fk.lakesink_keys(str(v)))
        elif k in known_keys or k.startswith("kafka."):
            cfg[k] = str(v)
            kept.append(k)
        elif not is_override(k) and k not in _WORKER_KEYS and k != "connector.class":
            why = ignored_reason(k)
            dropped.append((k, "-", f"not translated: {why}" if why else
                            f"not translated: neither a key of {connector.name} that lakesink knows nor a lakesink "
                            f"key (dropped)"))
    for side in ("keys", "headers"):  # side files in the value's text format (Confluent's default is Avro)
        if cfg.get(f"store.kafka.{side}") == "true" and cfg.get("format.class") in ("json", "bytearray"):
            cfg.setdefault(f"{side}.format.class", "json")
    mapping = explain(connector, raw) + _overrides(raw, cfg)
    notes = []
    if connector.cut_policy is not None:
        notes.append(connector.cut_policy(raw, cfg))
    mapping += [(k, "-", _WORKER_KEYS[k]) for k in raw if k in _WORKER_KEYS] + dropped
    cfg.setdefault("name", str(raw.get("name") or "lakesink-archive"))
    if "flush.size" not in cfg:
        cfg["flush.size"] = str(UNLIMITED_FLUSH_SIZE)
        notes.append(f"cut policy: flush.size={UNLIMITED_FLUSH_SIZE} chosen by lakesink (the config sets no cut)")
    if "s3.bucket.name" in cfg:
        cfg.setdefault("manifest.location", f"s3a://{cfg['s3.bucket.name']}/_lakesink/manifest")
    cfg.pop("connector.class", None)
    if connector.connect_group and raw.get("name"):
        notes.append(f"hand-over: to start where {raw['name']!r} stopped, run `lakesink manifest handover --config "
                     f"FILE --from-group {connect_group(str(raw['name']))}` once before the first sink (after "
                     f"`lakesink manifest import` of its objects)")
    elif not connector.connect_group:
        notes.append("hand-over: the old connector commits to its own consumer group: run `lakesink manifest handover "
                     "--config FILE --from-group GROUP` (or --start-offsets topic:partition=offset,...) once before "
                     "the first sink")
    return Translation(connector, cfg, mapping, kept, notes)


def connect_group(connector_name: str) -> str:
    """The consumer group Kafka Connect's sink tasks of connector ``connector_name`` commit to."""
    return f"connect-{connector_name}"


#: Connect worker settings a pasted config may carry: read for the cut policy, not lakesink keys
_WORKER_KEYS = {
    "offset.flush.interval.ms": "a Connect worker setting: read for the cut policy (see the cut policy line)",
}


def _overrides(raw: Mapping[str, object], cfg: dict[str, str]) -> list[tuple[str, str, str]]:
    """Connect client overrides (``consumer.override.*`` …) in ``raw`` by the rule ``lakesink check`` applies
    (:mod:`lakesink.config.overrides`): applied ones become ``kafka.*`` keys of ``cfg``, a conflicting one is
    kept as it is (``lakesink check`` then names the conflict), ignored ones are only explained."""
    from lakesink.config.overrides import apply_overrides, is_override

    given = {k: v for k, v in raw.items() if is_override(k)}
    if not given:
        return []
    kafka = {k[len("kafka."):]: v for k, v in cfg.items() if k.startswith("kafka.")}
    result = apply_overrides(given, kafka)
    out = []
    for name, value in result.kafka.items():
        cfg[f"kafka.{name}"] = value
    for key in result.applied:
        out.append((key, f"kafka.{key.split('.override.', 1)[1]}", "Connect client override: lakesink's Kafka "
                                                                    "clients share the kafka.* settings"))
    for key, _value, msg in result.problems:
        cfg[key] = str(given[key])
        out.append((key, key, f"kept as it is: {msg}"))
    out += [(key, "-", why) for key, why in result.ignored]
    return out


def to_properties(cfg: Mapping[str, str], header: list[str] = ()) -> str:
    """``cfg`` as a .properties text (keys sorted; ``header`` lines as comments)."""
    lines = [f"# {h}" for h in header]
    for k in sorted(cfg):
        v = str(cfg[k]).replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"{k}={v}")
    return "\n".join(lines) + "\n"
