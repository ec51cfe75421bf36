"""Error types. Every error names the key, file or record at fault."""
from __future__ import annotations

from dataclasses import dataclass


class LakesinkError(Exception):
    """Base class of every error lakesink raises on purpose."""


@dataclass
class ConfigProblem:
    key: str
    value: object
    message: str

    def __str__(self) -> str:
        shown = "<unset>" if self.value is None else repr(self.value)
        return f"{self.key}={shown}: {self.message}"


class ConfigError(LakesinkError):
    """Bad configuration; carries every problem found, not just the first."""

    def __init__(self, problems: list[ConfigProblem], source: str | None = None):
        self.problems = list(problems)
        self.source = source
        where = f" in {source}" if source else ""
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} config problem(s){where}:\n{lines}")


class RecordError(LakesinkError):
    """A Kafka record that cannot be partitioned, decoded or encoded."""

    def __init__(self, topic: str, partition: int, offset: int, reason: str):
        self.topic, self.partition, self.offset, self.reason = topic, partition, offset, reason
        super().__init__(f"record {topic}-{partition}@{offset}: {reason}")


class PartitionError(RecordError):
    """The partitioner cannot place the record (missing field, bad timestamp, ...)."""


class DecodeError(RecordError):
    """The record's key or value bytes cannot be decoded (bad wire format, unknown schema id, ...)."""


class EncodeError(RecordError):
    """The format cannot encode the record's value (bytes for JSON, non-bytes for ByteArray, ...)."""


class KeyNameError(LakesinkError):
    """An object key that lakesink did not build, or a name that would escape topics.dir."""


class KeyConflictError(LakesinkError):
    """A key this job writes already holds an object that belongs to another job (or was not written
    by lakesink): it is never replaced or deleted; the batch commits nothing."""
