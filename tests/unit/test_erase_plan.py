"""``lakesink erase``'s plan (issue #32): the manifest prunes the objects a predicate's bounds on topic, partition,
offset and timestamp rule out (ORs and NOTs that must not prune do not), only the files the predicate names are
read, and many objects are matched per DuckDB query -- with the same objects, offsets and counts as the plan that
reads everything. The archive is written with the format writers to a ``file://`` store and a local delta-rs
manifest (no broker, no S3)."""
from __future__ import annotations

import datetime as dt
import io
import uuid

import pytest

from lakesink import wiring
from lakesink.config import SinkConfig
from lakesink.driver.erase import erase
from lakesink.driver.erase_plan import object_condition, objects_table, plan, prune
from lakesink.errors import ArchiveQueryError, LakesinkError
from lakesink.executor.archive_tasks import ObjectReader
from lakesink.executor.erase_match import PREDICATE_COLUMNS, PredicateMatcher, referenced_columns
from lakesink.executor.readback import ArchivedObject
from lakesink.manifest.queries import RECORD_PREDICATE_HINT, where_predicate
from lakesink.manifest.rows import live_objects

TOPICS, PARTITIONS, PER_PARTITION, FLUSH = ("orders", "audit"), 3, 20, 5
BASE_TS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
#: offset o of partition p was written at BASE_TS + p * 100 s + o s
TS = lambda p, o: BASE_TS + p * 100_000 + o * 1000  # noqa: E731


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


# ------------------------------------------------------------------------------------------ bounds of a predicate

def _cond(where: str) -> str | None:
    return object_condition(where_predicate(where, hint=RECORD_PREDICATE_HINT))


@pytest.mark.parametrize("where", [
    "key = 'k1'", "value.customer = 'c3'", "exists(headers, h -> h.key = 'i')",
    "NOT partition = 0", "partition <> 0", "NOT offset BETWEEN 1 AND 5", "partition = 0 OR key = 'k1'",
    "key = 'x' OR offset > 3", "coalesce(partition, 0) = 0", "partition + 0 = 1", "offset > rand() * 10",
    "timestamp > current_timestamp()", "offset <=> 3", "offset IS NULL", "records.offset = 3", "value.offset = 3",
    "offset = partition", "CASE WHEN partition = 0 THEN true ELSE false END",
])
def test_predicates_that_bound_nothing_the_manifest_records_do_not_prune(where):
    assert _cond(where) is None


@pytest.mark.parametrize("where,cond", [
    ("partition = 3", "COALESCE((partition <= 3 AND partition >= 3), TRUE)"),
    ("3 < offset", "COALESCE((last_offset > 3), TRUE)"),
    ("offset <= 3", "COALESCE((first_offset <= 3), TRUE)"),
    ("topic = 'orders' AND key = 'k'", "COALESCE((topic <= 'orders' AND topic >= 'orders'), TRUE)"),
    ("partition = 1 OR NOT key = 'k'", None),  # one side of an OR bounds nothing: the OR prunes nothing
    ("(partition = 1 OR partition = 2) AND NOT key = 'k'",
     "COALESCE((partition <= 1 AND partition >= 1), TRUE) OR COALESCE((partition <= 2 AND partition >= 2), TRUE)"),
])
def test_bounds_become_a_condition_on_the_objects_span(where, cond):
    assert _cond(where) == cond


def _obj(topic: str, part: int, first: int, last: int, tmin: int | None, tmax: int | None) -> ArchivedObject:
    return ArchivedObject(topic, part, f"{topic}/{part}/{first}", "e", None, first, last, last - first + 1,
                          min_timestamp_ms=tmin, max_timestamp_ms=tmax)


OBJECTS = [_obj("orders", p, f, f + 9, TS(p, f), TS(p, f + 9)) for p in (0, 1) for f in (0, 10, 20)] + [
    _obj("audit", 0, 0, 9, None, None)]  # no timestamps in its row: a time bound cannot rule it out


@pytest.mark.parametrize("where,kept", [
    ("partition = 1", [3, 4, 5]),
    ("topic = 'audit'", [6]),
    ("topic IN ('audit', 'x') AND key = 'k'", [6]),
    ("offset BETWEEN 12 AND 25", [1, 2, 4, 5]),
    ("offset = 10", [1, 4]),
    ("offset IN (3, 29) AND partition = 0", [0, 2, 6]),
    ("offset IN (3, 29) AND partition = 0 AND topic = 'orders'", [0, 2]),
    ("offset >= 20 OR (partition = 0 AND offset < 10)", [0, 2, 5, 6]),
    ("partition = 0 AND offset BETWEEN 9 AND 10 AND key = 'k'", [0, 1, 6]),
    (f"timestamp >= '{_iso(TS(1, 15))}'", [4, 5, 6]),  # 1/10-1/19 holds 15; audit has no timestamps in its row
    (f"timestamp < TIMESTAMP '{_iso(TS(0, 10))}' - INTERVAL 1 SECOND", [0, 6]),
    (f"timestamp BETWEEN '{_iso(TS(0, 25))}' AND '{_iso(TS(1, 5))}' AND partition = 0", [2, 6]),
    ("offset > 100 OR timestamp < '2000-01-01'", [6]),
    ("offset = NULL", list(range(7))),  # unknown: kept (the records' evaluation finds nothing)
    ("partition = 'x'", list(range(7))),  # the condition fails to run: doubt prunes nothing
    ("NOT partition = 0", list(range(7))),
])
def test_prune_keeps_exactly_the_objects_that_can_hold_a_selected_record(where, kept):
    assert prune(OBJECTS, where_predicate(where, hint=RECORD_PREDICATE_HINT)) == kept


def test_the_objects_table_has_the_records_column_types():
    t = objects_table(OBJECTS[:1])
    assert str(t.schema.field("partition").type) == "int32" and str(t.schema.field("max_timestamp").type) == \
        "timestamp[us, tz=UTC]"
    assert t.column("max_timestamp").cast("int64").to_pylist() == [TS(0, 9) * 1000]


# ------------------------------------------------------------------------------------------ columns a predicate reads

@pytest.mark.parametrize("where,columns", [
    ("key = 'k1'", {"key"}),
    ("value.customer = 'c3'", {"value"}),
    ("value_bytes IS NULL", {"value_bytes"}),
    ("exists(headers, h -> h.key = 'i' AND h.value = '3')", {"headers"}),  # h.key / h.value: fields, not columns
    ("exists(headers, key -> key.key = 'i')", {"headers", "key"}),  # a lambda parameter named key: read too
    ("partition = 0 AND `offset` > 3 AND TIMESTAMP_TYPE = 'CreateTime'", {"partition", "offset", "timestamp_type"}),
    ("records.key = 'k1'", {"key"}),  # a qualified name: read
    ("value.key = 'k1'", {"value", "key"}),  # a struct field of that name: read too (never too few)
])
def test_referenced_columns_are_a_superset(where, columns):
    assert referenced_columns(where_predicate(where, hint=RECORD_PREDICATE_HINT)) == frozenset(columns)


# ------------------------------------------------------------------------------------------------- the archive

def _build(work) -> dict:
    from lakesink.manifest.rows import SideFile, object_row
    from lakesink.objects import formats
    from lakesink.objects.formats.base import RecordView
    from lakesink.objects.formats.metadata import MetadataFormat
    from lakesink.objects.records import SinkRecord
    from lakesink.store import open_store

    raw = {"name": "unit-erase-plan", "topics": ",".join(TOPICS), "format.class": "json", "flush.size": str(FLUSH),
           "s3.bucket.name": "bench", "store.url": f"file://{work}/store", "manifest.location": f"{work}/manifest",
           "kafka.bootstrap.servers": "localhost:9", "store.kafka.keys": "true", "store.kafka.headers": "true",
           "keys.format.class": "json", "headers.format.class": "json"}
    cfg = SinkConfig.from_dict(raw)
    store = open_store(wiring.store_settings(cfg))
    fmt = formats.create("json")
    views = {"value": (fmt, RecordView.VALUE, ".json"), "keys": (fmt, RecordView.KEYS, ".keys.json"),
             "headers": (fmt, RecordView.HEADERS, ".headers.json"),
             "metadata": (MetadataFormat(), RecordView.METADATA, ".metadata.avro")}
    rows = []
    for topic in TOPICS:
        for p in range(PARTITIONS):
            for first in range(0, PER_PARTITION, FLUSH):
                last = first + FLUSH - 1
                recs = [SinkRecord(topic, p, o, TS(p, o), f"k{p}-{o}".encode(),
                                   {"id": o, "customer": f"c{o % 7}", **({"vip": True} if o % 4 == 0 else {})},
                                   headers=(("i", str(o).encode()),)) for o in range(first, last + 1)]
                stem = f"topics/{topic}/partition={p}/{topic}+{p}+{first:010d}"
                written = {}
                for view, (f, rv, ext) in views.items():
                    out = io.BytesIO()
                    w = f.open_writer(out, rv)
                    w.write_many(recs)
                    w.close()
                    written[view] = (stem + ext, store.put_bytes(stem + ext, out.getvalue()))
                sides = tuple(SideFile(v, k, r.etag, r.version_id, r.size) for v, (k, r) in written.items()
                              if v != "value")
                key, value = written["value"]
                rows.append(object_row(topic, p, first, last, first_offset=first, last_offset=last,
                                       record_count=FLUSH, encoded_partition=f"partition={p}", object_key=key,
                                       object_uri=store.uri(key), side_files=sides, format="json",
                                       compression="none", size_bytes=value.size, etag=value.etag,
                                       version_id=value.version_id, min_timestamp_ms=TS(p, first),
                                       max_timestamp_ms=TS(p, last)))
    manifest = wiring.manifest(cfg)
    manifest.ensure()
    manifest.commit(cfg.name, 0, uuid.uuid4().hex, rows)
    return raw


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    work = tmp_path_factory.mktemp("erase-plan")
    raw = _build(work)
    cfg = SinkConfig.from_dict(raw)
    rows = sorted(live_objects(wiring.manifest(cfg).arrow(job=cfg.name).to_pylist()),
                  key=lambda r: (r["topic"], r["kafka_partition"], r["first_offset"]))
    return raw, work, rows


@pytest.fixture(scope="module")
def archive(built):
    raw, _work, rows = built
    return SinkConfig.from_dict(raw), rows


def _found(p) -> list[tuple]:
    return [(m.row["object_key"], m.offsets, m.records, m.keep, m.all_offsets, m.timestamps, m.types)
            for m in p.matched]


N_OBJECTS = len(TOPICS) * PARTITIONS * PER_PARTITION // FLUSH  # 24


@pytest.mark.parametrize("where,pruned", [
    ("key IN ('k1-3', 'k2-17')", 0),
    ("partition = 1 AND key IN ('k1-3', 'k1-17', 'k2-17')", 16),
    ("topic = 'audit' AND offset BETWEEN 4 AND 10 AND value.customer = 'c3'", 15),
    ("offset IN (0, 19) AND exists(headers, h -> h.value = '19')", 12),
    (f"timestamp >= '{_iso(TS(2, 12))}' AND CAST(key AS STRING) LIKE 'k2-1%'", 20),
    ("partition = 2 OR key = 'k0-1'", 0),  # an OR whose side bounds nothing prunes nothing
    ("NOT partition = 0 AND value.id = 6", 0),
    ("value.vip", 0),  # a field only some objects' values have
    ("offset > 100", N_OBJECTS - 1),  # every object ruled out: the first is read all the same (a bad predicate fails)
])
def test_the_pruned_plan_finds_what_reading_everything_finds(archive, where, pruned):
    cfg, rows = archive
    parts = wiring.task_parts(cfg)
    predicate = where_predicate(where, hint=RECORD_PREDICATE_HINT)
    fast = plan(parts, rows, predicate, where)
    full = plan(parts, rows, predicate, where, pruning=False)
    assert (fast.pruned, full.pruned) == (pruned, 0)
    assert fast.scanned_objects == N_OBJECTS - pruned and full.scanned_objects == N_OBJECTS
    assert _found(fast) == _found(full)
    # and what a matcher reading every column of every object finds, one object per query
    want = []
    with PredicateMatcher(predicate, where, PREDICATE_COLUMNS) as m:
        reader = ObjectReader(parts)
        for i, row in enumerate(rows):
            want += [(rows[h["index"]]["object_key"], h["offsets"], h["records"], h["keep"])
                     for h in m.match(reader, [(i, ArchivedObject.from_row(row))])]
    assert [f[:4] for f in _found(fast)] == want
    if "100" not in where:
        assert want, where  # each predicate selects something


def test_a_value_predicate_fetches_each_value_object_once(archive):
    """The predicate's `value` needs the values decoded and the batch their bytes: one fetch of the object gives
    both (it was two), and the matcher finds what it found."""
    cfg, rows = archive
    parts = wiring.task_parts(cfg)
    where = "value.id = 6"
    predicate = where_predicate(where, hint=RECORD_PREDICATE_HINT)
    reader = ObjectReader(parts)
    store_read, reads = reader.store.read, []

    def counted(key, *args, **kwargs):
        reads.append(key)
        return store_read(key, *args, **kwargs)

    reader.store.read = counted
    with PredicateMatcher(predicate, where, PREDICATE_COLUMNS) as m:
        found = [h["offsets"] for h in m.match(reader, [(i, ArchivedObject.from_row(r)) for i, r in enumerate(rows)])]
    values = [k for k in reads if k.endswith(".json") and k.count(".") == 1]
    assert len(values) == len(rows) and len(set(values)) == len(rows)
    assert found and found == [h.offsets for h in plan(parts, rows, predicate, where).matched]


def test_a_plan_reads_only_the_files_its_predicate_names(built, tmp_path):
    """A copy of the store without any value object or headers file: a predicate over keys (or offsets) still plans,
    and finds what it finds on the whole store; one over values or headers fails naming a missing file."""
    import shutil

    raw, work, rows = built
    copy = tmp_path / "store"
    shutil.copytree(work / "store", copy)
    for f in copy.rglob("*"):
        if f.is_file() and (f.name.endswith(".headers.json") or f.name.count(".") == 1):
            f.unlink()
    parts = wiring.task_parts(SinkConfig.from_dict({**raw, "store.url": f"file://{copy}"}))
    whole = wiring.task_parts(SinkConfig.from_dict(raw))
    for where in ("key IN ('k1-3', 'k0-19')", "offset = 7", "key = 'k1-3' AND timestamp_type = 'CreateTime'"):
        predicate = where_predicate(where)
        assert _found(plan(parts, rows, predicate, where)) == _found(plan(whole, rows, predicate, where))
        assert plan(parts, rows, predicate, where).matched
    for where in ("value.id = 3", "value_bytes IS NULL", "exists(headers, h -> h.value = '3')"):
        with pytest.raises(LakesinkError) as e:
            plan(parts, rows, where_predicate(where), where)
        assert ".json" in str(e.value), e.value


def test_a_bad_predicate_fails_as_before_even_when_the_manifest_prunes_nothing_or_everything(archive):
    cfg, _rows = archive
    for where, says in (("nope = 1", "nope"), ("offset + 1", "not a boolean"), ("partition = 0 AND nope = 1", "nope"),
                        ("offset > 100 AND nope = 1", "nope"), ("offset > 100 AND value.nope = 1", "nope")):
        with pytest.raises(ArchiveQueryError) as e:
            erase(cfg, where)
        assert says in str(e.value).lower(), e.value


def test_erase_reports_what_the_manifest_pruned(archive):
    cfg, _rows = archive
    rep = erase(cfg, "partition = 0 AND topic = 'orders' AND key = 'k0-7'")
    assert (rep.records, rep.pruned, rep.scanned_objects, rep.scanned_records) == (1, 20, 4, 20)
    assert [m.offsets for m in rep.matched] == [[7]]


class InProcessRunner:
    """A TaskRunner running each task in this process, one after the other (what matters here: the plan's tasks
    and how their results come back, not where they run; the real runners: tests/integration/test_erase.py)."""

    name = "in-process"

    def __init__(self, parallelism: int):
        self.n, self.tasks = parallelism, 0

    def parallelism(self) -> int:
        return self.n

    def setting(self, key: str) -> None:
        return None

    def run(self, fn, n, schema, on_done=None) -> list[str]:
        from lakesink.runners import first_column

        self.tasks += n
        return [s for i in range(n) for s in first_column(fn([i]))]


def test_a_plan_runs_as_tasks_and_starts_a_lazy_runner_only_for_more_than_one_task(archive):
    cfg, rows = archive
    parts = wiring.task_parts(cfg)
    where = "key IN ('k1-3', 'k2-17') OR value.id = 19"
    predicate = where_predicate(where)
    driver = _found(plan(parts, rows, predicate, where))
    runner = InProcessRunner(4)
    p = plan(parts, rows, predicate, where, runner=runner)
    assert _found(p) == driver and p.tasks == runner.tasks == 4  # objects spread over the runner's 4 slots
    started = []

    def lazy():
        started.append(runner)
        return runner

    assert _found(plan(parts, rows, predicate, where, runner=lazy)) == driver and started == []  # one task: here
    # 48 objects (each twice) are more than one task's worth (a task takes 128 MB, 4 MB an object): started
    doubled = plan(parts, rows + rows, predicate, where, runner=lazy)
    assert started == [runner] and doubled.tasks > 1 and len(doubled.matched) == 2 * len(driver)
