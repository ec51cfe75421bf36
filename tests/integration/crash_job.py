"""``python crash_job.py FAULT CONFIG [MASTER [ENGINE]]``: one sink batch of CONFIG in its own driver, SIGKILLed at
FAULT (see faults.KillAt). ENGINE ``spark`` (default): the tasks run in a local Spark session; ``local``: in local
worker processes (lakesink.runners.local, the CLI's local engine). The crash tests run it as a subprocess;
its directory must be on PYTHONPATH so the executors can unpickle the hooks."""
import sys

from support.faults import KillAt

from lakesink import wiring
from lakesink.config import load_config
from lakesink.driver.sink import SinkJob
from lakesink.runtime.spark import get_spark

if __name__ == "__main__":
    fault, config = sys.argv[1], sys.argv[2]
    master = sys.argv[3] if len(sys.argv) > 3 else "local[2]"
    engine = sys.argv[4] if len(sys.argv) > 4 else "spark"
    cfg = load_config(config)
    if engine == "local":
        from lakesink.runners.local import LocalRunner, local_parallelism

        def no_spark():
            raise AssertionError("the local engine asked for Spark")

        SinkJob(no_spark, cfg, hooks=KillAt(fault), runner=LocalRunner(local_parallelism(master))).run_batch()
    else:
        spark = get_spark(app_name=f"lakesink-crash-{cfg.name}", master=master, s3=wiring.s3_settings(cfg))
        SinkJob(spark, cfg, hooks=KillAt(fault)).run_batch()
