"""The log policy of a lakesink run: what the Spark JVM and the local workers it starts print goes to one log file
per run (``$LAKESINK_SPARK_LOG_FILE``, else under ``$LAKESINK_LOG_DIR``), not to the terminal, unless the caller
asked for it (``--verbose``/``--debug``, ``$LAKESINK_VERBOSE=1`` or :func:`set_verbose`). The terminal keeps
lakesink's own lines.

A local JVM lakesink starts (the CLI's session, :func:`lakesink.get_spark` in a notebook or a test) writes
everything it prints there: the JVM's own start-up warnings (``WARNING: Using incubator modules``, printed before
any configuration is read), Spark's log4j lines (:data:`LOG4J_CONFIG`), the SLF4J notice of the AWS SDK bundle's
shaded SLF4J 1.x (printed by SLF4J itself to the JVM's stderr, not through log4j), and its Python workers' stderr
(tracebacks of failed tasks included). Console progress bars are off (:func:`quiet_spark_conf`). A session
someone else built (a cluster's, a notebook's own) is left as it is."""
from __future__ import annotations

import contextlib
from typing import Iterator

__all__ = ["LOG_FILE_ENV", "VERBOSE_ENV", "LOG4J_CONFIG", "log_output", "set_verbose", "verbose", "run_log_file",
           "new_log_file", "quiet_spark_conf", "quiet_jvm", "quiet_running_jvm"]

LOG_FILE_ENV = "LAKESINK_SPARK_LOG_FILE"
#: ``LAKESINK_VERBOSE=1``: what ``--verbose`` does, for the notebook API and jobs started by someone else
VERBOSE_ENV = "LAKESINK_VERBOSE"
#: the log4j2 configuration (in this package) of a JVM lakesink starts quietly
LOG4J_CONFIG = "log4j2-cli.properties"
_run_log: str | None = None
_verbose = False


def log_output(job: str) -> tuple[str | None, int | None]:
    """A new log file for what this run's Spark JVM or local workers print: (its path, a file descriptor open
    for appending), or (None, None) with ``--verbose`` (they print to the terminal). :func:`run_log_file` names
    it afterwards."""
    import os

    global _run_log
    if verbose():
        return None, None
    _run_log = new_log_file(job)
    return _run_log, os.open(_run_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def set_verbose(verbose: bool) -> None:
    """``--verbose``/``--debug`` (``lakesink.set_verbose(True)`` in a notebook): a Spark JVM this process starts
    next logs to the terminal, not to a file. (Module state, not an environment variable: child processes, e.g. a
    test's subprocesses, must not inherit it.)"""
    global _verbose
    _verbose = bool(verbose)


def verbose() -> bool:
    """Whether what this process starts logs to the terminal: :func:`set_verbose`, or ``$LAKESINK_VERBOSE`` set
    to ``1``/``true``/``yes``."""
    import os

    return _verbose or os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes")


def run_log_file() -> str | None:
    """The log file of the Spark JVM or local workers this process started (None: none, or they log to the
    terminal)."""
    return _run_log


def new_log_file(job: str) -> str:
    """A log file for this run's Spark: ``$LAKESINK_SPARK_LOG_FILE`` if set, else one per run under
    ``$LAKESINK_LOG_DIR`` (default ``<tmp>/lakesink-logs-<uid>``)."""
    import datetime as dt
    import os
    import tempfile

    if os.environ.get(LOG_FILE_ENV):
        return os.environ[LOG_FILE_ENV]
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    d = os.environ.get("LAKESINK_LOG_DIR") or os.path.join(tempfile.gettempdir(), f"lakesink-logs-{uid}")
    os.makedirs(d, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return os.path.join(d, f"{job}-{stamp}-{os.getpid()}.log")


def quiet_spark_conf(log: str | None) -> dict[str, str]:
    """Spark settings that keep the terminal for lakesink's own output: no console progress bars, and (with a
    ``log`` file) the driver's log4j -- Spark, Hadoop, task failures with Python tracebacks -- to that file
    (:data:`LOG4J_CONFIG`)."""
    from importlib.resources import files

    conf = {"spark.ui.showConsoleProgress": "false"}
    if log is not None:
        cfg_file = str(files("lakesink.runtime").joinpath(LOG4J_CONFIG))
        conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{cfg_file} -Dlakesink.log.file={log}"
    return conf


@contextlib.contextmanager
def quiet_jvm(job: str, conf: dict | None, output: int | None, starts: bool) -> Iterator[tuple[dict, int | None]]:
    """The settings and output descriptor a new local JVM starts with (``starts``: one starts now): ``conf``
    with :func:`quiet_spark_conf` under it and the JVM's output to this run's log file (:func:`log_output`), open
    while the block runs. Unchanged when the caller gave an ``output`` (it chose already), with ``--verbose``, or
    when no JVM starts. Given ``spark.driver.extraJavaOptions`` follow ours (a later ``-D`` wins).

    Under ``spark-submit`` (``jobs/*.py``) the JVM runs already and pyspark's gateway only connects to it
    (``$PYSPARK_GATEWAY_PORT``): once the block has connected, :func:`quiet_running_jvm` sends that JVM's log4j
    and stderr to the log file before the session's SparkContext starts."""
    import os

    conf = {key: str(value) for key, value in (conf or {}).items()}
    if output is not None or not starts:
        yield conf, output
        return
    log, fd = log_output(job)
    quiet = quiet_spark_conf(log)
    options = " ".join(o for o in (quiet.pop("spark.driver.extraJavaOptions", ""),
                                   conf.pop("spark.driver.extraJavaOptions", "")) if o)
    if options:
        quiet["spark.driver.extraJavaOptions"] = options
    try:
        yield {**quiet, **conf}, fd
        if log is not None and os.environ.get("PYSPARK_GATEWAY_PORT"):
            quiet_running_jvm(log)
    except BaseException:
        _drop_if_empty(log)  # e.g. no jars: failed before a JVM wrote anything; leave no empty file behind
        raise
    finally:
        if fd is not None:
            os.close(fd)


def _drop_if_empty(log: str | None) -> None:
    """Remove this run's log file if nothing was written to it (not a ``$LAKESINK_SPARK_LOG_FILE`` given)."""
    import os

    global _run_log
    if log is None or os.environ.get(LOG_FILE_ENV):
        return
    try:
        if os.path.getsize(log) == 0:
            os.unlink(log)
            if _run_log == log:
                _run_log = None
    except OSError:
        pass


def quiet_running_jvm(log: str) -> None:
    """Send what a JVM started before lakesink ran (``spark-submit``'s) logs and prints to ``log``: its log4j
    reconfigured with :data:`LOG4J_CONFIG`, its ``System.err`` (SLF4J notices, the Python workers' stderr) to the
    file. What it printed before -- the JVM's own start-up warnings -- stays where it went."""
    from importlib.resources import files

    from pyspark import SparkContext

    jvm = SparkContext._jvm  # noqa: SLF001 - set once the gateway is up (lakesink.runtime.spark.launch_jvm_detached)
    if jvm is None:
        return
    jvm.java.lang.System.setProperty("lakesink.log.file", log)
    config = jvm.java.io.File(str(files("lakesink.runtime").joinpath(LOG4J_CONFIG))).toURI()
    jvm.org.apache.logging.log4j.core.config.Configurator.reconfigure(config)
    jvm.java.lang.System.setErr(jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(log, True), True))
