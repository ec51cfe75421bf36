"""The manifest DDL shipped in schemas/ is the one the code creates."""
from pathlib import Path

from lakesink.manifest import COLUMN_NAMES, ddl

ROOT = Path(__file__).resolve().parents[2]


def test_schemas_manifest_sql_matches_code():
    text = (ROOT / "schemas" / "manifest.sql").read_text()
    assert ddl("lakesink.manifest") + ";\n" in text, "regenerate: python -c 'from lakesink.manifest import write_ddl_file; write_ddl_file(\"schemas/manifest.sql\")'"


def test_path_locations_use_delta_path_syntax():
    assert ddl("s3a://b/manifest").startswith("CREATE TABLE IF NOT EXISTS delta.`s3a://b/manifest`")
    assert ddl("/tmp/m").startswith("CREATE TABLE IF NOT EXISTS delta.`/tmp/m`")
    assert ddl("db.manifest").startswith("CREATE TABLE IF NOT EXISTS db.manifest (")


def test_manifest_has_the_columns_the_issue_names():
    required = {"job", "topic", "kafka_partition", "first_offset", "last_offset", "record_count",
                "encoded_partition", "object_key", "object_uri", "keys_key", "headers_key", "format",
                "compression", "size_bytes", "etag", "version_id", "min_timestamp", "max_timestamp",
                "schema_subject", "schema_id", "schema_version", "schema_fingerprint", "batch_id", "run_id",
                "committed_at", "range_start", "range_end", "kind", "kafka_cluster_id", "topic_id"}
    assert required <= set(COLUMN_NAMES)


def test_row_dataclass_fields_are_the_table_columns_in_order():
    import dataclasses

    from lakesink.manifest import COLUMNS, ManifestRow, SideFile

    assert [f.name for f in dataclasses.fields(ManifestRow)] == COLUMN_NAMES
    side_type = {name: sql for name, sql, _nullable, _comment in COLUMNS}["side_files"]
    assert side_type == "ARRAY<STRUCT<" + ", ".join(
        f"{f.name}: {'BIGINT' if f.name == 'size_bytes' else 'STRING'}" for f in dataclasses.fields(SideFile)) + ">>"


def test_each_row_kind_is_built_in_one_place_and_round_trips_through_json():
    import datetime as dt

    from lakesink.manifest import ManifestRow, SideFile, advance_row, object_row, skipped_row

    side = (SideFile("keys", "t/p/t+0+0.keys.json", "e1", None, 10), SideFile("index", "t/p/t+0+0.index.json",
                                                                                None, None, 3))
    obj = object_row("t", 0, 0, 9, first_offset=0, last_offset=9, record_count=10, encoded_partition="partition=0",
                     object_key="t/p/t+0+0.json", object_uri="s3://b/t/p/t+0+0.json", side_files=side, format="json",
                     compression="none", size_bytes=100, etag="e0", version_id=None,
                     min_timestamp_ms=1_700_000_000_123, max_timestamp_ms=1_700_000_000_999, kafka_cluster_id="c",
                     topic_id="tid")
    assert (obj.kind, obj.keys_key, obj.headers_key) == ("object", "t/p/t+0+0.keys.json", None)
    assert obj.min_timestamp == dt.datetime(2023, 11, 14, 22, 13, 20, 123000)
    assert obj.keys() == ["t/p/t+0+0.json", "t/p/t+0+0.keys.json", "t/p/t+0+0.index.json"]
    for row in (obj, advance_row("t", 0, 10, 12, "no records in range"),
                skipped_row("t", 1, 0, 4, "deleted by retention", kafka_cluster_id="c")):
        assert ManifestRow.from_json(row.to_json()) == row
        assert len(row.as_tuple()) == len(COLUMN_NAMES)
    resolved = obj.with_written("t/p/t+0+0.index.json", "e2", "v2", 4)
    assert resolved.side_files[1] == SideFile("index", "t/p/t+0+0.index.json", "e2", "v2", 4) and obj.side_files == side
    stamped = obj.stamped("job", 3, "run", dt.datetime(2026, 1, 1))
    assert (stamped.job, stamped.batch_id, stamped.run_id, obj.job) == ("job", 3, "run", None)
    assert stamped.as_tuple()[COLUMN_NAMES.index("side_files")][0] == ("keys", "t/p/t+0+0.keys.json", "e1", None, 10)
