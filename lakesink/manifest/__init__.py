"""The Delta manifest: typed rows (:mod:`.rows`) and the table, its snapshot queries and its fenced commit
(:mod:`.table`)."""
from lakesink.manifest.rows import (ADVANCE, COLUMN_NAMES, COLUMNS, OBJECT, SKIPPED, ManifestRow, SideFile, advance_row,
                                    object_row, skipped_row)
from lakesink.manifest.table import Manifest, ManifestSnapshot, PartitionState, commit_tag, ddl, write_ddl_file

__all__ = ["ADVANCE", "COLUMNS", "COLUMN_NAMES", "OBJECT", "SKIPPED", "Manifest", "ManifestRow", "ManifestSnapshot",
           "PartitionState", "SideFile", "advance_row", "commit_tag", "ddl", "object_row", "skipped_row",
           "write_ddl_file"]
