"""Per-batch metrics: one row per committed sink batch in a Delta table next to the manifest.

The table is ``metrics.location``, by default the manifest's location with ``_metrics`` appended
(``s3a://bkt/_lakesink/manifest`` → ``s3a://bkt/_lakesink/manifest_metrics``; a catalog manifest
``db.manifest`` → ``db.manifest_metrics``; a path manifest's is a path table, a catalog manifest's a catalog
table, by :mod:`lakesink.manifest.location`'s one rule); ``metrics.location=none`` turns it off. A path table is
written with delta-rs like the manifest itself (no JVM), a catalog table with Spark. The rows carry the numbers
the batch line prints (records, bytes, objects, partitions, phase seconds); they are observability, not part
of the offset proof: a failed metrics write is a warning and never fails the batch (its manifest commit has
already happened). ``lakesink sql`` registers the table as the view ``metrics``.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from lakesink.config import SinkConfig

log = logging.getLogger("lakesink.manifest.metrics")

__all__ = ["MetricsRow", "metrics_location", "metrics_row", "arrow_schema", "MetricsTable", "DISABLED", "metrics_ddl",
           "write_batch_metrics", "rows_table"]

from lakesink.manifest.location import DISABLED  # noqa: E402 - re-exported: the rule lives with the location parser

#: Phases of :attr:`BatchResult.seconds` that get a column (others only count in ``seconds_total``).
PHASES = ("plan", "session", "archive", "commit")


@dataclass(frozen=True)
class MetricsRow:
    """One committed batch: the column list of the metrics table, in order."""

    job: str
    batch_id: int
    run_id: str
    committed_at: dt.datetime          # when the row was built, right after the batch's manifest commit (UTC)
    partitions: int                    # Kafka partitions the batch planned (ranges read)
    records_read: int                  # Kafka records read (before transforms)
    records: int                       # records archived (in committed objects)
    objects: int
    bytes: int                         # bytes of the committed value objects
    manifest_rows: int
    s3_retries: int
    seconds_plan: float | None
    seconds_session: float | None      # Spark's cold start, when this batch started it
    seconds_archive: float | None
    seconds_commit: float | None
    seconds_total: float               # plan to commit (a CLI run's process start, config and init excluded)
    records_per_second: float | None   # records read / archive seconds


_TYPES = {"str": "string", "int": "int64", "float": "float64", "dt.datetime": "timestamp",
          "float | None": "float64", "int | None": "int64"}


def arrow_schema() -> "pa.Schema":
    """The table's Arrow schema (from :class:`MetricsRow`'s fields)."""
    import pyarrow as pa

    types = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(),
             "timestamp": pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(f.name, types[_TYPES[f.type]], nullable=f.type.endswith("None"))
                      for f in fields(MetricsRow)])


def metrics_ddl() -> str:
    """The table's columns as Spark DDL (an empty ``metrics`` view before the first batch)."""
    sql = {"string": "STRING", "int64": "BIGINT", "float64": "DOUBLE", "timestamp": "TIMESTAMP"}
    return ", ".join(f"{f.name} {sql[_TYPES[f.type]]}" for f in fields(MetricsRow))


def metrics_location(cfg: "SinkConfig") -> str | None:
    """Where the job's metrics go (None: turned off)."""
    from lakesink.manifest.location import parse_location

    loc = getattr(cfg, "metrics_location", None)
    if loc:
        return None if loc.strip().lower() in DISABLED else parse_location(loc).text
    return parse_location(cfg.manifest_location).with_suffix("_metrics").text


def metrics_row(job: str, result: Any, now: dt.datetime | None = None) -> MetricsRow:
    """The row of one :class:`~lakesink.driver.sink.BatchResult`."""
    secs = dict(result.seconds)
    archive = secs.get("archive")
    read = getattr(result, "records_read", 0) or 0
    return MetricsRow(
        job=job, batch_id=result.batch_id, run_id=result.run_id,
        committed_at=now or dt.datetime.now(dt.timezone.utc), partitions=len(result.partitions),
        records_read=read, records=result.records, objects=result.objects, bytes=result.bytes,
        manifest_rows=result.committed_rows, s3_retries=result.s3_retries,
        seconds_plan=secs.get("plan"), seconds_session=secs.get("session"), seconds_archive=archive,
        seconds_commit=secs.get("commit"), seconds_total=round(sum(secs.values()), 6),
        records_per_second=round(read / archive, 3) if archive else None)


def rows_table(rows: list[MetricsRow]) -> "pa.Table":
    import pyarrow as pa

    return pa.Table.from_pylist([asdict(r) for r in rows], schema=arrow_schema())


class MetricsTable:
    """The metrics table of a config: appended to after each batch, read by ``lakesink sql``."""

    def __init__(self, location: str, s3: Any = None, spark: Any = None):
        from lakesink.manifest.deltars import RETRY_OPTIONS
        from lakesink.manifest.location import parse_location

        table = parse_location(location)  # the same path-or-catalog rule as the manifest's
        self.location = table.text
        self.is_path = table.is_path
        self.uri = table.uri
        self.storage_options = {**RETRY_OPTIONS, **s3.object_store_options()} if s3 is not None else {}
        self._spark = spark

    def __repr__(self) -> str:  # storage options hold credentials: never shown
        return f"MetricsTable({self.location!r})"

    def append(self, rows: list[MetricsRow]) -> None:
        """Append ``rows`` (creating the table on first use)."""
        data = rows_table(rows)
        if self.is_path:
            from deltalake import write_deltalake

            write_deltalake(self.uri, data, mode="append", storage_options=self.storage_options or None)
            return
        spark = self._spark() if callable(self._spark) else self._spark
        spark.createDataFrame(data.to_pandas()).write.format("delta").mode("append").saveAsTable(self.location)

    def arrow(self) -> "pa.Table":
        """Every row (an empty table of the schema when nothing was written yet)."""
        if self.is_path:
            from deltalake import DeltaTable

            if not DeltaTable.is_deltatable(self.uri, storage_options=self.storage_options or None):
                return arrow_schema().empty_table()
            return DeltaTable(self.uri, storage_options=self.storage_options or None).to_pyarrow_table()
        spark = self._spark() if callable(self._spark) else self._spark
        if not spark.catalog.tableExists(self.location):
            return arrow_schema().empty_table()
        return spark.table(self.location).toArrow()

    def frame(self, spark: Any) -> Any:
        """The table as a Spark DataFrame (for the ``metrics`` view)."""
        if not self.is_path and spark.catalog.tableExists(self.location):
            return spark.table(self.location)
        table = self.arrow()
        if table.num_rows == 0:
            return spark.createDataFrame([], metrics_ddl())
        return spark.createDataFrame(table.select([f.name for f in arrow_schema()]))


def write_batch_metrics(cfg: "SinkConfig", result: Any, s3: Any = None, spark: Any = None) -> str | None:
    """Append ``result``'s row to the config's metrics table; returns a warning line instead of raising
    (None when written or turned off). Never names credentials: only the location and the error's first line."""
    loc = metrics_location(cfg)
    if loc is None:
        return None
    try:
        MetricsTable(loc, s3, spark).append([metrics_row(cfg.name, result)])
    except Exception as e:  # noqa: BLE001 - observability must not fail a committed batch
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        first = re.sub(r"(?<=://)[^@\s/]+@", "******@", first)  # user info in a URL
        msg = f"batch {result.batch_id}: metrics not written to {loc}: {type(e).__name__}: {first[:300]}"
        log.warning(msg)
        return msg
    return None
