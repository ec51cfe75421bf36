"""spark-submit / Databricks job entry point for `lakesink vacuum` (orphan clean-up)."""
import sys

from lakesink.cli import main

if __name__ == "__main__":
    sys.exit(main(["vacuum", *sys.argv[1:]]))
