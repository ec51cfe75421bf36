"""The engine of a run, chosen once: which :class:`~lakesink.runners.TaskRunner` runs its tasks, and the Spark
session it may need. ``auto`` picks local worker processes (:class:`~lakesink.runners.local.LocalRunner`, no JVM)
when Spark would only schedule Python tasks on a new local master, else Spark
(:class:`~lakesink.runners.spark.SparkRunner`). The CLI and the notebook API (:func:`lakesink.run`) both call
:func:`open_engine`."""
from __future__ import annotations

import contextlib
import functools
import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from lakesink.errors import InvalidArgumentError
from lakesink.runtime.logs import log_output

log = logging.getLogger("lakesink.runtime.engine")

__all__ = ["ENGINES", "Engine", "local_workers", "open_engine", "start_local_runner", "run"]

#: ``--engine`` / ``engine=`` values
ENGINES = ("auto", "spark", "local")


def local_workers(cfg: Any, engine: str, master: str | None, have_session: bool = False) -> int | None:
    """How many local worker processes run ``cfg``'s tasks, or None when Spark runs them. ``auto`` picks local
    workers when Spark would only schedule Python tasks on a new local master
    (:func:`lakesink.wiring.spark_schedules_only`; no session here yet): as many as the master's task slots.
    ``local`` insists (an error naming why it cannot), also beside a local session this process already has
    (``have_session``: the caller gave one); ``spark`` never."""
    from lakesink import wiring
    from lakesink.runners.local import local_parallelism
    from lakesink.runtime.spark import cluster_environment, spark_master, starts_local_jvm

    if engine not in ENGINES:
        raise InvalidArgumentError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
    if engine == "spark":
        return None
    resolved = spark_master(master)
    n = local_parallelism(resolved)
    why = wiring.why_spark_runs_tasks(cfg)
    if why is not None:
        why = f"the config needs Spark: {why}"
    elif n is None:
        why = f"master {resolved!r} is not local"
    elif cluster_environment():
        why = "this process runs on a Spark cluster (Databricks, or $LAKESINK_SPARK_CLUSTER)"
    if why is not None:
        if engine == "local":
            raise InvalidArgumentError(f"--engine local: {why}")
        return None
    if engine == "auto" and (have_session or not starts_local_jvm()):
        return None  # a session is here already: it runs them
    return n


def start_local_runner(job: str, workers: int):
    """The local engine's ``workers`` worker processes, logging to this run's log file."""
    from lakesink.runners.local import LocalRunner

    _log, fd = log_output(job)
    try:
        return LocalRunner(workers, output=fd)
    finally:
        if fd is not None:
            os.close(fd)


@dataclass(frozen=True)
class Engine:
    """A run's engine: ``runner`` runs the tasks; ``spark`` is the session (or a zero-argument callable that
    starts it) for what needs Spark itself (a catalog manifest, Spark's Kafka source)."""

    runner: Any
    spark: Any


@contextlib.contextmanager
def open_engine(cfg: Any, engine: str = "auto", master: str | None = None, spark: Any = None,
                in_advance: bool = True) -> Iterator[Engine]:
    """The engine for ``cfg`` while the block runs (local workers end with it). ``spark``: a session (or a
    callable) to use; None starts one from the config when a task or the manifest first needs it -- in a
    background thread at once (``in_advance``, :class:`~lakesink.runtime.session.SessionInAdvance`) when this
    process would start a local JVM, so its start overlaps the driver's planning."""
    from lakesink import wiring
    from lakesink.runners.spark import SparkRunner
    from lakesink.runtime.session import SessionInAdvance, session
    from lakesink.runtime.spark import starts_local_jvm

    workers = local_workers(cfg, engine, master, have_session=spark is not None)
    if spark is None:
        start = functools.partial(session, cfg, master, wiring.spark_schedules_only(cfg))
        # one session, whoever asks first: the runner's tasks, a catalog manifest, Spark's Kafka source
        spark = SessionInAdvance(start) if workers is None and in_advance and starts_local_jvm() else functools.cache(start)
    if workers is None:
        yield Engine(SparkRunner(spark), spark)
        return
    with start_local_runner(cfg.name, workers) as runner:  # start now, while the driver plans
        yield Engine(runner, spark)


def run(spark: Any = None, config: Any = None, *, engine: str = "auto", master: str | None = None,
        once: bool = True, interval_s: float = 30.0, flush_tail: bool = False, stop: Any = None,
        on_batch: Callable[[Any], None] | None = None) -> list:
    """Archive ``config`` (a SinkConfig, a dict or a config file path) for notebooks and jobs: ``once`` one batch,
    else one every ``interval_s`` until ``stop`` (a ``threading.Event``) is set. ``spark``: a session to use
    (None: one is started from the config when needed); ``engine``: ``auto``, ``spark`` or ``local``
    (:func:`local_workers`)."""
    from lakesink.driver.archive import as_config
    from lakesink.driver.sink import SinkJob
    from lakesink.runtime.runs import RunRecorder

    if config is None:
        raise InvalidArgumentError("run() needs a config: a SinkConfig, a dict or a config file path")
    cfg = as_config(config)
    with RunRecorder(cfg, log.warning) as recorder:
        def batch_done(batch: Any) -> None:
            recorder.add(batch)
            if on_batch is not None:
                on_batch(batch)

        with open_engine(cfg, engine, master, spark) as eng:
            job = SinkJob(eng.spark, cfg, runner=eng.runner)
            recorder.run_id = job.run_id
            return job.run(once=once, interval_s=interval_s, flush_tail=flush_tail, stop=stop, on_batch=batch_done)
