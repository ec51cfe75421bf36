"""spark-submit / Databricks job entry point for the sink.

    spark-submit --jars <kafka, delta, s3a jars> jobs/sink.py --config /path/orders.properties --once

On Databricks, point a Python-script task at this file with the same arguments (the config path
may be a /dbfs/ or /Workspace/ path); the cluster's session and jars are used.
"""
import sys

from lakesink.cli import main

if __name__ == "__main__":
    sys.exit(main(["sink", *sys.argv[1:]]))
