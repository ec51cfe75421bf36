"""spark-submit / Databricks job entry point for the sink.

    spark-submit --jars <kafka, delta, s3a jars> jobs/sink.py --config /path/orders.properties --once

On Databricks, point a Python-script task at this file with the same arguments (the config path
may be a /dbfs/ or /Workspace/ path); the cluster's session and jars are used.

When lakesink builds the session (spark-submit without $LAKESINK_USE_CLUSTER_JARS), Spark's log and the JVM's
stderr go to the run's log file (docs/sink.md, "Output, errors and exit codes"); --verbose keeps them on the
terminal.
"""
import sys

from lakesink.cli import main

if __name__ == "__main__":
    sys.exit(main(["sink", *sys.argv[1:]]))
