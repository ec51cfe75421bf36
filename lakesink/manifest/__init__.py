"""The Delta manifest: typed rows (:mod:`.rows`) and the table, its snapshot queries and its fenced commit
(:mod:`.table`)."""
from lakesink.manifest.rows import (ADVANCE, CHAIN_KINDS, COLUMN_NAMES, COLUMNS, DEADLETTER, FILTERED, OBJECT, SKIPPED,
                                    ManifestRow, SideFile, advance_row, deadletter_row, filtered_row, object_row,
                                    skipped_row)
from lakesink.manifest.table import Manifest, ManifestSnapshot, PartitionState, commit_tag, ddl, write_ddl_file

__all__ = ["ADVANCE", "CHAIN_KINDS", "COLUMNS", "COLUMN_NAMES", "DEADLETTER", "FILTERED", "OBJECT", "SKIPPED", "Manifest",
           "ManifestRow", "ManifestSnapshot", "PartitionState", "SideFile", "advance_row", "commit_tag", "deadletter_row",
           "ddl", "filtered_row", "object_row", "skipped_row", "write_ddl_file"]
