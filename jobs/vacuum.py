"""spark-submit / Databricks job entry point for `lakesink vacuum` (orphan clean-up).

When lakesink builds the session (spark-submit without $LAKESINK_USE_CLUSTER_JARS), Spark's log and the JVM's
stderr go to the run's log file (docs/sink.md, "Output, errors and exit codes"); --verbose keeps them on the
terminal.
"""
import sys

from lakesink.cli import main

if __name__ == "__main__":
    sys.exit(main(["vacuum", *sys.argv[1:]]))
