"""Record transforms on a real topic (broker, S3 endpoint, Spark, Delta): a SQL filter that also makes many records
of one (``unnest``), through both readers; the manifest's offsets are exact, dropped offsets outside every object
show in the ``gaps`` view, and a transform that fails names the record and commits nothing."""
from __future__ import annotations

import json

import pytest
from support.archive_checks import archived_values, base_config, check_chains, consume, manifest_rows, produce

from lakesink.config import SinkConfig
from lakesink.driver.sink import SinkJob
from lakesink.driver.sql import run_query
from lakesink.errors import BatchFailedError

# Heartbeats are dropped; every other record becomes one record per item of its "e" array.
SQL = ("SELECT kafka_offset, encode(unnest(from_json(json_extract(decode(value), '$.e'), '[\"VARCHAR\"]'))) "
       "AS value FROM records WHERE json_extract_string(decode(value), '$.t') <> 'hb'")

#: offset → value; flush.size 2 (files cut between Kafka records only)
RECORDS = [
    {"t": "a", "e": ["a", "b"]},   # 0: two records → file [0] of 2, commit [0, 0]
    {"t": "hb"},                   # 1: dropped
    {"t": "hb"},                   # 2: dropped  → a hole [1, 2] before the next file
    {"t": "a", "e": ["c"]},        # 3
    {"t": "a", "e": ["d"]},        # 4: file [3, 4], commit [1, 4]
    {"t": "hb"},                   # 5: dropped  → hole [5, 5]
    {"t": "a", "e": ["e", "f", "g"]},  # 6: three records, one group → file [6] of 3, commit [5, 6]
    {"t": "a", "e": ["h"]},        # 7
    {"t": "hb"},                   # 8: dropped inside file [7, 9]: the commit group's filtered row
    {"t": "a", "e": ["i"]},        # 9: file [7, 9] of 2, commit [7, 9]
    {"t": "hb"},                   # 10: dropped
    {"t": "a", "e": []},           # 11: no item: dropped → advance [10, 11]
]


#: docs/sql.md query 8 (the offset proof), for one job: filtered rows lie inside object spans and are left out
PROOF = """
WITH spans AS (
  SELECT job, topic, kafka_partition, first_offset AS s, last_offset AS e FROM objects
  UNION ALL
  SELECT job, topic, kafka_partition, start_offset, end_offset FROM gaps WHERE kind <> 'filtered'
)
SELECT c.next_offset, c.next_offset - min(spans.s) AS offsets_expected, sum(spans.e - spans.s + 1) AS offsets_accounted
FROM committed_offsets c
JOIN spans ON spans.job = c.job AND spans.topic = c.topic AND spans.kafka_partition = c.kafka_partition
WHERE c.job = '{job}'
GROUP BY c.job, c.topic, c.kafka_partition, c.next_offset
"""


@pytest.mark.parametrize("reader", ["direct", "spark"])
def test_filter_and_one_to_many(spark, kafka, s3, bucket, topic_name, reader):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, [json.dumps(r).encode() for r in RECORDS], partition_of=lambda i: 0, headers=False)
    raw = base_config(kafka, s3, bucket, topic_name, **{"flush.size": "2", "transforms.sql": SQL,
                                                        "kafka.reader": reader, "value.decoder": "string",
                                                        "format.class": "json"})
    cfg = SinkConfig.from_dict(raw)
    res = SinkJob(spark, cfg).run_batch(flush_tail=True)
    assert res.records == 9 and res.objects == 4
    rows = manifest_rows(spark, cfg)
    check_chains(rows, {(topic_name, 0): 12})
    got = sorted((r.kind, r.range_start, r.range_end, r.first_offset, r.last_offset, r.record_count) for r in rows)
    assert got == [("advance", 10, 11, None, None, 0), ("filtered", 8, 8, 8, 8, 1), ("object", 0, 0, 0, 0, 2),
                   ("object", 1, 4, 3, 4, 2), ("object", 5, 6, 6, 6, 3), ("object", 7, 9, 7, 9, 2)]
    assert archived_values(spark, cfg)[(topic_name, 0)] == list("abcdefghi")
    gaps = run_query(spark, cfg, f"SELECT start_offset, end_offset, offsets, kind FROM gaps WHERE job = '{cfg.name}' "
                                 f"ORDER BY start_offset", limit=None).rows
    # every dropped offset is a row of gaps: 8 (between records of file [7, 9]) too
    assert gaps == [(1, 2, 2, "unarchived"), (5, 5, 1, "unarchived"), (8, 8, 1, "filtered"), (10, 11, 2, "advance")]
    proof = run_query(spark, cfg, PROOF.replace("{job}", cfg.name), limit=None).rows
    assert proof == [(12, 12, 12)]
    if reader == "direct":
        restore_groups_whole(kafka, cfg, rows)


def restore_groups_whole(kafka, cfg, rows):
    """Restore commits its progress (the next source offset) only after the last record of a group sharing an
    offset: with 2 records per transaction, offset 6's three records go in one transaction (progress 7 after f
    would make a resumed restore skip g)."""
    import uuid

    from lakesink import wiring
    from lakesink.executor.readback import ArchivedObject
    from lakesink.executor.restore import restore_partition
    from lakesink.store import open_store

    dest = f"restored-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(dest, partitions=1)
    objs = sorted((ArchivedObject.from_row(r) for r in rows if r.kind == "object"), key=lambda o: o.first_offset)
    events = []
    res = restore_partition(f"r-{dest}", dest, 0, objs, open_store(wiring.store_settings(cfg)),
                            wiring.value_format(cfg), {"bootstrap.servers": kafka.bootstrap_servers},
                            keys_format=wiring.keys_format(cfg), headers_format=wiring.headers_format(cfg),
                            records_per_txn=2, on_event=lambda e, d: events.append((e, d.get("offset"))))
    assert res.produced == 9 and res.next_offset == 10
    assert [json.loads(v) for _k, v, *_rest in consume(kafka, dest)] == list("abcdefghi")
    begins = [o for e, o in events if e == "begin"]
    assert 6 in begins and begins.count(6) == 1  # e, f, g in one transaction


def test_a_failing_transform_names_the_record_and_commits_nothing(spark, kafka, s3, bucket, topic_name):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, [b'{"x": 1}', b'{"x": 2}', b"not json", b'{"x": 3}'], partition_of=lambda i: 0,
            headers=False)
    cfg = SinkConfig.from_dict(base_config(kafka, s3, bucket, topic_name, **{
        "flush.size": "1", "transforms.sql": "decode(value)::JSON->>'x' <> '2'"}))
    with pytest.raises(BatchFailedError) as ei:
        SinkJob(spark, cfg).run_batch(flush_tail=True)
    assert f"TransformError: record {topic_name}-0@2: transforms.sql failed" in str(ei.value)
    assert ei.value.exit_code == 6
    assert manifest_rows(spark, cfg) == []
