"""The sink's local engine: a batch's direct-reader tasks in worker processes on this machine, without Spark.

On a local master with the direct reader and a path manifest (:func:`lakesink.wiring.spark_schedules_only`),
Spark moves no data: it starts a JVM (seconds of a cold run's wall time, and more of CPU on a small machine)
only to hand Python tasks to forked Python workers. :class:`LocalTasks` runs those very tasks -- the same
closure, one per planned Kafka range, giving the same result rows -- in ``parallelism`` worker processes
(:mod:`lakesink.executor.local_worker`) that start in advance, while the driver plans: one process imports what
the tasks import, once, and forks the others before the first task arrives. A CLI run, still single-threaded when
it starts them (:func:`may_fork`), imports those modules itself and forks that process: it needs most of them
anyway, and a new interpreter would import them all again.

Semantics follow a local Spark master's: tasks are spread over the workers, a worker runs its tasks one after
another, and the first task that fails fails the batch (no retry, as Spark's local mode) and stops the others.
A worker that dies fails its task the same way. Workers run in their own session: a signal to the driver's
process group reaches the driver only, which lets the batch finish or abandons it (see
:class:`lakesink.cli.sink.StopSignals`); each ends when its task pipe from the driver closes, which happens
whatever way the driver ends.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import re
import selectors
import signal
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from lakesink.errors import LocalTaskError

if TYPE_CHECKING:  # pragma: no cover
    from lakesink.runners import TaskFn

__all__ = ["LocalTasks", "LocalRunner", "local_parallelism", "may_fork"]

_LOCAL = re.compile(r"local(?:\[(\*|\d+)(?:\s*,\s*\d+)?\])?")


def local_parallelism(master: str, cpus: int | None = None) -> int | None:
    """How many tasks a local Spark ``master`` runs at once (``local`` 1, ``local[N]`` and ``local[N,F]`` N,
    ``local[*]`` the machine's CPUs); None for any other master (a cluster)."""
    m = _LOCAL.fullmatch(master.strip())
    if m is None:
        return None
    if m.group(1) is None:
        return 1
    if m.group(1) == "*":
        return max(1, cpus if cpus is not None else _cpus())
    return max(1, int(m.group(1)))


def _cpus() -> int:
    # the CPUs this process may run on (as the JVM's availableProcessors, which local[*] uses), not the host's
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _Worker:
    """The driver's end of one worker: a pipe to send tasks, a pipe to receive results."""

    def __init__(self, tasks_w: int, results_r: int, group: subprocess.Popen):
        self.send_to = os.fdopen(tasks_w, "wb", buffering=0)
        self.receive_from = os.fdopen(results_r, "rb", buffering=0)
        self.group = group  # the process that started it (and runs one of its group's workers itself)
        self.pid: int | None = None  # from its "ready" frame
        self.dead = False

    def fileno(self) -> int:
        return self.receive_from.fileno()

    def send(self, message: bytes) -> None:
        from lakesink.executor.local_worker import write_frame

        try:
            write_frame(self.send_to, message)
        except OSError:
            self.dead = True  # its receive reports it

    def receive(self) -> tuple[str, object]:
        """The next result frame (a "ready" frame first is taken in passing)."""
        from lakesink.executor.local_worker import read_frame

        while True:
            try:
                frame = read_frame(self.receive_from)
            except (OSError, EOFError):
                frame = None
            if frame is None:
                self.dead = True
                who = f"pid {self.pid}" if self.pid is not None else f"started by pid {self.group.pid}"
                return "error", f"lakesink local worker ({who}) ended during its task (killed, or it exited)"
            status, payload = pickle.loads(frame)
            if status == "ready":
                self.pid = payload
                continue
            return status, payload

    def stop(self) -> None:
        """Close its pipes: the worker ends at once, idle or mid-task."""
        self.dead = True
        for f in (self.send_to, self.receive_from):
            try:
                f.close()
            except OSError:
                pass


def may_fork() -> bool:
    """Whether this process can start a worker group by forking itself: on Linux, while it has a single thread (a
    CLI run before its first Kafka or Delta client; not a notebook's kernel). A fork copies only the forking thread,
    so with no other thread no lock can be held by one that the child will never see again."""
    try:
        return hasattr(os, "fork") and len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no /proc: not Linux
        return False


def _start_workers(n: int, output: int | None, fork: bool) -> list[_Worker]:
    """``n`` workers from one new process (:mod:`lakesink.executor.local_worker`), which imports once and forks
    the others: this process forked after importing what tasks import itself (``fork``), else a new interpreter."""
    ends, theirs = [], []
    for _ in range(n):
        tasks_r, tasks_w = os.pipe()
        results_r, results_w = os.pipe()
        ends.append((tasks_w, results_r))
        theirs.append((tasks_r, results_w))
    try:
        group = _fork_group(theirs, output) if fork else _spawn_group(theirs, output)
    except BaseException:
        for fd in [fd for pair in ends + theirs for fd in pair]:
            os.close(fd)
        raise
    for fd in [fd for pair in theirs for fd in pair]:
        os.close(fd)  # the workers' ends are theirs alone: a worker's death then reads as the end of its pipe
    return [_Worker(w, r, group) for w, r in ends]


def _spawn_group(theirs: list[tuple[int, int]], output: int | None) -> subprocess.Popen:
    from lakesink.executor.local_worker import MODULE

    return subprocess.Popen([sys.executable, "-m", MODULE, *(f"{r}:{w}" for r, w in theirs)],
                            pass_fds=[fd for pair in theirs for fd in pair], stdin=subprocess.DEVNULL,
                            stdout=output, stderr=output, start_new_session=True)


class _ForkedGroup:
    """A forked group's process, with what :class:`LocalTasks` asks of a ``Popen``: ``pid``, ``poll``, ``kill``,
    ``wait``."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def wait(self) -> int:
        if self.returncode is None:
            try:
                _pid, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                self.returncode = 0
        return self.returncode


def _fork_group(theirs: list[tuple[int, int]], output: int | None) -> _ForkedGroup:
    import warnings

    from lakesink.executor.local_worker import PRELOAD, forked_group
    from lakesink.executor.pydaemon import preload

    preload(PRELOAD, pandas=False)  # here, once: the driver imports most of it anyway
    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    with warnings.catch_warnings():
        # Python 3.12+ warns of a fork beside threads: the only ones now are the allocator's and BLAS's, started by
        # the imports above, whose libraries prepare for fork (as the spawned group's own fork after its imports)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        forked_group(theirs, output)  # never returns
    return _ForkedGroup(pid)


class LocalTasks:
    """``parallelism`` local worker processes, started now (see the module docstring). ``output``: a file
    descriptor for the workers' stderr (the run's log file); default this process's. ``fork``: whether this
    process forks the first group of workers after importing what tasks import (default :func:`may_fork`), or
    starts a new interpreter; the same choice is made again for workers that replace dead ones."""

    def __init__(self, parallelism: int, output: int | None = None, fork: bool | None = None):
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, not {parallelism}")
        self._output = os.dup(output) if output is not None else None
        self._fork = fork
        self._workers = _start_workers(parallelism, self._output, self._forks())
        self._groups = {id(w.group): w.group for w in self._workers}

    def run(self, task: Callable[[int], Iterable[str]], n: int,
            on_done: Callable[[list[str]], None] | None = None) -> list[str]:
        """Run ``task(i)`` for each ``i`` in ``range(n)`` on the workers; the concatenated results, in task
        order. ``on_done`` gets each task's results as it completes (a progress display). The first failure
        stops the tasks still running and raises :class:`LocalTaskError`."""
        import cloudpickle  # not pyspark's copy: importing pyspark imports pyspark.sql, which nothing here needs

        blob = cloudpickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL)
        self._replace_dead()
        results: list[list[str] | None] = [None] * n
        pending = list(range(n))
        busy: dict[_Worker, int] = {}
        idle = list(self._workers)
        sel = selectors.DefaultSelector()
        try:
            while pending or busy:
                while pending and idle:
                    w, i = idle.pop(0), pending.pop(0)
                    w.send(pickle.dumps((blob, i), protocol=pickle.HIGHEST_PROTOCOL))
                    busy[w] = i
                    sel.register(w, selectors.EVENT_READ)
                for key, _ in sel.select():
                    w = key.fileobj
                    i = busy.pop(w)  # type: ignore[arg-type]
                    sel.unregister(w)
                    status, payload = w.receive()  # type: ignore[union-attr]
                    if status != "ok":
                        raise LocalTaskError(f"task {i} of {n} failed: {payload}")
                    results[i] = payload  # type: ignore[assignment]
                    if on_done is not None:
                        on_done(payload)  # type: ignore[arg-type]
                    idle.append(w)  # type: ignore[arg-type]
        finally:
            for w in busy:  # a failure, or e.g. KeyboardInterrupt: no task outlives the batch
                w.stop()
            sel.close()
        return [row for rows in results for row in (rows or [])]

    def _forks(self) -> bool:
        return may_fork() if self._fork is None else self._fork

    def _replace_dead(self) -> None:
        """Workers that ended (or were stopped) are replaced, from one new process."""
        dead = [w for w in self._workers if w.dead]
        if dead:
            for w in dead:
                w.stop()
            fresh = _start_workers(len(dead), self._output, self._forks())
            self._groups.update({id(w.group): w.group for w in fresh})
            self._workers = [w for w in self._workers if not w.dead] + fresh
        for key, group in list(self._groups.items()):
            if group.poll() is not None:
                del self._groups[key]  # reaped

    def close(self) -> None:
        """End the workers (none runs a task between batches): their pipes close, which ends them, and each
        process that started a group is killed, in case it is still importing and has not forked them yet."""
        for w in self._workers:
            w.stop()
        for group in self._groups.values():
            group.kill()
            group.wait()
        self._workers, self._groups = [], {}
        if self._output is not None:
            os.close(self._output)
            self._output = None

    def __enter__(self) -> "LocalTasks":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalRunner:
    """The :class:`~lakesink.runners.TaskRunner` of local worker processes: ``parallelism`` workers (a
    :class:`LocalTasks`, started now), ``output`` a file descriptor for their stderr. Only for configs whose
    Spark would only schedule Python tasks (:func:`lakesink.wiring.spark_schedules_only`)."""

    name = "local"

    def __init__(self, parallelism: int, output: int | None = None):
        from lakesink.executor.pydaemon import skip_pandas_probe

        self.tasks = LocalTasks(parallelism, output=output)
        self._parallelism = parallelism
        # no Spark in this process: pyarrow's conversions (the manifest commit's rows) need not import pandas
        skip_pandas_probe()

    def cannot_run(self, cfg: Any) -> str | None:
        from lakesink import wiring

        why = wiring.why_spark_runs_tasks(cfg)
        return None if why is None else f"local worker processes cannot run this config: {why}"

    def prepare(self) -> bool:
        return False  # the workers started with the runner

    def run(self, fn: "TaskFn", n: int, schema: str, on_done: Callable[[list[str]], None] | None = None) -> list[str]:
        from lakesink.runners import first_column

        return self.tasks.run(lambda i: list(first_column(fn((i,)))), n, on_done)

    def frame(self, fn: "TaskFn", n: int, schema: str, arrow_schema: Any) -> Any:
        import pyarrow as pa

        batches = self.tasks.run(lambda i: list(fn((i,))), n)
        return pa.Table.from_batches(batches, schema=arrow_schema)

    def parallelism(self) -> int:
        return self._parallelism

    def setting(self, key: str) -> str | None:
        return None  # no session: defaults apply

    @contextlib.contextmanager
    def track(self, listener: Any, batch_id: int, partitions: int) -> Iterator[Any]:
        from lakesink.runners.progress import DriverCounts, track

        with track(listener, batch_id, partitions, DriverCounts, "127.0.0.1") as tracking:
            yield tracking

    def close(self) -> None:
        """End the workers."""
        self.tasks.close()

    def __enter__(self) -> "LocalRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

