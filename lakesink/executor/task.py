"""The ``mapInArrow`` body of a sink batch: Arrow batches of one Kafka partition in, JSON result rows out.

Each result row is a manifest row of an object this task uploaded, plus one status row per partition
(records read, first and last offset) from which the driver proves the ranges chain. The task owns its
archiver: on any failure it aborts what it staged and re-raises, so the batch commits nothing.
"""
from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any, Iterator

from lakesink.errors import BatchValidationError
from lakesink.executor.deadletter import DeadLetters
from lakesink.executor.results import PartitionStatus, decode_result, encode_result  # noqa: F401 - decode_result re-exported
from lakesink.transforms import dropped_offsets

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.wiring import TaskParts


RESULT_SCHEMA = "row string"


def archive_partitions(batches: Iterator[Any], parts: "TaskParts", ctx, plans: dict, columnar=None) -> Iterator[Any]:
    """mapInArrow body: archive the records of one Kafka partition (with the run's ``parts``); yield JSON result
    rows.

    Each Arrow batch takes the columnar path (``columnar``, a :class:`~lakesink.executor.columnar.ColumnarPlan`)
    when it can, else the per-record path: decode, SinkRecords, rotation, ``write_many``."""
    import pyarrow as pa

    from lakesink.executor.archiver import PartitionArchiver
    from lakesink.objects.records import SinkRecord
    from lakesink.store import open_store

    from lakesink.executor.progress import live_counts

    batches = live_counts(batches, getattr(ctx, "progress_to", None))  # records read so far, to the driver
    archiver = None
    only_topic = next(iter(plans))[0] if len({t for t, _p in plans}) == 1 else None
    letters = DeadLetters.for_settings(parts.dead_letters, ctx, getattr(ctx, "dead_letter_producer", None))
    value_decoder = parts.value_decoder.build()
    bare_avro = value_decoder.name == "avro" and not value_decoder.wire_format
    key_decoder = parts.key_decoder.build()
    key_schemas = parts.keys_have_schemas
    store = open_store(parts.store)
    # lakesink.transforms: records are mapped before partitioning
    transform = parts.transforms.build() if parts.transforms is not None else None
    if transform is not None and transform.record_path:
        columnar = None
    side_formats = {}  # the keys/headers formats, for the columnar path's side payloads
    if columnar is not None and columnar.keys:
        side_formats["keys"] = parts.keys_format.build()
    if columnar is not None and columnar.headers:
        side_formats["headers"] = parts.headers_format.build()
    first = last = None
    read = 0
    # The cyclic GC, left automatic, re-scans the young records of this loop every few hundred
    # allocations (up to half the CPU time); the records hold no reference cycles, so it is off
    # here, with a collection of the young generations after each Arrow batch to bound any cyclic
    # garbage (exceptions, libraries) to one batch. The previous state is restored at the end.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            names = batch.schema.names
            col = {name: batch.column(i) for i, name in enumerate(names)}
            # columns the read left out (see SinkJob._read): one topic, no stored keys/headers
            topics = col["topic"].to_pylist() if "topic" in col else None
            pids = col["partition"].to_pylist()
            topic, part = (topics[0] if topics else only_topic), pids[0]
            if archiver is None:
                plan = plans[(topic, part)]
                archiver = PartitionArchiver(parts, store, topic, part, plan[0], ctx)
            offsets = col["offset"].to_pylist()
            # Kafka timestamp type ids, read only for the record-metadata side file (store.kafka.metadata)
            tts = col["ts_type"].to_pylist() if "ts_type" in col else None
            if first is None:
                first = offsets[0]
            if transform is not None:  # the batch read is counted; what follows archives what the SQL makes of it
                read, last = read + n, offsets[-1]
                archiver.read_through(last)
                batch = transform.apply_arrow(batch, topic, part)
                n = batch.num_rows
                if n == 0:
                    archiver.note_dropped(offsets)
                    continue
                col = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
                topics = col["topic"].to_pylist() if "topic" in col else None
                pids = col["partition"].to_pylist()
                kept = col["offset"].to_pylist()
                archiver.note_dropped(dropped_offsets(offsets, kept))
                offsets = kept
                tts = col["ts_type"].to_pylist() if "ts_type" in col else None
            mixed = first_mixed(topics, pids, n)
            if columnar is not None and mixed is None:
                prepared = columnar.payloads(col, value_decoder, topic, part, offsets)
                sides = None if prepared is None else columnar.side_payloads(
                    col, side_formats.get("keys"), side_formats.get("headers"), key_decoder.name)
                if sides is not None and archiver.process_run(offsets, col["ts"].to_pylist(), *prepared,
                                                              timestamp_types=tts, sides=sides):
                    if transform is None:
                        last = offsets[-1]
                        read += n
                    del prepared, sides
                    gc.collect(1)
                    continue
            raw_values = col["value"].to_pylist()
            raw_keys = col["key"].to_pylist() if "key" in col else [None] * n
            tss = col["ts"].to_pylist()
            hcol = col.get("headers")
            headers = [()] * n if hcol is None or hcol.null_count == n else [
                tuple((h["key"], h["value"]) for h in hdrs) if hdrs else () for hdrs in hcol.to_pylist()]
            errors = "raise" if letters is None else "return"
            values = value_decoder.decode_many(raw_values, topic, part, offsets, errors=errors)
            keys = key_decoder.decode_many(raw_keys, topic, part, offsets, errors=errors)
            batch_last, batch_read = offsets[-1], n  # what was read, whatever goes to the dead letters
            if letters is not None:
                if mixed is not None:
                    raise BatchValidationError(f"a Spark partition mixed {topic}-{part} with "
                                               f"{topics[mixed] if topics else topic}-{pids[mixed]}")
                keep = letters.take_failed(topic, part, offsets, tss, raw_keys, raw_values, headers, keys, values)
                if keep is not None:  # records that do not decode became dead letters; the others go on
                    archiver.read_through(batch_last)  # their offsets stay in the committed ranges
                    offsets, tss, raw_keys, raw_values, headers, keys, values = (
                        [c[i] for i in keep] for c in (offsets, tss, raw_keys, raw_values, headers, keys, values))
                    tts = None if tts is None else [tts[i] for i in keep]
                    if not keep:
                        if transform is None:
                            last, read = batch_last, read + batch_read
                        del values, keys, raw_values, raw_keys, headers
                        continue
            if tts is not None:
                recs = [SinkRecord(topic, part, off, ts, k[0], v[0], h, v[1], rv, rk, {}, v[1] if bare_avro else None, tt)
                        for off, ts, k, v, h, rv, rk, tt in zip(offsets, tss, keys, values, headers, raw_values,
                                                                raw_keys, tts)]
            elif bare_avro:  # raw_value is exactly one datum of the value schema: the Avro format may copy it
                recs = [SinkRecord(topic, part, off, ts, k[0], v[0], h, v[1], rv, rk, {}, v[1])
                        for off, ts, k, v, h, rv, rk in zip(offsets, tss, keys, values, headers, raw_values, raw_keys)]
            else:
                recs = [SinkRecord(topic, part, off, ts, k[0], v[0], h, v[1], rv, rk)
                        for off, ts, k, v, h, rv, rk in zip(offsets, tss, keys, values, headers, raw_values, raw_keys)]
            if key_schemas:  # the keys side file is written with the key's schema (TaskParts.keys_have_schemas)
                for r, k in zip(recs, keys):
                    if k[1] is not None:
                        r.extra = {"key_schema": k[1]}
            if mixed is not None:
                archiver.process_many(recs[:mixed])
                raise BatchValidationError(
                    f"a Spark partition mixed {topic}-{part} with {topics[mixed] if topics else topic}-{pids[mixed]}")
            if transform is not None:
                mapped = transform.map_records(recs)
                if mapped is not recs:
                    archiver.note_dropped(dropped_offsets([r.offset for r in recs], [r.offset for r in mapped]))
                recs = mapped
            else:
                last = batch_last
                read += batch_read
            archiver.process_many(recs)
            del recs, values, keys, raw_values, raw_keys, headers
            gc.collect(1)
        rows = archiver.finish() if archiver else []
        if letters is not None and archiver is not None:
            # only what a committed range covers: a dead letter in the open tail is read again by the next batch
            rows = rows + letters.deliver(archiver.topic, archiver.partition, rows)
    except BaseException:
        if archiver is not None:
            archiver.abort()
        raise
    finally:
        if gc_was_enabled:
            gc.enable()
    out = [encode_result(r) for r in rows]
    if archiver is not None:
        out.append(encode_result(PartitionStatus(archiver.topic, archiver.partition, read, first, last,
                                                 getattr(store, "retries", 0),
                                                 letters.delivered if letters is not None else 0,
                                                 archiver.rotator.due_ms, archiver.columnar_records)))
    if out:
        yield pa.RecordBatch.from_pydict({"row": out})


def first_mixed(topics: list | None, parts: list, n: int) -> int | None:
    """Index of the first row of a batch from another topic-partition than row 0's, or None."""
    if (topics is None or topics.count(topics[0]) == n) and parts.count(parts[0]) == n:
        return None
    return next(i for i in range(n) if (topics is not None and topics[i] != topics[0]) or parts[i] != parts[0])
