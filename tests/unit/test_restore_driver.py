"""The restore driver's pure parts (no Spark, no Kafka): destination mapping, names, times, the --where error line,
the CLI's --topic-map parsing and the text/JSON rendering of a report."""
from __future__ import annotations

import io
import json

import pytest

from lakesink.cli.output import JsonOutput, RestoreResult, TextOutput
from lakesink.cli.restore import parse_topic_map
from lakesink.config import SinkConfig
from lakesink.driver.archive import query_error_line
from lakesink.driver.restore import (PartitionRestore, RestoreReport, destination_topic, overlap_refusal, parse_time,
                                     run_failure, unselected_spans)
from lakesink.executor.coverage import Coverage, SourceCoverage
from lakesink.errors import InvalidArgumentError, RestoreRefusedError
from lakesink.executor.readback import Cut


def cfg() -> SinkConfig:
    return SinkConfig.from_dict({"name": "orders-archive", "topics": "orders", "format.class": "json",
                                 "flush.size": "3", "s3.bucket.name": "bkt", "manifest.location": "/tmp/m",
                                 "kafka.bootstrap.servers": "localhost:9"})


def test_topic_map_regex_and_replacement():
    assert parse_topic_map(r"(.*)=copy_of_\1") == ("(.*)", r"copy_of_\1")
    assert parse_topic_map("a=b=c") == ("a=b", "c")
    assert destination_topic("orders", None, ("(.*)", r"copy_of_\1")) == "copy_of_orders"
    assert destination_topic("eu.orders", None, (r"eu\.(?P<t>.*)", r"us.\g<t>")) == "us.orders"
    assert destination_topic("orders", "x", None) == "x"
    for bad in ("noequals", "=x", "x="):
        with pytest.raises(InvalidArgumentError):
            parse_topic_map(bad)
    with pytest.raises(RestoreRefusedError, match="does not match source topic 'orders'"):
        destination_topic("orders", None, ("pay.*", "x"))
    with pytest.raises(InvalidArgumentError, match="regex"):
        destination_topic("orders", None, ("(", "x"))


def _obj(key: str, first: int, last: int, partition: int = 0):
    from lakesink.executor.readback import ArchivedObject

    return ArchivedObject.from_row({"topic": "orders", "kafka_partition": partition, "object_key": key, "etag": "e",
                                    "version_id": None, "first_offset": first, "last_offset": last,
                                    "record_count": last - first + 1, "size_bytes": 1, "side_files": []})


def test_unselected_spans_are_the_objects_a_where_left_out():
    every = [_obj("a", 0, 9), _obj("b", 10, 19), _obj("c", 20, 29), _obj("d", 0, 4, partition=1)]
    assert unselected_spans([]) == {}
    left_out = [every[0], every[2], every[3]]
    assert unselected_spans(left_out) == {("orders", 0): [(0, 9), (20, 29)], ("orders", 1): [(0, 4)]}


def test_overlap_refusal_names_the_earlier_restore_and_the_offsets():
    objs = [_obj("a", 0, 9), _obj("b", 10, 19)]
    part = PartitionRestore("orders", 0, "copy", 0, 2, 20, 2)
    clean = Coverage({("orders", 0): SourceCoverage([(0, 19, None, None)], [])})
    # what the own group recorded exactly is skipped by the workers, not refused
    assert overlap_refusal(part, objs, Cut(), clean, {}, "lakesink-restore") is None
    partial = Coverage({("orders", 0): SourceCoverage([], [(5, 12)])})
    why = overlap_refusal(part, objs, Cut(), partial, {}, "lakesink-restore")
    assert "offsets 5-12 of orders-0 may already be in copy-0" in why and "--again" in why
    # outside the selection's offsets (cut at 13..): no conflict
    assert overlap_refusal(part, objs, Cut(from_offset=13), partial, {}, "lakesink-restore") is None
    # another group's progress, exact or not, refuses and names it
    why = overlap_refusal(part, objs, Cut(), Coverage(), {"lakesink-restore-nightly": clean}, "lakesink-restore")
    assert "by the restore recorded in group 'lakesink-restore-nightly'" in why
    # another source partition's progress in the same destination is no conflict
    other = Coverage({("payments", 0): SourceCoverage([(0, 99, None, None)], [(0, 99)])})
    assert overlap_refusal(part, objs, Cut(), other, {"g": other}, "lakesink-restore") is None


def test_a_fenced_task_is_a_fenced_restore_exit_4():
    from lakesink.errors import EXIT_FENCED, RestoreError, RestoreFencedError

    e = run_failure("RestoreFencedError: restore into copy-0: commit: fenced by a newer producer", None)
    assert isinstance(e, RestoreFencedError) and e.exit_code == EXIT_FENCED == 4
    assert str(e).startswith("restore stopped: restore into copy-0: commit: fenced by a newer producer")
    other = run_failure("RestoreProduceError: copy-0: 3 record(s) not delivered", "nightly")
    assert type(other) is RestoreError and other.exit_code == 1 and "--name nightly" in str(other)


def test_parse_time():
    assert parse_time("1970-01-01T00:00:01Z", "from_time") == 1000
    assert parse_time("1970-01-01T00:00:01", "from_time") == 1000  # no zone: UTC
    assert parse_time("1970-01-01T01:00:01+01:00", "from_time") == 1000
    assert parse_time(None, "x") is None and parse_time(5, "x") == 5
    with pytest.raises(InvalidArgumentError, match="from_time 'yesterday'"):
        parse_time("yesterday", "from_time")


def test_query_error_line_keeps_the_useful_line():
    e = Exception("[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `nope` "
                  "cannot be resolved. Did you mean one of the following? [`job`, `topic`]. SQLSTATE: 42703;\n"
                  "'Filter ('nope = 1)\n+- Relation [job#1]")
    assert query_error_line(e) == ("[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter "
                                   "with name `nope` cannot be resolved. Did you mean one of the following? "
                                   "[`job`, `topic`].")
    e = Exception("\n[PARSE_SYNTAX_ERROR] Syntax error at or near 'AND': end of input. SQLSTATE: 42601 (line 1, pos 9)"
                  "\n\n== SQL ==\ntopic = AND\n---------^^^\n")
    assert query_error_line(e) == "[PARSE_SYNTAX_ERROR] Syntax error at or near 'AND': end of input."


def report(dry: bool) -> RestoreReport:
    return RestoreReport("r1", "lakesink-restore-r1", dry, [
        PartitionRestore("orders", 0, "copy", 0, 2, 10, 300, True, *(() if dry else (4, 6, 1, 6, 10))),
        PartitionRestore("orders", 1, "copy", 1, 1, 5, 100, False)], seconds=1.5)


def test_text_and_json_rendering():
    out = io.StringIO()
    TextOutput(out=out).render(RestoreResult(report(True)))
    text = out.getvalue().splitlines()
    assert text[0].split() == ["source", "destination", "objects", "records", "bytes"]
    assert text[1].split() == ["orders-0", "copy-0", "2", "10", "300"]
    assert text[2].split() == ["orders-1", "copy-1", "1", "5", "(at", "most)", "100"]
    assert text[-1] == "dry run of restore 'r1': would read 3 object(s), at most 15 record(s), 400 bytes, into 2 partition(s)"
    out = io.StringIO()
    TextOutput(out=out).render(RestoreResult(report(False)))
    assert out.getvalue().splitlines()[1].split() == ["orders-0", "copy-0", "2", "10", "300", "4", "6", "6", "10"]
    out = io.StringIO()
    JsonOutput(out=out).render(RestoreResult(report(False)))
    doc = json.loads(out.getvalue())
    assert (doc["name"], doc["produced"], doc["skipped"], doc["records"], doc["records_exact"]) == ("r1", 4, 6, 15, False)
    assert doc["partitions"][0]["topic"] == "copy" and doc["partitions"][0]["resumed_from"] == 6


def obj(topic: str, part: int, first: int, last: int) -> "ArchivedObject":
    from lakesink.executor.readback import ArchivedObject

    return ArchivedObject(topic, part, f"{topic}+{part}+{first}", "e", None, first, last, last - first + 1,
                          size_bytes=10)


def test_plan_partitions_maps_sources_and_refuses_two_onto_one():
    from lakesink.driver.restore import plan_partitions

    objs = [obj("a", 1, 3, 5), obj("a", 0, 0, 2), obj("a", 0, 3, 5), obj("b", 0, 0, 9)]
    planned = plan_partitions(objs, None, (r"(.*)", r"copy_of_\1"), Cut(from_offset=4))
    assert [(p.source_topic, p.source_partition, p.topic, p.partition, p.objects, p.records) for p, _ in planned] == \
           [("a", 0, "copy_of_a", 0, 1, 2), ("a", 1, "copy_of_a", 1, 1, 2), ("b", 0, "copy_of_b", 0, 1, 6)]
    assert [o.first_offset for o in planned[0][1]] == [3]
    with pytest.raises(RestoreRefusedError, match="a-0 and b-0 would both be restored to x-0"):
        plan_partitions(objs, "x", None, Cut())
