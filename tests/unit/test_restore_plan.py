"""The restore's pure parts: names derived from the restore, and the dry-run summary from manifest rows alone."""
from lakesink.executor.readback import ArchivedObject, Cut
from lakesink.executor.restore import RestoreSummary, dry_run, progress_group, transactional_id


def obj(first: int, last: int, count: int, tmin: int = 0, tmax: int = 0, size: int = 100) -> ArchivedObject:
    return ArchivedObject.from_row({
        "topic": "t", "kafka_partition": 1, "object_key": f"k{first}", "etag": "e", "version_id": None,
        "first_offset": first, "last_offset": last, "record_count": count, "size_bytes": size,
        "min_timestamp": tmin, "max_timestamp": tmax,
        "side_files": [{"view": "metadata", "key": f"k{first}.metadata.avro", "etag": "m", "version_id": None,
                        "size_bytes": 10}]})


OBJECTS = [obj(0, 9, 10, 1000, 1900), obj(10, 24, 10, 2000, 2900), obj(25, 34, 10, 3000, 3900)]


def test_names():
    # one group per destination cluster by default: every restore sees what earlier ones produced
    assert progress_group() == progress_group(None) == "lakesink-restore"
    assert progress_group("nightly") == "lakesink-restore-nightly"
    assert transactional_id("nightly", "orders", 3) == "lakesink-restore-nightly-orders-3"
    # keyed by the destination alone, and unable to collide with a named restore's id (':' is not in topic names)
    assert transactional_id(None, "orders", 3) == "lakesink-restore:orders:3"
    assert transactional_id(None, "nightly-orders", 3) != transactional_id("nightly", "orders", 3)


def test_dry_run_whole_archive():
    assert dry_run(OBJECTS) == RestoreSummary(objects=3, records=30, bytes=330, exact=True)


def test_dry_run_offset_cut_counts_contiguous_objects_exactly():
    assert dry_run(OBJECTS, Cut(from_offset=5, to_offset=30)) == RestoreSummary(3, 5 + 10 + 6, 330, exact=True)
    # a cut inside an object with offset gaps: its record count is an upper bound
    assert dry_run(OBJECTS, Cut(from_offset=15)) == RestoreSummary(2, 20, 220, exact=False)
    assert dry_run(OBJECTS, Cut(from_offset=5, to_offset=9)) == RestoreSummary(1, 5, 110, exact=True)


def test_dry_run_time_cut_from_manifest_bounds():
    assert dry_run(OBJECTS, Cut(from_ts=2000, to_ts=2900)) == RestoreSummary(1, 10, 110, exact=True)
    assert dry_run(OBJECTS, Cut(from_ts=2500)) == RestoreSummary(2, 20, 220, exact=False)
    assert dry_run(OBJECTS, Cut(from_ts=5000)) == RestoreSummary(0, 0, 0, exact=True)


def test_restore_producers_get_no_consumer_properties():
    """librdkafka warns (CONFWARN, once per property and producer) about consumer properties; the job's client
    settings carry isolation.level for its readers, so each restore worker used to print one."""
    import logging

    from confluent_kafka import Producer

    from lakesink import wiring
    from lakesink.executor.restore import transactional_producer_config

    client = wiring.librdkafka_config({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "PLAINTEXT"})
    assert client["isolation.level"] == "read_committed"
    conf = transactional_producer_config(client, "lakesink-restore-x-0")
    assert "isolation.level" not in conf and conf["bootstrap.servers"] == "127.0.0.1:1"
    assert conf["security.protocol"] == "PLAINTEXT"
    assert conf["transactional.id"] == "lakesink-restore-x-0" and conf["enable.idempotence"] is True
    # failed deliveries only call back into Python (tests/integration/test_restore_worker.py: a refused record)
    assert conf["delivery.report.only.error"] is True
    assert transactional_producer_config({**client, "delivery.report.only.error": False}, "t")[
        "delivery.report.only.error"] is False

    class Collect(logging.Handler):
        def __init__(self):
            super().__init__()
            self.lines: list[str] = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    for given, warned in ((client, True), (conf, False)):
        log = logging.getLogger(f"test-confwarn-{warned}")
        handler = Collect()
        log.addHandler(handler)
        log.setLevel(logging.DEBUG)
        p = Producer({**given, "logger": log})
        p.poll(0.2)
        p.flush(0)
        assert any("isolation.level" in line for line in handler.lines) is warned, handler.lines


def test_task_groups_bundle_partitions_by_bytes_for_the_task_slots():
    from lakesink.driver.restore import PARTITION_COST_BYTES, TASKS_PER_SLOT, task_groups

    # 64 equal partitions on 2 slots: 8 tasks of 8, every partition once, each task's in index order
    groups = task_groups([10 << 20] * 64, 2)
    assert len(groups) == 2 * TASKS_PER_SLOT and sorted(i for g in groups for i in g) == list(range(64))
    assert {len(g) for g in groups} == {8} and all(g == sorted(g) for g in groups)
    # fewer partitions than tasks: one each (as before bundling); no partitions: no task
    assert task_groups([5, 1, 3], 4) == [[0], [2], [1]]
    assert task_groups([], 4) == []
    # unequal sizes: the largest first, each to the lightest task, so the bytes per task stay close
    sizes = [100 << 20, 60 << 20, 50 << 20, 40 << 20, 10 << 20, 0]
    groups = task_groups(sizes, 1)
    assert len(groups) == 4 and sorted(i for g in groups for i in g) == list(range(6))
    loads = sorted(sum(sizes[i] + PARTITION_COST_BYTES for i in g) for g in groups)
    assert groups[0] == [0] and loads[-1] == 100 * 2**20 + PARTITION_COST_BYTES
