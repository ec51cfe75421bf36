"""read_archive's tasks (lakesink.driver.archive.pack_objects): objects packed as Spark's file sources pack files,
in order, never split; object_bytes counts the side files."""
from __future__ import annotations

from lakesink.driver.archive import MAX_PARTITION_BYTES, OPEN_COST_BYTES, object_bytes, pack_objects
from lakesink.executor.readback import ArchivedObject

MB = 1024 * 1024


def test_small_objects_share_tasks_spread_over_the_parallelism():
    # 20 objects of 11 MB on 2 cores: total (each with its 4 MB open cost) / 2 = 150 MB > 128 MB, so the limit is
    # 128 MB: a task closes when the next object's bytes would pass it (8 objects: 8 x 15 = 120, + 11 > 128)
    tasks = pack_objects([11 * MB] * 20, parallelism=2)
    assert [i for t in tasks for i in t] == list(range(20))  # every object once, in order
    assert [len(t) for t in tasks] == [8, 8, 4]
    assert all((len(t) - 1) * (11 * MB + OPEN_COST_BYTES) + 11 * MB <= MAX_PARTITION_BYTES for t in tasks)


def test_more_cores_give_more_tasks_down_to_one_object_each():
    assert [len(t) for t in pack_objects([11 * MB] * 20, parallelism=8)] == [2] * 10  # limit 300 / 8 = 37.5 MB
    assert pack_objects([11 * MB] * 20, parallelism=64) == [[i] for i in range(20)]


def test_an_object_over_the_limit_is_a_task_of_its_own():
    assert pack_objects([1 * MB, 500 * MB, 1 * MB, 1 * MB], parallelism=1) == [[0], [1], [2, 3]]


def test_session_settings_and_edge_cases():
    assert pack_objects([]) == []
    assert pack_objects([0, 0, 0], max_partition_bytes=10, open_cost_bytes=4, parallelism=1) == [[0, 1, 2]]
    assert pack_objects([3, 3, 3], max_partition_bytes=10, open_cost_bytes=4, parallelism=1) == [[0, 1], [2]]
    assert pack_objects([5] * 4, max_partition_bytes=1000, open_cost_bytes=0, parallelism=4) == [[0], [1], [2], [3]]


def test_object_bytes_counts_value_object_and_side_files():
    obj = ArchivedObject.from_row({
        "topic": "t", "kafka_partition": 0, "object_key": "k", "etag": "e", "version_id": None, "first_offset": 0,
        "last_offset": 9, "record_count": 10, "size_bytes": 1000,
        "side_files": [{"view": "keys", "key": "k.keys.avro", "etag": "x", "version_id": None, "size_bytes": 30},
                       {"view": "headers", "key": "k.headers.avro", "etag": "y", "version_id": None,
                        "size_bytes": None}]})
    assert object_bytes(obj) == 1030
