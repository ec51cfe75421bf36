"""spark-submit / Databricks job entry point for `lakesink restore` (archived records back to Kafka).

    spark-submit --jars <kafka, delta, s3a jars> jobs/restore.py --config /path/orders.properties \
        --where "topic = 'orders'" --to-topic orders_restored [--dry-run] [--name N]

On Databricks, point a Python-script task at this file with the same arguments; the cluster's session is used.

When lakesink builds the session (spark-submit without $LAKESINK_USE_CLUSTER_JARS), Spark's log and the JVM's
stderr go to the run's log file (docs/sink.md, "Output, errors and exit codes"); --verbose keeps them on the
terminal.
"""
import sys

from lakesink.cli import main

if __name__ == "__main__":
    sys.exit(main(["restore", *sys.argv[1:]]))
