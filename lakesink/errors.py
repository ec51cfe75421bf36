"""Error types. Every error names the key, file or record at fault.

Each class carries the CLI's exit status for it (:data:`EXIT_CODES` documents them), so a scheduler can tell a
broken config from a lost race or an unreachable dependency.
"""
from __future__ import annotations

from dataclasses import dataclass

#: The `lakesink` command's exit statuses (also in ``lakesink --help`` and docs/faults.md).
EXIT_OK = 0
EXIT_FAILED = 1         # any other failure (an internal error, an unhealthy `status`, an incompatible schema)
EXIT_USAGE = 2          # bad arguments or query: argparse, --where/SQL that does not parse, a bad duration
EXIT_CONFIG = 3         # the config file or a file it names is invalid
EXIT_FENCED = 4         # another run of the job committed this batch first (a concurrent run, not a fault)
EXIT_UNREACHABLE = 5    # a dependency failed or is unreachable: Kafka, the S3 store, the manifest, the registry
EXIT_BAD_RECORD = 6     # a record cannot be decoded, partitioned or encoded (topic-partition@offset named)
EXIT_INTERRUPTED = 130  # SIGINT/SIGTERM before the batch committed

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_FAILED: "failed (internal error, unhealthy or never-run status, incompatible schema or nothing to compare, "
                 "a refused restore, other errors)",
    EXIT_USAGE: "bad usage: arguments, a --where or SQL query that does not parse",
    EXIT_CONFIG: "config error: the config file or a file it names, or no S3 credentials found",
    EXIT_FENCED: "fenced: another run of the job committed this batch first, or a newer restore into the same "
                 "partition took over",
    EXIT_UNREACHABLE: "a dependency failed or is unreachable (Kafka, S3, the manifest, Schema Registry)",
    EXIT_BAD_RECORD: "a bad record (named as topic-partition@offset); nothing was committed",
    EXIT_INTERRUPTED: "interrupted before the batch committed",
}


class LakesinkError(Exception):
    """Base class of every error lakesink raises on purpose."""

    exit_code = EXIT_FAILED


@dataclass
class ConfigProblem:
    key: str
    value: object
    message: str

    def __str__(self) -> str:
        if self.key.startswith("<"):  # a problem of the file itself ("<file>"), not of one key
            return self.message
        shown = "<unset>" if self.value is None else repr(self.value)
        return f"{self.key}={shown}: {self.message}"


class ConfigError(LakesinkError):
    """Bad configuration; carries every problem found, not just the first."""

    exit_code = EXIT_CONFIG

    def __init__(self, problems: list[ConfigProblem], source: str | None = None):
        self.problems = list(problems)
        self.source = source
        if len(self.problems) == 1:  # the usual case: one line, naming the file and the key
            super().__init__(f"{source}: {self.problems[0]}" if source else str(self.problems[0]))
            return
        where = f" in {source}" if source else ""
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} config problems{where}:\n{lines}")


class RecordError(LakesinkError):
    """A Kafka record that cannot be partitioned, decoded or encoded."""

    exit_code = EXIT_BAD_RECORD

    def __init__(self, topic: str, partition: int, offset: int, reason: str):
        self.topic, self.partition, self.offset, self.reason = topic, partition, offset, reason
        super().__init__(f"record {topic}-{partition}@{offset}: {reason}")


class PartitionError(RecordError):
    """The partitioner cannot place the record (missing field, bad timestamp, ...)."""


class DecodeError(RecordError):
    """The record's key or value bytes cannot be decoded (bad wire format, unknown schema id, ...)."""


class EncodeError(RecordError):
    """The format cannot encode the record's value (bytes for JSON, non-bytes for ByteArray, ...)."""


class TransformError(RecordError):
    """A transform (``transforms.sql`` / ``transforms.python``) failed on the record, or returned something
    that is not a record of it; the batch commits nothing."""


class KeyNameError(LakesinkError):
    """An object key that lakesink did not build, or a name that would escape topics.dir."""


class KeyConflictError(LakesinkError):
    """A key this job writes already holds an object that belongs to another job (or was not written
    by lakesink): it is never replaced or deleted; the batch commits nothing."""


class SchemaSwitchError(RecordError):
    """A record switches between schema-based and schema-less data within a file."""


class SchemaVersionError(RecordError):
    """BACKWARD/FORWARD/FULL need Schema Registry versions on both schemas."""


class DataLossError(LakesinkError):
    """The manifest's next offset is below the earliest offset Kafka still has."""


class ResumeGuardError(LakesinkError):
    """The manifest was written against another Kafka cluster or another incarnation of a topic."""


class BatchFailedError(LakesinkError):
    """An executor task failed (bad record, store or Kafka error); the batch committed nothing. ``cause``: the
    name of the executor's lakesink error class, when there is one; it picks the exit status."""

    def __init__(self, message: str, cause: str | None = None):
        super().__init__(message)
        self.cause = cause

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        cls = globals().get(self.cause or "")
        if isinstance(cls, type) and issubclass(cls, LakesinkError):
            return cls.exit_code if isinstance(cls.exit_code, int) else EXIT_FAILED
        return EXIT_UNREACHABLE if self.cause in ("KafkaException", "ConnectionError", "TimeoutError") else EXIT_FAILED


class BatchValidationError(LakesinkError):
    """The executors' results do not chain from the start offsets; nothing was committed."""


class SchemaError(LakesinkError):
    """An Avro schema that cannot be parsed or mapped."""


class RegistryError(LakesinkError):
    """The Schema Registry cannot be reached or answered an error (after bounded retries); the message names
    the (credential-free) URL and the schema id. Not a record's fault: the batch fails and commits nothing."""

    exit_code = EXIT_UNREACHABLE


class RegistryAuthError(RegistryError):
    """The Schema Registry refused the configured credentials (HTTP 401/403); the secret is never shown."""


class SchemaNotFoundError(RegistryError):
    """The Schema Registry has no schema with this id (error 40403); decoders turn it into a DecodeError
    naming the record."""

    def __init__(self, schema_id: int, message: str):
        self.schema_id = schema_id
        super().__init__(message)


class EmptyFileError(LakesinkError):
    """close() on a writer that saw no record and cannot build a valid file without one
    (Avro/Parquet take their schema from the first record)."""


class NotInstalledError(LakesinkError):
    """Something a command needs is not installed: the jars (``lakesink setup``), Java, an extra (``moto`` for
    the local stack). The message names the command or extra that brings it."""

    exit_code = EXIT_UNREACHABLE


class SetupError(LakesinkError):
    """``lakesink setup`` could not download or check a pinned artifact (network, a checksum mismatch)."""

    exit_code = EXIT_UNREACHABLE


class DevStackError(LakesinkError):
    """A local service (broker, S3 endpoint, Spark cluster) could not be started or stopped."""


class ArchiveConsistencyError(LakesinkError):
    """A commit group's objects do not account for every record read in its range."""


class PatternError(LakesinkError):
    """A Joda pattern, zone id or locale that lakesink cannot honour exactly."""


class DeadLetterError(LakesinkError):
    """A record for the dead-letter topic (``errors.deadletterqueue.topic.name``) was not delivered within the
    deadline; the batch commits nothing (its dead letters are sent again by the next run)."""

    exit_code = EXIT_UNREACHABLE


class KafkaMetadataError(LakesinkError):
    """The broker is unreachable, or a topic/partition is missing or changed."""

    exit_code = EXIT_UNREACHABLE


class StoreError(LakesinkError):
    """An object-store operation failed; the message names the bucket/key and the cause."""

    exit_code = EXIT_UNREACHABLE


class ObjectChangedError(StoreError):
    """An object no longer has the ETag/version the manifest recorded for it."""


class PreconditionFailed(StoreError):
    """A conditional request (If-None-Match / If-Match) was refused: HTTP 412."""


class ManifestError(LakesinkError):
    """The manifest cannot be read or committed, or disagrees with Kafka."""

    exit_code = EXIT_UNREACHABLE


class FencedError(ManifestError):
    """Another run committed this batch (or an overlapping range) first."""

    exit_code = EXIT_FENCED


class ArchiveReadError(LakesinkError):
    """An archived object cannot be read back as its manifest row describes it (lakesink.driver.archive)."""


class ManifestRowError(ArchiveReadError):
    """A manifest row lacks a field a reader needs, or holds a value of the wrong kind."""


class MissingSideFileError(ArchiveReadError):
    """The manifest records no side file (keys/headers) for an object whose side view was asked for."""


class RecordCountMismatchError(ArchiveReadError):
    """An object holds another number of records than its manifest row says."""


class CorruptObjectError(ArchiveReadError):
    """An object's bytes cannot be decoded by the format it was written with."""


class MissingRecordMetadataError(ArchiveReadError):
    """An object has no record-metadata side file and its offsets cannot be derived (its range holds gaps), or a
    time cut falls inside an object whose records' timestamps are unknown."""


class RestoreError(LakesinkError):
    """Archived records cannot be restored to Kafka (lakesink.executor.restore); nothing uncommitted is visible
    to read_committed consumers, and a rerun resumes from the progress committed with the last transaction."""


class RestoreGroupActiveError(RestoreError):
    """The restore's progress consumer group has members: a consumer in it would take the restore's progress
    offsets as its position, so the restore refuses to run."""


class RestoreFencedError(RestoreError):
    """Another producer with the same transactional.id (a newer restore into the same destination partition)
    fenced this one: like the sink's lost race, exit 4; what this run committed stays, the newer run goes on."""

    exit_code = EXIT_FENCED


class RestoreTimestampError(RestoreError):
    """A record's timestamp is further in the future than the broker accepts (log.message.timestamp.after.max.ms)."""


class RestoreProduceError(RestoreError):
    """The broker refused a record or a transaction step; the open transaction was aborted."""


class ArchiveQueryError(LakesinkError):
    """A ``where`` predicate over the manifest that is not valid Spark SQL or names unknown columns; the message
    is Spark's error shortened to its useful line. The CLI exits 2 (bad usage) for it."""

    exit_code = EXIT_USAGE


class RestoreRefusedError(RestoreError):
    """A restore refused before producing anything: the destination topic is missing or has too few partitions,
    two sources map to one destination partition, or the destination is a topic a sink job of the same manifest
    archives (the feedback loop; ``force`` overrides that one)."""


class SchemaCopyError(RestoreRefusedError):
    """A restore into another Schema Registry refused before producing anything: the target registry would not
    take a schema copied from the source (incompatible with the subject's versions, or invalid there)."""


class InvalidArgumentError(LakesinkError, ValueError):
    """A function was called with an argument it cannot take: a setting out of range, an unknown name,
    records out of offset order. (Also a ValueError, for callers that catch one.)"""

    exit_code = EXIT_USAGE


class BadValue(LakesinkError):
    """A config value that does not parse; validation turns it into a ConfigProblem naming the key."""


class KafkaReadError(LakesinkError):
    """An executor could not read its planned Kafka range ``[start, end)`` (broker unreachable, the range's
    start or end no longer on the broker); the message names the topic-partition and the cause, and the
    batch commits nothing."""

    exit_code = EXIT_UNREACHABLE


class LocalTaskError(LakesinkError):
    """A task in a local worker process failed (:mod:`lakesink.runners.local`): the message is its traceback,
    whose last line names the error, as a Spark task failure's does; the batch commits nothing."""


class SchemaCheckInputError(LakesinkError):
    """Bad input to a schema check or history (``lakesink schema``): a missing or unreadable ``.avsc`` file, one
    that is not JSON or not a valid Avro schema, a topic the job does not archive, an unknown mode. The message
    names the file or option; the CLI exits 2 (bad usage)."""

    exit_code = EXIT_USAGE


class S3CredentialsError(StoreError):
    """No S3 credentials were found (or only part of a key pair, or a named profile that does not exist): the
    message says where lakesink looked (the config's keys, the AWS default chain) and shows no secret. A setup
    problem, not an unreachable dependency: the CLI exits 3 (config), the same for every command."""

    exit_code = EXIT_CONFIG


class UploadMissingError(StoreError):
    """An object this batch uploaded is gone before its manifest commit (``lakesink vacuum --execute`` with a
    retention shorter than the batch took it for an orphan, or another deleter): the batch commits nothing and
    the next run archives those records again. Not a lost race (another run's object in its place is
    :class:`FencedError`)."""
