"""The Delta manifest: the table, its snapshot queries and its fenced commit (:mod:`.table`)."""
from lakesink.manifest.table import (COLUMN_NAMES, COLUMNS, FencedError, Manifest, ManifestError, ManifestSnapshot,
                                     PartitionState, commit_tag, ddl, write_ddl_file)

__all__ = ["COLUMNS", "COLUMN_NAMES", "FencedError", "Manifest", "ManifestError", "ManifestSnapshot",
           "PartitionState", "commit_tag", "ddl", "write_ddl_file"]
