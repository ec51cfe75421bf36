"""The manifest of a path table (``s3a://``, ``s3://``, a local path) read and committed with delta-rs.

Same table, same rows, same commit tags as :class:`lakesink.manifest.table.Manifest` (the Spark engine, kept
for catalog tables): delta-spark and Databricks read and append to it, and it reads and appends to theirs. Two
reasons to use it for path tables:

* **No cold JVM on the driver's critical path.** The next-offset lookup, the table creation and the commit
  take tens of milliseconds here instead of several Spark jobs each on a cold session.
* **Safe for two drivers on S3.** delta-rs writes each ``_delta_log`` entry with a conditional create
  (``If-None-Match: *``), so two commits of the same table version cannot both succeed; delta-spark's default
  S3 LogStore can let one silently overwrite the other.

delta-rs does not reject a repeated app-transaction version by itself, so :meth:`DeltaRsManifest.commit`
checks ``transaction_version(job)`` on the version it writes on and commits with no automatic retry: a
concurrent commit makes the write fail (``CommitFailedError``); the check then runs again on the new version,
and either finds this batch committed by another run (:class:`~lakesink.errors.FencedError`) or retries.

Size: about the ~500-line guide on purpose: the snapshot's file pruning by the log's statistics
(:func:`_plan_files`, :class:`_Fold`) and the commit share one loaded table and its invariants (append-only,
one job per commit, fencing on the app transaction), which read best in one place.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from lakesink.errors import FencedError, ManifestError
from lakesink.manifest.location import parse_location
from lakesink.manifest.rows import COLUMNS, ManifestRow
from lakesink.manifest.table import ManifestSnapshot, PartitionState, commit_tag

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from lakesink.store.settings import S3Settings

log = logging.getLogger("lakesink.manifest")

#: Commits lost to concurrent writers of *other* batches (another job sharing the manifest) are retried this often.
COMMIT_ATTEMPTS = 20
#: A checkpoint every this many commits (``delta.checkpointInterval``, set when the table is created; delta-rs's
#: commit writes it, and then deletes the log entries older than ``delta.logRetentionDuration`` (30 days) that no
#: time travel within that retention needs): a reader loads a checkpoint plus fewer JSON commits than this.
CHECKPOINT_INTERVAL = 100
#: How long a commit keeps retrying transient store failures (throttling, dropped connections, lost responses).
COMMIT_DEADLINE_S = 120.0
# delta-rs / object_store errors worth retrying: the request may or may not have been applied
TRANSIENT = re.compile(r"connection reset|connection closed|broken pipe|timed out|error sending request|"
                       r"incomplete message|SlowDown|Service Unavailable|\b50[0-4]\b", re.I)


def _hooks() -> Any:
    """After a commit: a checkpoint when the version reaches ``delta.checkpointInterval`` (100 on a table created
    without it), and expired log cleanup as the table's ``delta.enableExpiredLogCleanup`` says (default on)."""
    from deltalake import PostCommitHookProperties

    return PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=None)


def table_uri(location: str) -> str:
    """The delta-rs URI of a path location: ``s3a://`` → ``s3://``, ``file:/x`` → ``/x`` (the one rule:
    :func:`lakesink.manifest.location.parse_location`)."""
    return parse_location(location).uri


def arrow_schema(comments: bool = False) -> "pa.Schema":
    """The manifest's columns as an Arrow schema (nullability from :data:`COLUMNS`; their comments when
    creating the table -- data written must not carry them: Delta would compare them with the table's)."""
    import pyarrow as pa

    side = pa.struct([("view", pa.string()), ("key", pa.string()), ("etag", pa.string()),
                      ("version_id", pa.string()), ("size_bytes", pa.int64())])
    types = {"STRING": pa.string(), "INT": pa.int32(), "BIGINT": pa.int64(),
             "TIMESTAMP": pa.timestamp("us", tz="UTC")}
    fields = []
    for name, sql, nullable, comment in COLUMNS:
        t = pa.list_(side) if sql.startswith("ARRAY<STRUCT") else types[sql]
        fields.append(pa.field(name, t, nullable=nullable, metadata={"comment": comment} if comments else None))
    return pa.schema(fields)


#: Bounded retries (object_store's defaults retry for up to 3 minutes): a down endpoint fails the run in seconds.
RETRY_OPTIONS = {"max_retries": "4", "retry_timeout": "30s", "connect_timeout": "5s", "timeout": "120s"}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _first_line(e: BaseException) -> str:
    """delta-rs errors are a chain of indented lines: the first (what failed) and the last (the root cause)."""
    lines = [_ANSI.sub("", ln).replace("↳", "").strip() for ln in str(e).strip().splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return type(e).__name__
    return (lines[0] if len(lines) == 1 else f"{lines[0]}: ... {lines[-1]}")[:400]


class DeltaRsManifest:
    """A path manifest at ``location`` through delta-rs; the interface of the Spark-engine ``Manifest``."""

    engine = "delta-rs"

    def __init__(self, location: str, s3: "S3Settings | None" = None):
        self.location = location
        self.uri = table_uri(location)
        self.storage_options = {**RETRY_OPTIONS, **s3.object_store_options()} if s3 is not None else {}
        self._folds: dict[str, _Fold] = {}
        self._loaded: Any = None  # the DeltaTable snapshot() and commit() last used (see _latest)
        self._lock = threading.Lock()
        self._dataset: Any = None

    def __repr__(self) -> str:  # storage options hold credentials: never shown
        return f"DeltaRsManifest({self.location!r})"

    # -- table
    def _table(self):
        from deltalake import DeltaTable

        try:
            return DeltaTable(self.uri, storage_options=self.storage_options or None)
        except Exception as e:  # noqa: BLE001 - TableNotFoundError, OSError from object_store, ...
            raise ManifestError(f"cannot read manifest {self.location}: {_first_line(e)}") from None

    def _latest(self):
        """The table at its latest version: the one this object loaded before, brought up to date with the
        commits since (delta-rs reads only those log entries), else a fresh load: a sink's plans and commits
        load the log once per process (at thousands of data files a load is a large part of either)."""
        with self._lock:
            if self._loaded is not None:
                try:
                    self._loaded.update_incremental()
                    return self._loaded
                except Exception:  # noqa: BLE001 - any doubt: load afresh
                    self._loaded = None
            self._loaded = self._table()
            return self._loaded

    def _forget(self) -> None:  # after a failed commit: the next attempt loads the table afresh
        with self._lock:
            self._loaded = None

    def exists(self) -> bool:
        """Whether the table exists yet (a job that never ran has none)."""
        from deltalake import DeltaTable

        try:
            return bool(DeltaTable.is_deltatable(self.uri, storage_options=self.storage_options or None))
        except Exception as e:  # noqa: BLE001
            raise ManifestError(f"cannot read manifest {self.location}: {_first_line(e)}") from None

    def ensure(self, attempts: int = 5) -> None:
        """Create the table if it does not exist (idempotent, safe to race: the loser finds the winner's)."""
        from deltalake import DeltaTable

        for attempt in range(attempts):
            if self.exists():
                return
            try:
                DeltaTable.create(self.uri, arrow_schema(comments=True), mode="ignore", partition_by=["topic"],
                                  configuration={"delta.appendOnly": "true",
                                                 "delta.checkpointInterval": str(CHECKPOINT_INTERVAL)},
                                  storage_options=self.storage_options or None)
                return
            except Exception as e:  # noqa: BLE001 - a racing creator won version 0
                if attempt == attempts - 1:
                    raise ManifestError(f"cannot create manifest table {self.location}: {_first_line(e)}") from None
                time.sleep(0.2 * (attempt + 1))

    def version(self) -> int:
        """The table's latest version (-1 if it does not exist)."""
        return self._table().version() if self.exists() else -1

    def arrow(self, columns: list[str] | None = None, job: str | None = None, kind: str | None = None) -> "pa.Table":
        """The current rows as an Arrow table with the manifest's own column types (only ``columns``; only
        ``job``'s / ``kind`` rows): :meth:`scan`'s read, its string views cast back to strings."""
        import pyarrow as pa

        schema = arrow_schema()
        if columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        return self._query(schema.names, {"job": job, "kind": kind}).cast(schema)

    def scan(self, job: str | None = None, columns: list[str] | None = None, native: bool = False) -> "pa.Table":
        """Every current row (only ``job``'s; only ``columns``, None: all) read by delta-rs's own engine
        (DataFusion: Rust threads, no Python filesystem; several times a pyarrow dataset's speed on a table of many
        small files), for ``lakesink sql``. String columns come back as Arrow string views. ``native``: the table
        as delta-rs returns it (an arro3 table: DuckDB and pyarrow read it through the Arrow C stream interface),
        without importing pyarrow (0.2 s with numpy, a third of a one-query ``lakesink sql``'s imports)."""
        return self._query(columns, {"job": job}, native)

    def _query(self, columns: list[str] | None, equal: dict[str, str | None], native: bool = False) -> "pa.Table":
        from deltalake import QueryBuilder

        def literal(v: str) -> str:
            return "'" + v.replace("'", "''") + "'"

        select = "*" if columns is None else ", ".join(f'"{c}"' for c in columns)
        where = " AND ".join(f'"{c}" = {literal(v)}' for c, v in equal.items() if v is not None)
        try:
            rows = QueryBuilder().register("manifest", self._table()).execute(
                f"SELECT {select} FROM manifest" + (f" WHERE {where}" if where else ""))
            if native:
                return rows.read_all()
            import pyarrow as pa

            # through the Arrow stream, not pa.table(): that checks for a pandas DataFrame, importing pandas (0.4 s)
            return pa.RecordBatchReader.from_stream(rows.read_all()).read_all()
        except ManifestError:
            raise
        except Exception as e:  # noqa: BLE001
            raise ManifestError(f"cannot read manifest {self.location}: {_first_line(e)}") from None

    # -- reads
    def snapshot(self, job: str) -> ManifestSnapshot:
        """Next offsets and last batch id of ``job``, from one table version.

        Incremental: only data files not folded into an earlier snapshot of this object are considered. The
        table is append-only and the fold keeps maxima, so files seen before (even if an OPTIMIZE rewrote them
        since) never change the answer; a long-running ``--continuous`` job thus looks at each manifest file once.

        Pruned by the log's per-file statistics (``min``/``max`` of ``job``, ``kafka_partition``, ``range_end``,
        ``batch_id``, which delta-rs and delta-spark write for the manifest's first 32 columns), so a cold
        process reads a handful of files, not all of them (a long-running job's table holds one small file per
        topic per batch): a file of other jobs only is skipped; a file of ``job`` only gives its batch id from
        its statistics, and is read only if one of its partitions may still get a larger ``range_end`` from it
        (newest files first, so the older ones are covered). A file without statistics is read."""
        import pyarrow as pa

        state = self._folds.setdefault(job, _Fold())
        try:
            table = self._latest()
            # through the Arrow stream, not pa.table(): see _query
            adds = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
            must, candidates = _plan_files(adds, job, state.files)
            self._read_fold(table, job, state, must)
            by_topic: dict[str, list[_FileStats]] = {}
            for f in sorted(candidates, key=lambda f: -f.max_end):
                state.last = max(state.last, f.max_batch)
                by_topic.setdefault(f.topic, []).append(f)
            at = dict.fromkeys(by_topic, 0)
            while at:  # per topic, newest first: read the first file not covered, then go on from there
                todo = []
                for topic, i in list(at.items()):
                    files = by_topic[topic]
                    while i < len(files) and state.covers(files[i]):
                        state.files.add(files[i].path)
                        i += 1
                    if i == len(files):
                        del at[topic]
                    else:
                        todo.append(files[i])
                        at[topic] = i + 1
                self._read_fold(table, job, state, [(f.path, f.topic) for f in todo])
        except ManifestError:
            raise
        except Exception as e:  # noqa: BLE001
            raise ManifestError(f"cannot read manifest {self.location}: {_first_line(e)}") from None
        parts = {k: PartitionState(k[0], k[1], end + 1, cluster, tid) for k, (end, cluster, tid) in state.best.items()}
        return ManifestSnapshot(parts, state.last)

    def _read_fold(self, table: Any, job: str, state: "_Fold", files: list[tuple[str, str]]) -> None:
        """Read ``job``'s rows of ``files`` ((path, topic) pairs) into ``state``."""
        if not files:
            return
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.dataset as pads
        import pyarrow.fs as pa_fs
        from deltalake.fs import DeltaStorageHandler

        if self._dataset is None:
            # one filesystem and format for this object's life (a dataset per batch costs native memory that is
            # never returned); not table.to_pyarrow_dataset(): it builds a statistics expression for every file
            # of the table (seconds at thousands of files) where we read a few
            fs = pa_fs.PyFileSystem(DeltaStorageHandler(table.table_uri, self.storage_options or None))
            fmt = pads.ParquetFileFormat(
                default_fragment_scan_options=pads.ParquetFragmentScanOptions(pre_buffer=True))
            self._dataset = (fs, fmt)
        fs, fmt = self._dataset
        full = arrow_schema()
        schema = pa.schema([full.field(c) for c in _SNAPSHOT_COLUMNS + ["job"]])
        frags = [fmt.make_fragment(p, fs, partition_expression=pc.field("topic") == t) for p, t in files]
        sub = pads.FileSystemDataset(frags, schema, fmt, fs)
        # no scan threads: see arrow()
        t = sub.to_table(columns=_SNAPSHOT_COLUMNS, filter=pc.field("job") == job, use_threads=False)
        state.fold(t.to_pydict())
        state.files.update(p for p, _ in files)

    def committed_keys(self, job: str | None = None) -> set[str]:
        """Every object key (value and side files) the manifest references."""
        t = self.arrow(["object_key", "side_files"], job=job, kind="object")
        keys = {k for k in t.column("object_key").to_pylist() if k}
        for sides in t.column("side_files").to_pylist():
            keys.update(s["key"] for s in sides or () if s.get("key"))
        return keys

    def topics(self, job: str) -> set[str]:
        """Every topic ``job`` has rows for."""
        return set(self.arrow(["topic"], job=job).column("topic").to_pylist())

    def committed_owners(self, keys: set[str]) -> dict[str, set[str]]:
        """For each of ``keys`` that any row references: the jobs whose rows do."""
        if not keys:
            return {}
        t = self.arrow(["job", "object_key", "side_files"], kind="object")
        owners: dict[str, set[str]] = {}
        for job, key, sides in zip(t.column("job").to_pylist(), t.column("object_key").to_pylist(),
                                   t.column("side_files").to_pylist()):
            for k in [key, *(s.get("key") for s in sides or ())]:
                if k in keys:
                    owners.setdefault(k, set()).add(job)
        return owners

    # -- commit
    def commit(self, job: str, batch_id: int, run_id: str, rows: Iterable[ManifestRow]) -> int:
        """Append ``rows`` in one Delta commit carrying app transaction (``job``, ``batch_id``); the row count.

        Raises FencedError when the table already holds ``batch_id`` (or a later batch) of ``job``: another run
        committed it, before this run or concurrently."""
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake
        from deltalake.exceptions import CommitFailedError

        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        rows = [r.stamped(job, batch_id, run_id, now) for r in rows]
        if not rows:
            return 0
        schema = arrow_schema()
        data = pa.Table.from_pylist([_arrow_row(r) for r in rows], schema=schema)
        tag = commit_tag(job, batch_id, run_id)
        deadline = time.monotonic() + COMMIT_DEADLINE_S
        races = transient = 0
        while True:
            try:
                table = self._latest()
                seen = table.transaction_version(job)
                if seen is not None and seen >= batch_id:
                    if transient and self._committed(table, tag):
                        return len(rows)  # our earlier attempt landed; only its response was lost
                    raise FencedError(
                        f"job {job!r} batch {batch_id} was already committed by another run (the manifest holds "
                        f"batch {seen}); this run ({run_id}) committed nothing. Re-run to continue from the manifest.")
                props = CommitProperties(
                    custom_metadata={"userMetadata": tag}, max_commit_retries=0,
                    app_transactions=[Transaction(job, batch_id, int(time.time() * 1000))])
                write_deltalake(table, data, mode="append", commit_properties=props, post_commithook_properties=_hooks(),
                                storage_options=self.storage_options or None)
                return len(rows)
            except CommitFailedError as e:  # another writer took this table version: check again on the next
                self._forget()
                races += 1
                if races >= COMMIT_ATTEMPTS:
                    raise ManifestError(f"commit of job {job!r} batch {batch_id} to {self.location}: lost "
                                        f"{COMMIT_ATTEMPTS} races to concurrent writers; nothing was committed") from None
                log.info("manifest %s: commit of %s batch %d lost a race (%s); re-checking", self.location, job,
                         batch_id, _first_line(e))
                time.sleep(min(0.05 * races, 0.5))
            except (FencedError, ManifestError) as e:
                self._forget()
                if isinstance(e, FencedError) or not TRANSIENT.search(str(e)) or time.monotonic() > deadline:
                    raise
                transient += 1
                time.sleep(min(0.1 * 2 ** transient, 5.0))
            except Exception as e:  # noqa: BLE001
                self._forget()
                if TRANSIENT.search(str(e)) and time.monotonic() < deadline:
                    transient += 1
                    log.info("manifest %s: commit of %s batch %d: %s; retrying", self.location, job, batch_id,
                             _first_line(e))
                    time.sleep(min(0.1 * 2 ** transient, 5.0))
                    continue
                raise ManifestError(f"commit of job {job!r} batch {batch_id} to {self.location} failed: "
                                    f"{_first_line(e)}") from None

    def commit_notes(self, job: str, run_id: str, action: str, build) -> list[ManifestRow]:
        """Append the rows ``build()`` returns (tombstones of ``lakesink expire``) in one Delta commit of ``job``'s,
        stamped with the job's last committed batch id (so the sink's next batch and next offsets are unchanged)
        and tagged with app transaction ``<job>#<action>`` (its own counter, never the sink's). ``build`` is
        called again after the table moved under it (a concurrent sink or expire committed): it reads the
        manifest anew, so a row is never built from a version older than the one it is committed on. Returns the
        rows committed (none: nothing committed)."""
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake
        from deltalake.exceptions import CommitFailedError

        app = f"{job}#{action}"
        for _attempt in range(COMMIT_ATTEMPTS):
            table = self._table()  # the version committed on; build() reads this version or a later one
            batch = table.transaction_version(job)
            rows = list(build())
            if not rows:
                return []
            now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
            rows = [r.stamped(job, -1 if batch is None else batch, run_id, now) for r in rows]
            data = pa.Table.from_pylist([_arrow_row(r) for r in rows], schema=arrow_schema())
            seq = (table.transaction_version(app) or 0) + 1
            tag = json.dumps({"lakesink_job": job, "action": action, "run_id": run_id}, separators=(",", ":"))
            props = CommitProperties(custom_metadata={"userMetadata": tag}, max_commit_retries=0,
                                     app_transactions=[Transaction(app, seq, int(time.time() * 1000))])
            try:
                write_deltalake(table, data, mode="append", commit_properties=props, post_commithook_properties=_hooks(),
                                storage_options=self.storage_options or None)
                return rows
            except CommitFailedError as e:
                log.info("manifest %s: %s of %s lost a race (%s); reading the manifest again", self.location,
                         action, job, _first_line(e))
            except Exception as e:  # noqa: BLE001
                raise ManifestError(f"{action} commit of job {job!r} to {self.location} failed: "
                                    f"{_first_line(e)}; nothing was committed") from None
        raise ManifestError(f"{action} commit of job {job!r} to {self.location}: lost {COMMIT_ATTEMPTS} races to "
                            f"concurrent writers; nothing was committed")

    def _committed(self, table: Any, tag: str) -> bool:
        """Whether one of the table's recent commits carries ``tag`` (this run's commit of this batch)."""
        return any(h.get("userMetadata") == tag for h in table.history(50))

    def warm_commit(self) -> None:
        """Nothing to pre-resolve: a delta-rs commit reads the transaction ids from the log it loads."""


_SNAPSHOT_COLUMNS = ["topic", "kafka_partition", "range_end", "kafka_cluster_id", "topic_id", "batch_id"]


@dataclass(frozen=True)
class _FileStats:
    """A data file holding only one job's rows, with the statistics the snapshot needs."""

    path: str
    topic: str
    min_part: int
    max_part: int
    max_end: int
    max_batch: int


def _plan_files(adds: "pa.Table", job: str, seen: set[str]) -> tuple[list[tuple[str, str]], list[_FileStats]]:
    """The data files of ``adds`` (``get_add_actions(flatten=True)``) not in ``seen``, split by their statistics:
    files to read ((path, topic)) and files of ``job`` only that may be skipped (:class:`_FileStats`). Files of
    other jobs only are added to ``seen`` (string statistics may be truncated prefixes, but min <= value <=
    max holds for them too: delta-spark widens a truncated max)."""
    names = set(adds.column_names)
    need = ["min.job", "max.job", "min.kafka_partition", "max.kafka_partition", "max.range_end", "max.batch_id",
            "null_count.range_end", "num_records"]

    def col(name: str) -> list:
        return adds.column(name).to_pylist() if name in names else [None] * adds.num_rows

    paths, topics = col("path"), col("partition.topic")
    stats = {n: col(n) for n in need}
    must: list[tuple[str, str]] = []
    skip: list[_FileStats] = []
    for i, (path, topic) in enumerate(zip(paths, topics)):
        if path in seen:
            continue
        lo, hi = stats["min.job"][i], stats["max.job"][i]
        if lo is not None and hi is not None and not lo <= job <= hi:
            seen.add(path)
            continue
        vals = [stats[n][i] for n in need[2:6]]
        if lo == hi == job and None not in vals and stats["null_count.range_end"][i] == 0 and topic is not None:
            skip.append(_FileStats(path, topic, *vals))
        else:
            must.append((path, topic))
    return must, skip


class _Fold:
    """A job's snapshot folded over the data files read so far (see :meth:`DeltaRsManifest.snapshot`)."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.best: dict[tuple[str, int], tuple[int, Any, Any]] = {}
        self.last = -1

    def covers(self, f: _FileStats) -> bool:
        """Whether no row of ``f`` can raise a partition's best ``range_end``."""
        if f.max_part - f.min_part > 4096:
            return False
        best = self.best
        for part in range(f.min_part, f.max_part + 1):
            cur = best.get((f.topic, part))
            if cur is None or cur[0] < f.max_end:
                return False
        return True

    def fold(self, cols: dict[str, list]) -> None:
        best = self.best
        for topic, part, end, cluster, tid, batch in zip(cols["topic"], cols["kafka_partition"], cols["range_end"],
                                                         cols["kafka_cluster_id"], cols["topic_id"], cols["batch_id"]):
            cur = best.get((topic, part))
            if cur is None or end > cur[0]:
                best[(topic, part)] = (end, cluster, tid)
            self.last = max(self.last, batch)


def _arrow_row(r: ManifestRow) -> dict[str, Any]:
    out = {name: v for name, v in zip((c[0] for c in COLUMNS), r.as_tuple())}
    if out["side_files"] is not None:
        out["side_files"] = [dict(zip(("view", "key", "etag", "version_id", "size_bytes"), s))
                             for s in out["side_files"]]
    return out


__all__ = ["DeltaRsManifest", "arrow_schema", "table_uri", "CHECKPOINT_INTERVAL", "COMMIT_ATTEMPTS"]
