"""Random access into Block-GZIP objects: the pure chunk planning (lakesink.objects.formats.blockgzip) and
read_records fetching only the index and the chunks a cut needs, counted at the store."""
from __future__ import annotations

import pytest

from lakesink import wiring
from lakesink.executor.readback import ArchivedObject, Cut, read_records
from lakesink.objects.formats.blockgzip import ChunkIndexEntry, parse_index, plan_chunk_reads
from lakesink.store import open_store
from support.archive_helpers import BASE_TS, CountingStore, archive, batch, config


def idx(*counts: int, size: int = 100) -> list[ChunkIndexEntry]:
    out, first, at = [], 0, 0
    for n in counts:
        out.append(ChunkIndexEntry(first, n, at, size, 1000))
        first, at = first + n, at + size
    return out


def test_plan_fetches_only_the_chunks_holding_the_positions_and_merges_adjacent_ones():
    index = idx(3, 3, 3, 3)
    assert plan_chunk_reads(index, []) == []
    (r,) = plan_chunk_reads(index, [4])
    assert (r.byte_start, r.byte_end, r.first_position, r.num_records) == (100, 199, 3, 3)
    (r,) = plan_chunk_reads(index, [5, 3, 6, 7])  # chunks 1 and 2: one GET
    assert (r.byte_start, r.byte_end, r.first_position, r.num_records, len(r.chunks)) == (100, 299, 3, 6, 2)
    a, b = plan_chunk_reads(index, [0, 11])
    assert (a.byte_start, a.byte_end, b.byte_start, b.byte_end) == (0, 99, 300, 399)
    assert (b.first_position, b.num_records) == (9, 3)
    with pytest.raises(ValueError, match="outside"):
        plan_chunk_reads(index, [12])


def test_plan_uses_record_positions_so_offset_gaps_do_not_matter():
    # first_record_offset with gaps; positions count records only
    index = [ChunkIndexEntry(10, 2, 0, 50, 9), ChunkIndexEntry(500, 2, 50, 60, 9)]
    (r,) = plan_chunk_reads(index, [2])
    assert (r.byte_start, r.byte_end, r.first_position) == (50, 109, 2)


def test_a_cut_inside_a_blockgzip_object_fetches_only_its_chunks(tmp_path):
    n = 400
    # small blocks: many chunks per object; one object holds all records
    cfg = config(tmp_path, "blockgzip", flush_size=str(n), blockgzip_block_size="512")
    offsets = list(range(100, 100 + n))
    tss = [BASE_TS + i for i in range(n)]
    values = [f"line {i} {'x' * (i % 37)} ✓".encode() for i in range(n)]
    (row,) = archive(cfg, [batch(values, offsets, tss, [0] * n)], 100, 100 + n)
    obj = ArchivedObject.from_row(row)
    base = open_store(wiring.store_settings(cfg))
    index = parse_index(base.read(obj.side("index")["key"]))
    assert len(index) > 10
    fmt = wiring.value_format(cfg)

    whole = CountingStore(base)
    got = read_records(whole, fmt, obj)
    assert [r.value for r in got] == values
    whole_value_bytes = obj.size_bytes or base.head(obj.object_key).size
    assert (obj.object_key, None) in whole.reads

    cut = CountingStore(base)
    got = read_records(cut, fmt, obj, cut=Cut(from_offset=300, to_offset=309))
    assert [r.offset for r in got] == list(range(300, 310))
    assert [r.value for r in got] == values[200:210]
    value_reads = [br for k, br in cut.reads if k == obj.object_key]
    assert value_reads and all(br is not None for br in value_reads)
    needed = plan_chunk_reads(index, range(200, 210))
    assert sum(b - a + 1 for a, b in value_reads) == sum(r.byte_end - r.byte_start + 1 for r in needed)
    assert sum(b - a + 1 for a, b in value_reads) < whole_value_bytes / 5

    by_time = CountingStore(base)
    got = read_records(by_time, fmt, obj, cut=Cut(from_ts=BASE_TS + 390))
    assert [r.value for r in got] == values[390:]
    assert all(br is not None for k, br in by_time.reads if k == obj.object_key)

    empty = CountingStore(base)
    assert read_records(empty, fmt, obj, cut=Cut(from_ts=BASE_TS + 10_000, to_ts=BASE_TS + 10_001)) == []
    assert all(k != obj.object_key for k, _ in empty.reads)
