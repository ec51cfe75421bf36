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
