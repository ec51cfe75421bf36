"""Avro objects are byte-identical on replay: the sync marker comes from the object key (issue #14 item 7)."""
from __future__ import annotations

import io

import fastavro
import pytest

from lakesink.errors import InvalidArgumentError
from lakesink.objects.formats import create
from lakesink.objects.formats.avro import sync_marker_for
from lakesink.objects.formats.base import RecordView
from lakesink.objects.records import SinkRecord
from lakesink.schemas.avro import value_schema

SCHEMA = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}, {"name": "s", "type": "string"}]}


def write(fmt, key: str | None, n: int = 50) -> bytes:
    out = io.BytesIO()
    w = fmt.open_object_writer(out, RecordView.VALUE, key) if key is not None else fmt.open_writer(out)
    vs = value_schema(SCHEMA)
    for i in range(n):
        w.write(SinkRecord("t", 0, i, 1700000000000 + i, b"k", {"a": i, "s": "x" * i}, (), vs, None))
    w.close()
    return out.getvalue()


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_same_key_same_bytes_and_the_file_reads_back(codec):
    fmt = create("avro", codec=codec, sync_interval=200)  # several blocks: the marker repeats after each
    key = "topics/t/partition=0/t+0+0000000000.avro"
    a, b = write(fmt, key), write(fmt, key)
    assert a == b
    assert a.count(sync_marker_for(key)) >= 3
    assert [r["a"] for r in fastavro.reader(io.BytesIO(a))] == list(range(50))
    other = write(fmt, "topics/t/partition=0/t+0+0000000050.avro")
    assert other != a and other.replace(sync_marker_for("topics/t/partition=0/t+0+0000000050.avro"),
                                        sync_marker_for(key)) == a


def test_without_a_key_the_marker_is_random_as_in_avro_writers():
    fmt = create("avro")
    assert write(fmt, None) != write(fmt, None)


def test_marker_is_16_bytes_of_the_key_and_checked():
    assert len(sync_marker_for("k")) == 16 and sync_marker_for("k") != sync_marker_for("k2")
    with pytest.raises(InvalidArgumentError, match="16 bytes"):
        create("avro").open_writer(io.BytesIO(), sync_marker=b"short")
