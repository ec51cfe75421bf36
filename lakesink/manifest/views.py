"""SQL views over the manifest: the names users query in ``lakesink sql`` and notebooks.

Every view reads the temp view :data:`MANIFEST` (the manifest table as registered by
:func:`lakesink.driver.sql.register_views`); ``lag`` also reads :data:`END_OFFSETS`, the broker's offsets at
query time (topic, kafka_partition, earliest_offset, end_offset). The SQL is plain Spark SQL so it can be
copied into a Databricks SQL editor over the same Delta table (the DuckDB route runs it transpiled by sqlglot, so
it keeps to functions both engines have) (add ``WHERE job = '...'`` there: several jobs may
share one manifest, and :data:`MANIFEST` as registered holds the config's job's rows only, unless ``--all-jobs``).

* ``committed_offsets``: per job/topic/partition the next offset to archive and the last commit time.
* ``objects``: one row per committed object, with its URI.
* ``schema_history``: per job/topic and value schema, the offsets, times and objects it covers.
* ``gaps``: every committed offset range that holds no archived record, with the reason: the ``advance`` and
  ``skipped`` rows (their ``note``), and the parts of an object row's commit range outside every object's
  ``[first_offset, last_offset]`` (transaction markers, compaction, records a transform dropped, dead letters).
  Together with ``objects`` it is the offset proof: every offset below ``next_offset`` is in exactly one of them.
  Besides those ranges, ``filtered`` rows: the offsets a transform dropped *inside* objects' spans, one row per
  commit group (first and last such offset, ``offsets`` = how many, the runs in ``reason``). They lie inside
  object spans, so the offset proof leaves them out. ``deadletter`` rows (records sent to
  ``errors.deadletterqueue.topic.name``) are notes on offsets inside those ranges, not ranges of their own: query
  them as ``manifest WHERE kind = 'deadletter'``.
* ``erasures``: one row per ``lakesink expire`` run (``action`` = ``expired``) and per ``lakesink erase`` run
  (``action`` = ``erased``): the job, its criterion (``predicate``: the age limit and the cut-off time, or the
  erase's ``--where``), run id, commit time, how many objects it removed (expire) or rewrote (erase) and how many
  records it removed, the topics and the smallest and largest offset. Expired objects leave the ``objects`` view;
  their offsets are ``gaps`` rows of kind ``expired`` (reason ``expired: ...``), so the offset proof still sums.
  An erased object stays in ``objects`` (rewritten, same key and span, fewer records); its erased offsets are
  ``gaps`` rows of kind ``erased`` (``offsets`` = how many; reason ``erased N records at offsets ... where ...``),
  notes inside the object's span like ``filtered`` rows, so the offset proof leaves them out too. ``erasing``
  rows (an erase's intent) are in no view.
* ``lag``: committed offsets against the broker's end offsets, in records and (bounded above) in time.
* ``metrics``: one row per committed sink batch (records read and archived, bytes, objects, partitions, phase
  seconds): the metrics table next to the manifest (:mod:`lakesink.manifest.metrics`), registered as is.
* ``consumer_groups``: the committed offsets of the groups ``consumer.groups`` / ``consumer.groups.regex`` name,
  one row per group, partition and observation (:mod:`lakesink.manifest.groups`), registered as is.
"""
from __future__ import annotations

MANIFEST = "manifest"
END_OFFSETS = "end_offsets"
#: The per-batch metrics table (``metrics.location``), registered under this name beside the views.
METRICS = "metrics"
#: The consumer-groups table (``<manifest>_groups``), registered under this name beside the views.
CONSUMER_GROUPS = "consumer_groups"

#: Why an uncovered part of an object's commit range holds no record.
UNARCHIVED_REASON = "no archived record in this part of a committed range (transaction markers, compaction, " \
                    "records a transform dropped, or dead letters)"

COMMITTED_OFFSETS = f"""
SELECT job, topic, kafka_partition,
       max(range_end) + 1 AS next_offset,
       max(committed_at) AS last_commit_at,
       max(batch_id) AS last_batch_id,
       sum(CASE WHEN kind = 'object' THEN 1 ELSE 0 END) AS objects,
       sum(CASE WHEN kind = 'object' THEN record_count ELSE 0 END) AS records
FROM {MANIFEST}
GROUP BY job, topic, kafka_partition
"""

#: The manifest's live objects as a ``FROM`` clause: its rows (aliased ``m``) that no tombstone (an ``expired`` or
#: ``erased`` row of the same job, topic, partition, key and ETag) supersedes, to be completed by
#: ``WHERE m.kind = 'object'`` (:data:`LIVE_OBJECT`): the SQL form of :func:`lakesink.manifest.rows.live_objects`.
#: An anti join, not ``NOT EXISTS``: DuckDB runs that correlated subquery as a grouping of every row's key (0.1 s
#: of CPU at 100k rows, per query reading ``objects``); both engines run the anti join as one hash join, and only
#: ``m``'s columns are in scope after it (an unqualified column is the manifest row's).
LIVE_OBJECTS = f"""{MANIFEST} m LEFT ANTI JOIN {MANIFEST} t
  ON t.kind IN ('expired', 'erased') AND t.job = m.job AND t.topic = m.topic
    AND t.kafka_partition = m.kafka_partition AND t.object_key = m.object_key
    AND coalesce(t.etag, '') = coalesce(m.etag, '')"""
#: The condition completing :data:`LIVE_OBJECTS`.
LIVE_OBJECT = "m.kind = 'object'"

OBJECTS = f"""
SELECT job, topic, kafka_partition, first_offset, last_offset, record_count, encoded_partition,
       object_uri AS uri, object_key, format, compression, size_bytes, etag, version_id,
       min_timestamp, max_timestamp, schema_subject, schema_version, schema_id,
       range_start, range_end, batch_id, committed_at
FROM {LIVE_OBJECTS}
WHERE {LIVE_OBJECT}
"""

# One row per expire or erase run: its criterion is an expired row's note after "expired: ", an erased row's
# after " where " (its offsets come before it: lakesink.manifest.rows.erase_note).
ERASURES = f"""
WITH marked AS (
  SELECT job, kind, run_id, committed_at, record_count, topic, first_offset, last_offset,
         CASE WHEN kind = 'erased' THEN substring(note, instr(note, ' where ') + 7)
              ELSE substring(note, length(kind) + 3) END AS predicate
  FROM {MANIFEST}
  WHERE kind IN ('expired', 'erased')
)
SELECT job, kind AS action, predicate, run_id,
       min(committed_at) AS committed_at, count(*) AS objects, sum(record_count) AS records,
       sort_array(collect_set(topic)) AS topics, min(first_offset) AS min_offset, max(last_offset) AS max_offset
FROM marked
GROUP BY job, kind, predicate, run_id
"""

SCHEMA_HISTORY = f"""
SELECT job, topic, schema_subject, schema_version, schema_id, schema_fingerprint,
       min(first_offset) AS first_offset, max(last_offset) AS last_offset,
       min(min_timestamp) AS min_timestamp, max(max_timestamp) AS max_timestamp,
       min(committed_at) AS first_committed_at,
       count(*) AS objects, sum(record_count) AS records,
       sort_array(collect_set(kafka_partition)) AS partitions
FROM {MANIFEST}
WHERE kind = 'object'
GROUP BY job, topic, schema_subject, schema_version, schema_id, schema_fingerprint
"""

# Uncovered sub-ranges of object commit groups: objects of one group (job, topic, partition, range_start) sorted
# by first offset; a hole is where an object starts after everything before it ended (or after range_start), and
# after the last object's end up to range_end.
GAPS = f"""
WITH objs AS (
  SELECT job, topic, kafka_partition, range_start, range_end, first_offset, last_offset, batch_id, committed_at,
         max(last_offset) OVER (PARTITION BY job, topic, kafka_partition, range_start
                                ORDER BY first_offset, last_offset
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS covered_to
  FROM {MANIFEST} WHERE kind = 'object'
),
inner_holes AS (
  SELECT job, topic, kafka_partition, coalesce(covered_to + 1, range_start) AS start_offset,
         first_offset - 1 AS end_offset, batch_id, committed_at
  FROM objs WHERE first_offset > coalesce(covered_to + 1, range_start)
),
tail_holes AS (
  SELECT job, topic, kafka_partition, max(last_offset) + 1 AS start_offset, max(range_end) AS end_offset,
         max(batch_id) AS batch_id, max(committed_at) AS committed_at
  FROM objs GROUP BY job, topic, kafka_partition, range_start
  HAVING max(last_offset) < max(range_end)
)
SELECT job, topic, kafka_partition, range_start AS start_offset, range_end AS end_offset,
       CASE WHEN kind IN ('filtered', 'erased') THEN record_count ELSE range_end - range_start + 1 END AS offsets,
       kind, coalesce(note, kind) AS reason, batch_id, committed_at
FROM {MANIFEST} WHERE kind NOT IN ('object', 'deadletter', 'erasing')
UNION ALL
SELECT job, topic, kafka_partition, start_offset, end_offset, end_offset - start_offset + 1 AS offsets,
       'unarchived' AS kind, '{UNARCHIVED_REASON}' AS reason, batch_id, committed_at
FROM inner_holes
UNION ALL
SELECT job, topic, kafka_partition, start_offset, end_offset, end_offset - start_offset + 1 AS offsets,
       'unarchived' AS kind, '{UNARCHIVED_REASON}' AS reason, batch_id, committed_at
FROM tail_holes
"""

# lag_seconds is an upper bound: the oldest record not yet archived is newer than the newest archived one.
LAG = f"""
WITH last_ts AS (
  SELECT job, topic, kafka_partition, max(max_timestamp) AS last_archived_timestamp
  FROM {MANIFEST} WHERE kind = 'object' GROUP BY job, topic, kafka_partition
)
SELECT e.job, e.topic, e.kafka_partition,
       c.next_offset AS committed_offset, e.earliest_offset, e.end_offset,
       e.end_offset - greatest(coalesce(c.next_offset, e.earliest_offset), e.earliest_offset) AS lag_records,
       c.last_commit_at, t.last_archived_timestamp,
       CASE WHEN e.end_offset <= coalesce(c.next_offset, e.earliest_offset) THEN 0
            WHEN t.last_archived_timestamp IS NULL THEN NULL
            ELSE unix_seconds(current_timestamp()) - unix_seconds(t.last_archived_timestamp) END AS lag_seconds
FROM {END_OFFSETS} e
LEFT JOIN committed_offsets c ON c.job = e.job AND c.topic = e.topic AND c.kafka_partition = e.kafka_partition
LEFT JOIN last_ts t ON t.job = e.job AND t.topic = e.topic AND t.kafka_partition = e.kafka_partition
"""

#: View name → SQL, in dependency order (``lag`` reads ``committed_offsets``).
VIEWS: dict[str, str] = {
    "committed_offsets": COMMITTED_OFFSETS,
    "objects": OBJECTS,
    "schema_history": SCHEMA_HISTORY,
    "gaps": GAPS,
    "erasures": ERASURES,
    "lag": LAG,
}

#: Views that need the broker (the ``end_offsets`` view).
BROKER_VIEWS = frozenset({"lag"})

#: Columns of the ``end_offsets`` view, in order.
END_OFFSET_COLUMNS = ("job", "topic", "kafka_partition", "earliest_offset", "end_offset")


def needs_broker(query: str) -> bool:
    """Whether ``query`` names a view that reads the broker's offsets (a word match, so a column called
    ``lag_records`` in another view does not count)."""
    import re

    return any(re.search(rf"(?<![\w.`]){name}(?![\w`])", query, re.I) for name in (*BROKER_VIEWS, END_OFFSETS))
