"""The sink job: Kafka → objects in S3 → one Delta manifest commit per batch.

One batch (``SinkJob.run_batch``):

1. start offsets from the manifest (never a checkpoint, consumer group or local file);
   end offsets from a Kafka snapshot taken now; guards: same cluster, same topic id, no data lost
   to retention (unless ``offsets.on.data.loss=skip``, which records the skipped range);
2. the executors read exactly those ranges (one Spark partition per Kafka partition, in offset
   order) with librdkafka (``kafka.reader=direct``, :mod:`lakesink.executor.kafka_reader`) or through
   Spark's Kafka source (``kafka.reader=spark``); ``mapInArrow`` runs a
   :class:`~lakesink.executor.archiver.PartitionArchiver` per partition on the executors, which uploads
   closed objects and returns their manifest rows;
3. the driver resolves conditional-write conflicts against the manifest, checks that the ranges
   chain from the start offsets with no gap or overlap, and appends all rows in ONE Delta
   transaction (``txnAppId=job``, ``txnVersion=batch_id``), verified after the fact.

A batch that fails anywhere commits nothing; its uploaded objects are orphans that no manifest
reader sees and ``lakesink vacuum`` removes. The next batch starts from the manifest again.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import signal
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable

from lakesink import wiring
from lakesink.errors import (BatchFailedError, BatchValidationError, DataLossError, FencedError, KeyConflictError,
                             InvalidArgumentError, LakesinkError, ResumeGuardError, UploadMissingError)
from lakesink.driver.kafka_admin import isolation_level
from lakesink.executor.archiver import ArchivedRow
from lakesink.executor.task import RESULT_SCHEMA, PartitionStatus, archive_partitions, decode_result
from lakesink.driver.batch import BatchResult, PartitionPlan, executor_error, parse_interval
from lakesink.driver.poll_schedule import next_poll
from lakesink.hooks import NO_HOOKS, Hooks
from lakesink.manifest import CHAIN_KINDS, OBJECT, SKIPPED, ManifestRow, advance_row, skipped_row
from lakesink.manifest.rows import object_files

if TYPE_CHECKING:
    from lakesink.runners import TaskRunner

log = logging.getLogger("lakesink.driver.sink")


# ---------------------------------------------------------------- driver side


class SinkJob:
    """The sink for one config. All state lives in the manifest; the object itself is disposable."""

    #: Called with a :class:`lakesink.runners.progress.Progress` while a batch's Spark job runs (a CLI display)
    on_progress: Callable[[Any], None] | None = None

    def __init__(self, spark, cfg, run_id: str | None = None, hooks: Hooks | None = None,
                 runner: "TaskRunner | None" = None):
        """``spark``: a SparkSession, or a zero-argument callable returning one, called when a batch first needs
        it (a path manifest is read and committed with delta-rs: planning needs no Spark). ``runner``: what runs
        the batch's tasks (:mod:`lakesink.runners`, chosen by :func:`lakesink.runtime.engine.open_engine`);
        default Spark, in this session."""
        from lakesink.runners.spark import SparkRunner

        if runner is None:  # the session is started (at most once) by whichever asks first, the job or the runner
            runner = SparkRunner((lambda: self.spark) if callable(spark) else spark)
        self.runner = runner
        why = self.runner.cannot_run(cfg)
        if why is not None:
            raise InvalidArgumentError(f"job {cfg.name!r}: {why}")
        from lakesink.driver.kafka_admin import KafkaMetadata
        from lakesink.store import open_store

        self._spark, self.cfg = spark, cfg
        self.run_id = run_id or f"{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
        self.manifest = wiring.manifest(cfg, lambda: self.spark)
        self.kafka = KafkaMetadata(cfg.kafka_options, cfg.kafka_retry_deadline_ms / 1000.0)
        #: what every task of the run is given in place of the config (built once)
        self.parts = wiring.task_parts(cfg)
        self.store = open_store(self.parts.store)
        self.hooks = hooks or NO_HOOKS
        from lakesink.driver.group_offsets import GroupCapture  # consumer.groups: offsets recorded after each batch

        self.groups = GroupCapture(cfg, wiring.s3_settings(cfg), lambda: self.spark) if GroupCapture.wanted(cfg) else None
        #: End offsets a --once --flush-tail run archives up to (set after its first batch; None: no cap)
        self._targets: dict[tuple[str, int], int] | None = None
        self._seen_latest: dict[tuple[str, int], int] = {}
        self._polls = 0  # run_batch calls so far (BatchResult.poll)
        self.manifest.ensure()

    @property
    def spark(self):
        """The Spark session (started now if it was given as a callable)."""
        if callable(self._spark):
            self._spark = self._spark()
        return self._spark

    # -- planning
    def plan(self) -> tuple[list[PartitionPlan], list[ManifestRow], Any, int]:
        """Partitions to read, 'skipped' rows to record, the Kafka snapshot and the batch id."""
        from concurrent.futures import ThreadPoolExecutor

        cfg = self.cfg
        # The manifest query and the Kafka metadata calls are independent: overlap them.
        with ThreadPoolExecutor(max_workers=1) as pool:
            manifest_snapshot = pool.submit(self.manifest.snapshot, cfg.name)
            topics = self.kafka.resolve_topics(cfg.topics, cfg.topics_regex)
            ksnap = self.kafka.snapshot(topics)
            msnap = manifest_snapshot.result()
        plans, skipped = [], []
        for (topic, part), b in sorted(ksnap.bounds.items()):
            state = msnap.partitions.get((topic, part))
            if state is not None:
                if state.kafka_cluster_id and ksnap.cluster_id and state.kafka_cluster_id != ksnap.cluster_id:
                    raise ResumeGuardError(
                        f"manifest {cfg.manifest_location} was written from Kafka cluster {state.kafka_cluster_id}, "
                        f"but {self.kafka.servers} is cluster {ksnap.cluster_id}: refusing to resume job {cfg.name!r} "
                        f"(use a new job name or manifest for another cluster)")
                tid = ksnap.topic_ids.get(topic)
                if state.topic_id and tid and state.topic_id != tid:
                    raise ResumeGuardError(
                        f"topic {topic!r} was deleted and recreated (topic id {state.topic_id} in the manifest, "
                        f"{tid} now): refusing to resume job {cfg.name!r}, whose offsets refer to the old topic; "
                        f"to archive the new topic, run it as a new job (new `name`) with its own `topics.dir` "
                        f"(its object keys would repeat the old topic's)")
                start = state.next_offset
            elif cfg.kafka_starting_offsets == "earliest" or msnap.partitions:
                # a partition new to a job that has started (added to a topic, or a new topic matching
                # topics.regex) is archived from its beginning, whatever kafka.starting.offsets says
                start = b.earliest
            else:
                start = b.latest
                if b.latest > b.earliest:  # recorded, so the next batch goes on from here, not from its own latest
                    skipped.append(skipped_row(topic, part, b.earliest, b.latest - 1,
                                               "before the job started (kafka.starting.offsets=latest)",
                                               kafka_cluster_id=ksnap.cluster_id, topic_id=ksnap.topic_ids.get(topic)))
            if start < b.earliest:
                lost = f"{topic}-{part} offsets [{start}, {b.earliest - 1}]"
                if cfg.offsets_on_data_loss != "skip":
                    raise DataLossError(
                        f"{lost} were deleted by Kafka retention before they were archived; set "
                        f"offsets.on.data.loss=skip to continue from {b.earliest} (the skipped range is recorded "
                        f"in the manifest)")
                log.warning("skipping %s lost to retention", lost)
                skipped.append(skipped_row(topic, part, start, b.earliest - 1, "deleted by retention",
                                           kafka_cluster_id=ksnap.cluster_id, topic_id=ksnap.topic_ids.get(topic)))
                start = b.earliest
            if start > b.latest:
                raise ResumeGuardError(
                    f"{topic}-{part}: the manifest's next offset {start} is beyond Kafka's latest offset {b.latest} "
                    f"(topic truncated or replaced?)")
            end = b.latest
            if self._targets is not None:  # a --once --flush-tail run: no further than the offsets seen at start
                end = max(start, min(end, self._targets.get((topic, part), start)))
            else:
                self._seen_latest[(topic, part)] = b.latest
            if cfg.batch_max_records > 0:
                end = min(end, start + cfg.batch_max_records)
            if start < end:
                plans.append(PartitionPlan(topic, part, start, end))
        return plans, skipped, ksnap, msnap.next_batch_id

    def _read(self, plans: list[PartitionPlan]):
        """The Kafka read of ``plans`` and the columnar plan its columns serve (or None)."""
        from pyspark.sql import functions as F

        from lakesink.executor.columnar import ColumnarPlan, read_columns

        assign: dict[str, list[int]] = {}
        starting: dict[str, dict[str, int]] = {}
        ending: dict[str, dict[str, int]] = {}
        for p in plans:
            assign.setdefault(p.topic, []).append(p.partition)
            starting.setdefault(p.topic, {})[str(p.partition)] = p.start
            ending.setdefault(p.topic, {})[str(p.partition)] = p.end
        cfg = self.cfg
        reader = self.spark.read.format("kafka")
        from lakesink.config.kafka import java_options

        for k, v in java_options(cfg.kafka_options).items():  # ssl.ca.location → a PEM trust store, ...
            reader = reader.option(f"kafka.{k}", v)
        reader = reader.option("kafka.isolation.level", isolation_level(cfg.kafka_options))  # same default
        key, topic, headers = self.optional_columns(plans)
        cols = ["value", "partition", "offset", F.expr("unix_millis(timestamp)").alias("ts")]
        cols += [c for c, used in (("key", key), ("topic", topic), ("headers", headers)) if used]
        if cfg.store_kafka_metadata:  # Kafka's timestamp type id, for the record-metadata side file
            cols.append(F.col("timestampType").alias("ts_type"))
        df = (reader.option("assign", json.dumps(assign))
              .option("startingOffsets", json.dumps(starting))
              .option("endingOffsets", json.dumps(ending))
              .option("includeHeaders", "true" if headers else "false")
              .option("failOnDataLoss", "true")
              .load())
        extra, plan = read_columns(ColumnarPlan.for_parts(self.parts), df)
        return df.select(*cols, *extra), plan

    def optional_columns(self, plans: list[PartitionPlan]) -> tuple[bool, bool, bool]:
        """Whether the read carries ``key``, ``topic``, ``headers`` (both readers give the same columns).

        Only the columns this config uses: converting a column to Arrow for the Python workers is
        the read's largest cost after Kafka itself (headers, an array of structs, cost more than
        the values). Keys are read when stored or when their decoder can reject one (Confluent's
        key converter fails the task on a bad key even when keys are not stored). With ``errors.tolerance=all``
        both are read: a dead letter is the original record, key and headers included."""
        cfg = self.cfg
        transform = wiring.transforms(cfg)  # the columns a transform reads (lakesink.transforms)
        tkey, theaders = transform.reads() if transform is not None else (False, False)
        dlq = cfg.errors_tolerance == "all"
        return (cfg.store_kafka_keys or cfg.key_decoder != "bytes" or tkey or dlq, len({p.topic for p in plans}) > 1,
                cfg.store_kafka_headers or theaders or dlq)

    def _archive(self, plans: list[PartitionPlan], ctx, starts: dict) -> list:
        """Read and archive ``plans`` in the runner's tasks; the collected result rows."""
        cfg, parts = self.cfg, self.parts
        from lakesink.runners.progress import with_total

        total = sum(p.end - p.start for p in plans)  # an upper bound: transaction markers hold offsets too
        with self.runner.track(with_total(self.on_progress, total), ctx.batch_id, len(plans)) as tracking:
            count = tracking.count
            if tracking.live_to is not None:  # tasks send their live counts there (lakesink.executor.progress)
                ctx = dataclasses.replace(ctx, progress_to=tracking.live_to)
            if cfg.kafka_reader == "spark":  # only a Spark runner runs this config (SparkRunner.map_frame)
                df, columnar = self._read(plans)
                return self.runner.map_frame(
                    df, lambda it: count(archive_partitions(it, parts, ctx, starts, columnar)), RESULT_SCHEMA)
            return self._read_direct(plans, ctx, starts, count, tracking.done)

    def _read_direct(self, plans: list[PartitionPlan], ctx, starts: dict, count: Callable = iter,
                     done: Callable[[list[str]], None] | None = None) -> list[str]:
        """The direct reader (:mod:`lakesink.executor.kafka_reader`): one task per planned range, which reads it
        with librdkafka and archives it; the result rows, ``done`` called with each task's rows as it completes
        where the runner can tell."""
        from lakesink.executor.columnar import ColumnarPlan
        from lakesink.executor.kafka_reader import read_and_archive

        cfg, parts = self.cfg, self.parts
        plan = ColumnarPlan.for_parts(parts)
        columnar = plan.for_direct_reader() if plan is not None else None
        key, topic, headers = self.optional_columns(plans)
        options = dict(cfg.kafka_options)
        group_id = f"lakesink-{cfg.name}-{self.run_id}"  # librdkafka needs one; nothing is committed to it
        ranges = [(p.topic, p.partition, p.start, p.end) for p in plans]

        def task(ids):
            return count(read_and_archive(ids, ranges, parts, ctx, starts, columnar, options, group_id, key, topic,
                                          headers, cfg.store_kafka_metadata, cfg.kafka_retry_deadline_ms / 1000.0))

        return self.runner.run(task, len(ranges), RESULT_SCHEMA, done)

    # -- one batch
    def run_batch(self, flush_tail: bool = False) -> BatchResult:
        from lakesink.executor.archiver import BatchContext

        t0 = time.monotonic()
        self._polls += 1
        snapshot_ms = time.time_ns() // 1_000_000  # no later than the Kafka snapshot plan() takes
        plans, skipped, ksnap, batch_id = self.plan()
        result = BatchResult(batch_id, self.run_id, partitions=plans, poll=self._polls, snapshot_ms=snapshot_ms)
        driver_retries = getattr(self.store, "retries", 0)
        result.seconds["plan"] = time.monotonic() - t0
        rows: list[ManifestRow] = list(skipped)
        if plans:
            ctx = BatchContext(job=self.cfg.name, run_id=self.run_id, batch_id=batch_id,
                               cluster_id=ksnap.cluster_id, topic_ids=ksnap.topic_ids, flush_tail=flush_tail,
                               hooks=self.hooks.for_executors())
            cfg = self.cfg
            starts = {(p.topic, p.partition): (p.start, p.end) for p in plans}
            # resolve the manifest's transaction ids while the executors work (see Manifest.warm_commit)
            warm = threading.Thread(target=self.manifest.warm_commit, name="lakesink-warm-commit", daemon=True)
            warm.start()
            t1 = time.monotonic()
            if self.runner.prepare():  # a cold start (a session given as a callable), timed as its own phase
                result.seconds["session"] = time.monotonic() - t1
            t1 = time.monotonic()
            try:
                out = self._archive(plans, ctx, starts)
            except Exception as e:  # noqa: BLE001 - executor errors arrive wrapped by py4j/PySpark
                cause = executor_error(e)
                raise BatchFailedError(f"batch {batch_id} of job {cfg.name!r} failed, nothing was committed: "
                                       f"{cause}", cause=cause.split(":", 1)[0] if ":" in cause else None) from e
            result.seconds["archive"] = time.monotonic() - t1
            decoded = [decode_result(r) for r in out]
            status = {(d.topic, d.partition) for d in decoded if isinstance(d, PartitionStatus)}
            result.s3_retries = sum(d.s3_retries for d in decoded if isinstance(d, PartitionStatus))
            result.records_read = sum(d.read for d in decoded if isinstance(d, PartitionStatus))
            result.dead_lettered = sum(d.dead_lettered for d in decoded if isinstance(d, PartitionStatus))
            result.columnar_records = sum(d.columnar for d in decoded if isinstance(d, PartitionStatus))
            if cfg.timestamp_extractor != "Wallclock":  # Wallclock: re-read open files never close on time
                result.due_ms = min((d.due_ms for d in decoded if isinstance(d, PartitionStatus)
                                     and d.due_ms is not None), default=None)
            produced = [d for d in decoded if isinstance(d, ArchivedRow)]
            for p in plans:
                if (p.topic, p.partition) not in status:
                    # no record read in [start, end): only transaction markers / compaction gaps / aborted
                    rows.append(advance_row(p.topic, p.partition, p.start, p.end - 1, "no records in range",
                                            kafka_cluster_id=ksnap.cluster_id, topic_id=ksnap.topic_ids.get(p.topic)))
            warm.join(timeout=120)
            self.hooks.driver("before_resolve")
            rows += self._resolve_pending(produced)
        self._validate(plans, rows)
        self.hooks.driver("before_commit")
        self.verify_uploads(rows, batch_id)
        t2 = time.monotonic()
        if rows:
            self.hooks.driver("during_commit")
            result.committed_rows = self.manifest.commit(self.cfg.name, batch_id, self.run_id, rows)
            self.hooks.driver("after_commit")
        result.seconds["commit"] = time.monotonic() - t2
        result.rows = rows
        result.objects = sum(1 for r in rows if r.kind == OBJECT)
        result.records = sum(r.record_count for r in rows if r.kind == OBJECT)
        result.bytes = sum(r.size_bytes or 0 for r in rows)
        result.s3_retries += getattr(self.store, "retries", 0) - driver_retries
        if rows:  # observability after the commit: a failure is a warning, never a failed batch
            from lakesink.manifest.metrics import write_batch_metrics

            result.metrics_warning = write_batch_metrics(self.cfg, result, wiring.s3_settings(self.cfg),
                                                         lambda: self.spark)
        if self.groups is not None:  # after the commit, best effort (lakesink.driver.group_offsets)
            self.groups.record(batch_id, self.run_id, bool(rows), list(ksnap.bounds))
        return result

    def _resolve_pending(self, produced: list[ArchivedRow]) -> list[ManifestRow]:
        """The executors' rows, once every upload that met an existing object is resolved: an orphan of this
        job's failed runs is replaced (or adopted, if it holds our very bytes); anything else stops the batch."""
        pendings = {p.key: p for a in produced for p in a.pending}
        if not pendings:
            return [a.row for a in produced]
        keys = set(pendings)
        owners = self.manifest.committed_owners(keys)

        def give_up(error: LakesinkError):
            for p in pendings.values():
                self.store.abort_pending(p)
            raise error

        job = self.cfg.name
        others = {k: sorted(js - {job}) for k, js in owners.items() if js - {job}}
        if others:
            key, jobs = sorted(others.items())[0]
            give_up(KeyConflictError(
                f"{self.store.uri(key)} is committed in the manifest by job {jobs[0]!r}, and job {job!r} writes the "
                f"same key: two jobs archiving one topic need distinct topics.dir (or buckets); nothing was "
                f"committed"))
        if owners:
            committed = sorted(owners)
            give_up(FencedError(
                f"object(s) {', '.join(committed[:3])} are already committed in the manifest by another run of job "
                f"{job!r}: this run is behind (a zombie or a concurrent run); nothing was committed"))
        # Not in this manifest: replace (or adopt) only an orphan of this job's own failed runs. An object
        # uploaded by another job (another manifest) or by another writer (Confluent's sink, a user) is kept.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=16) as pool:  # HEADs are latency-bound: overlap them
            heads = list(pool.map(self.store.head, sorted(keys)))
        for key, info in zip(sorted(keys), heads):
            if info is not None and info.owner != job:
                whose = f"job {info.owner!r}" if info.owner else "a writer other than lakesink"
                give_up(KeyConflictError(
                    f"{self.store.uri(key)} already exists, uploaded by {whose}, and job {job!r} writes the same "
                    f"key: it is not replaced (give this job its own topics.dir or bucket, or remove the object "
                    f"if it is garbage); nothing was committed"))
        rows = []
        for archived in produced:
            row = archived.row
            for p in archived.pending:
                if p.same_content:  # a replay wrote the very same bytes: keep that object, replace nothing
                    w = self.store.adopt_pending(p)
                    log.info("kept existing object %s (etag %s): same content as this run's", w.key, w.etag)
                else:
                    w = self.store.finish_pending(p)
                    log.warning("replaced orphan object %s (etag %s) left by a failed run", w.key, p.existing_etag)
                row = row.with_written(w.key, w.etag, w.version_id, w.size)
            rows.append(row)
        return rows

    def verify_uploads(self, rows: list[ManifestRow], batch_id: int) -> None:
        """Every object about to be committed as batch ``batch_id`` still holds the bytes this run uploaded.

        Another run of the same batch may have taken our uploads for orphans and replaced them between our
        upload and now: a lost race, :class:`FencedError` (exit 4). An upload that is simply gone was deleted
        (``lakesink vacuum --execute`` with a retention shorter than this batch, or another deleter):
        :class:`UploadMissingError` (exit 5) -- unless the manifest shows that another run committed this batch
        meanwhile (a race again). Committing would record objects the store no longer has.
        (A replacement in the milliseconds between this check and the Delta commit is still
        possible; readers verify ETags, so it fails loudly, and versioned buckets keep our version.)
        """
        expected = {key: etag for r in rows for key, etag, _version in object_files(r)}
        current = self.store.confirmed_heads(expected)  # S3: a listing per directory, not a HEAD per file
        job = self.cfg.name
        for key, etag in expected.items():
            info = current[key]
            if info is not None and info.etag != etag:  # another object in its place: another run's
                raise FencedError(
                    f"{self.store.uri(key)} was replaced by another run of job {job!r} after this run "
                    f"uploaded it (etag {etag} → {info.etag}); this run ({self.run_id}) committed nothing")
        missing = sorted(k for k, info in current.items() if info is None)
        if not missing:
            return
        if self.committed_elsewhere(batch_id):
            raise FencedError(
                f"job {job!r} batch {batch_id} was committed by another run while this run ({self.run_id}) ran "
                f"(and {self.store.uri(missing[0])}, which this run uploaded, is gone); this run committed nothing")
        more = f" (and {len(missing) - 1} more of its {len(expected)} objects)" if len(missing) > 1 else ""
        raise UploadMissingError(
            f"{self.store.uri(missing[0])}{more}, uploaded by job {job!r} batch {batch_id} (run {self.run_id}), "
            f"is gone before the commit: probably deleted by `lakesink vacuum --execute` with a --retention "
            f"shorter than this batch takes (or by another deleter, e.g. a lifecycle rule); nothing was "
            f"committed, and the next run archives its records again")

    def committed_elsewhere(self, batch_id: int) -> bool:
        """Whether the manifest now holds ``batch_id`` (or a later batch) of this job: another run committed it.
        Unknown (the manifest unreadable) counts as no: the commit itself is fenced on the batch id anyway."""
        try:
            return self.manifest.snapshot(self.cfg.name).next_batch_id > batch_id
        except LakesinkError as e:
            log.warning("cannot tell whether batch %d was committed by another run: %s", batch_id, e)
            return False

    def _validate(self, plans: list[PartitionPlan], rows: list[ManifestRow]) -> None:
        """Ranges chain from each start offset, without gap or overlap, inside [start, end)."""
        by_part: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for r in rows:
            if r.kind not in CHAIN_KINDS or r.kind == SKIPPED:  # a note inside its ranges / before the batch's start
                continue
            by_part.setdefault((r.topic, r.kafka_partition), []).append((r.range_start, r.range_end))
        planned = {(p.topic, p.partition): p for p in plans}
        for tp, ranges in by_part.items():
            p = planned.get(tp)
            if p is None:
                raise BatchValidationError(f"{tp[0]}-{tp[1]}: results for a partition that was not planned")
            expect = p.start
            for a, b in sorted(set(ranges)):
                if a != expect or b < a or b >= p.end:
                    raise BatchValidationError(
                        f"{tp[0]}-{tp[1]}: commit group [{a}, {b}] does not chain from {expect} "
                        f"(batch range [{p.start}, {p.end - 1}]); nothing committed")
                expect = b + 1

    # -- loops
    def more_to_flush(self, res: BatchResult, flush_tail: bool) -> bool:
        """A ``--once --flush-tail`` run goes on with further (``batch.max.records``-capped) batches until every
        partition reached the end offset seen by its first batch; later appends are left for the next run."""
        if not flush_tail or self.cfg.batch_max_records <= 0 or not res.partitions:
            return False
        if self._targets is None:
            self._targets = dict(self._seen_latest)
        return any(p.end < self._targets.get((p.topic, p.partition), p.end) for p in res.partitions)

    def run(self, once: bool = True, interval_s: float = 30.0, flush_tail: bool = False,
            stop: threading.Event | None = None,
            on_batch: Callable[[BatchResult], None] | None = None) -> list[BatchResult]:
        """``once``: one batch up to the offsets seen now. Else repeat every ``interval_s`` (sooner when a file
        left open becomes closable by rotate.interval.ms: :mod:`lakesink.driver.poll_schedule`) until
        ``stop`` is set (SIGTERM/SIGINT set it: the current batch finishes and commits first).
        ``on_batch`` is called after every committed batch."""
        install = stop is None  # a caller passing ``stop`` handles signals itself (the CLI)
        stop = stop or threading.Event()
        results = []
        if install and not once and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
        while True:
            t = time.monotonic()
            res = self.run_batch(flush_tail=flush_tail)
            log.info(res.summary())
            results.append(res)
            if on_batch is not None:
                on_batch(res)
            if once and not stop.is_set() and self.more_to_flush(res, flush_tail):
                continue
            if once or stop.is_set():
                return results
            nxt = next_poll(interval_s=interval_s, started=t, now=time.monotonic(), due_ms=res.due_ms,
                            snapshot_ms=res.snapshot_ms, wall_now_ms=time.time_ns() // 1_000_000)
            log.info(nxt.words())
            stop.wait(nxt.wait_s)
            if stop.is_set():
                return results


__all__ = ["SinkJob", "BatchResult", "PartitionPlan", "parse_interval", "executor_error"]
