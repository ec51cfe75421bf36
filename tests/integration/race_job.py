"""``python race_job.py DIR CONFIG NAME``: one of the concurrency test's racing runs (test_sink_concurrency).

Starts its Spark session (local[1]) once, writes ``DIR/ready-NAME``, then for each round k waits for ``DIR/go-k``
and runs the real CLI command ``lakesink sink --config CONFIG --once --flush-tail`` in-process (argument parsing,
error rendering and exit status as the ``lakesink`` command has them; only the JVM is warm), writing its exit
status, stdout and stderr to ``DIR/result-k-NAME.json``. Ends when ``DIR/stop`` appears."""
import contextlib
import io
import json
import sys
import time
from pathlib import Path

from lakesink import wiring
from lakesink.cli.main import main as cli_main
from lakesink.config import load_config
from lakesink.runtime.spark import get_spark

if __name__ == "__main__":
    d, config, name = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    cfg = load_config(config)
    get_spark(app_name=f"lakesink-race-{name}", master="local[1]", s3=wiring.s3_settings(cfg),
              conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
    (d / f"ready-{name}").touch()
    k = 0
    while True:
        while not (d / f"go-{k}").exists() and not (d / "stop").exists():
            time.sleep(0.01)
        if not (d / f"go-{k}").exists():
            break
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli_main(["sink", "--config", config, "--once", "--flush-tail"])
        (d / f"result-{k}-{name}.json").write_text(json.dumps({"rc": rc, "out": out.getvalue(),
                                                               "err": err.getvalue()}))
        k += 1
