"""The result rows of a sink task, as they travel from the executor to the driver: one JSON string per row, either
an uploaded object (:class:`~lakesink.executor.archiver.ArchivedRow`: its manifest row and any pending writes) or
one :class:`PartitionStatus` per partition. :mod:`lakesink.executor.task` encodes them, the driver and
:mod:`lakesink.executor.progress` decode them (a module of its own so progress need not import the task)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from lakesink.executor.archiver import ArchivedRow
from lakesink.manifest.rows import ManifestRow
from lakesink.store import PendingWrite

__all__ = ["PartitionStatus", "encode_result", "decode_result"]


@dataclass(frozen=True)
class PartitionStatus:
    """What a task read of its Kafka partition: the driver proves from it that the ranges chain."""

    topic: str
    partition: int
    read: int
    first_offset: int | None
    last_offset: int | None
    s3_retries: int = 0  # retried S3 requests of this task (throttling, dropped connections)
    dead_lettered: int = 0  # records this task sent to the dead-letter topic (errors.tolerance=all)
    #: when this partition's files left open become closable by rotate.interval.ms (record time, epoch ms;
    #: :attr:`lakesink.objects.rotation.Rotator.due_ms`), None if none is: a hint for the next poll's time
    due_ms: int | None = None
    #: records of this task that took the columnar path (:mod:`lakesink.executor.columnar`); the others went
    #: record by record
    columnar: int = 0


def encode_result(result: ArchivedRow | PartitionStatus) -> str:
    """One result row of the task (a JSON string), as :func:`decode_result` reads it on the driver."""
    if isinstance(result, PartitionStatus):
        return json.dumps({"status": dataclasses.asdict(result)})
    return json.dumps({"row": result.row.to_json(), "pending": [dataclasses.asdict(p) for p in result.pending]})


def decode_result(text: str) -> ArchivedRow | PartitionStatus:
    data = json.loads(text)
    if "status" in data:
        return PartitionStatus(**data["status"])
    pending = tuple(PendingWrite(**{**p, "parts": tuple(tuple(x) for x in p["parts"]),
                                    "content_etags": tuple(p["content_etags"])}) for p in data["pending"])
    return ArchivedRow(ManifestRow.from_json(data["row"]), pending)
