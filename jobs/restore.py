"""spark-submit / Databricks job entry point for `lakesink restore` (archived records back to Kafka).

    spark-submit --jars <kafka, delta, s3a jars> jobs/restore.py --config /path/orders.properties \
        --where "topic = 'orders'" --to-topic orders_restored [--dry-run] [--name N]

On Databricks, point a Python-script task at this file with the same arguments; the cluster's session is used.
"""
import sys

from lakesink.cli import main

if __name__ == "__main__":
    sys.exit(main(["restore", *sys.argv[1:]]))
