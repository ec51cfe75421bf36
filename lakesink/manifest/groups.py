"""The consumer-groups table: the committed offsets of chosen consumer groups, as the sink observed them.

With ``consumer.groups`` / ``consumer.groups.regex`` set, each sink batch reads those groups' committed offsets
for the job's topics (:mod:`lakesink.driver.group_offsets`) and appends one row per group and partition here:
``<manifest>_groups`` next to the manifest (a path manifest's is a path table written with delta-rs, a catalog
manifest's a catalog table written with Spark: :mod:`lakesink.manifest.location`'s one rule, as the metrics
table). ``lakesink restore --groups`` reads it to place the groups on the restored topic
(:mod:`lakesink.executor.groups`); ``lakesink sql`` shows it as the view ``consumer_groups``.

Why a table of its own and not rows of the manifest's batch commit: the manifest's rows are the offset proof of
the archive (one schema both manifest engines commit, chained per partition and checked on every batch); a
group's position is an observation of another client's state, read after the records were archived, which may
be ahead of the archive, and is written best effort: a failed read or write is a warning and never fails a
batch whose records are committed. A lost observation leaves an older one as the newest, i.e. a restored group
that re-reads some records it had read: never one that skips a record.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["GroupOffsetRow", "groups_location", "arrow_schema", "groups_ddl", "GroupsTable", "latest_offsets"]


@dataclass(frozen=True)
class GroupOffsetRow:
    """One group's committed offset on one source partition, observed after a batch of the job."""

    job: str
    run_id: str
    batch_id: int
    consumer_group: str
    topic: str
    partition: int
    committed_offset: int
    metadata: str | None
    observed_at: dt.datetime


_ARROW = {"str": "string", "int": "int64", "str | None": "string", "dt.datetime": "timestamp"}


def arrow_schema() -> "pa.Schema":
    import pyarrow as pa

    types = {"string": pa.string(), "int64": pa.int64(), "timestamp": pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(f.name, types[_ARROW[f.type]], nullable=f.type.endswith("None"))
                      for f in fields(GroupOffsetRow)])


def groups_ddl() -> str:
    """The table's columns as Spark DDL (an empty ``consumer_groups`` view before the first observation)."""
    sql = {"string": "STRING", "int64": "BIGINT", "timestamp": "TIMESTAMP"}
    return ", ".join(f"`{f.name}` {sql[_ARROW[f.type]]}" for f in fields(GroupOffsetRow))


def groups_location(manifest_location: str) -> str:
    """``<manifest>_groups``: a path table next to a path manifest, a catalog table next to a catalog one."""
    from lakesink.manifest.location import parse_location

    return parse_location(manifest_location).with_suffix("_groups").text


class GroupsTable:
    """The consumer-groups table at ``location``."""

    def __init__(self, location: str, s3: Any = None, spark: Any = None):
        from lakesink.manifest.deltars import RETRY_OPTIONS
        from lakesink.manifest.location import parse_location

        table = parse_location(location)
        self.location, self.is_path, self.uri = table.text, table.is_path, table.uri
        self.storage_options = {**RETRY_OPTIONS, **s3.object_store_options()} if s3 is not None else {}
        self._spark = spark

    def __repr__(self) -> str:  # storage options hold credentials: never shown
        return f"GroupsTable({self.location!r})"

    def _session(self):
        return self._spark() if callable(self._spark) else self._spark

    def append(self, rows: list[GroupOffsetRow]) -> None:
        import pyarrow as pa

        data = pa.Table.from_pylist([asdict(r) for r in rows], schema=arrow_schema())
        if self.is_path:
            from deltalake import write_deltalake

            write_deltalake(self.uri, data, mode="append", storage_options=self.storage_options or None)
            return
        spark = self._session()
        spark.createDataFrame(data.to_pandas(), groups_ddl()).write.format("delta").mode("append") \
            .saveAsTable(self.location)

    def arrow(self) -> "pa.Table":
        """Every row (an empty table of the schema when nothing was written yet)."""
        import pyarrow as pa

        if self.is_path:
            from deltalake import DeltaTable

            if not DeltaTable.is_deltatable(self.uri, storage_options=self.storage_options or None):
                return pa.Table.from_batches([], schema=arrow_schema())
            return DeltaTable(self.uri, storage_options=self.storage_options or None).to_pyarrow_table() \
                .select(arrow_schema().names).cast(arrow_schema())
        spark = self._session()
        if not spark.catalog.tableExists(self.location):
            return pa.Table.from_batches([], schema=arrow_schema())
        return spark.table(self.location).toArrow().select(arrow_schema().names).cast(arrow_schema())

    def frame(self, spark: Any) -> Any:
        """The table as a Spark DataFrame (for the ``consumer_groups`` view)."""
        if not self.is_path and spark.catalog.tableExists(self.location):
            return spark.table(self.location)
        table = self.arrow()
        if table.num_rows == 0:
            return spark.createDataFrame([], groups_ddl())
        return spark.createDataFrame(table.to_pandas(), groups_ddl())


def latest_offsets(table: "pa.Table", job: str, groups: set[str] | None = None, regex: str | None = None,
                   as_of: dt.datetime | None = None) -> dict[tuple[str, str, int], dict]:
    """Per (group, topic, partition) of ``job``, the newest observed row (at or before ``as_of``, when given):
    of the groups named in ``groups`` and those ``regex`` matches (the union; both None: every group)."""
    import re

    pattern = re.compile(regex) if regex else None
    out: dict[tuple[str, str, int], dict] = {}
    for r in table.to_pylist():
        if r["job"] != job:
            continue
        g = r["consumer_group"]
        if (groups is not None or pattern is not None) and not (
                (groups is not None and g in groups) or (pattern is not None and pattern.fullmatch(g))):
            continue
        seen = r["observed_at"]
        if seen is not None and seen.tzinfo is None:
            seen = seen.replace(tzinfo=dt.timezone.utc)
        if as_of is not None and seen is not None and seen > as_of:
            continue
        key = (g, r["topic"], int(r["partition"]))
        prev = out.get(key)
        if prev is None or (seen, r["batch_id"]) >= (prev["observed_at"], prev["batch_id"]):
            out[key] = {**r, "observed_at": seen}
    return out
