"""Local worker processes: they run a batch's tasks for :class:`lakesink.runners.local.LocalTasks`, the
sink's engine on one machine when Spark would only schedule Python tasks there.

A group of workers starts one of two ways, both in its own session (a terminal's ^C or a scheduler's SIGTERM to
the driver's process group reaches the driver, which decides, not the workers):

* ``python -m lakesink.executor.local_worker IN:OUT [IN:OUT ...]`` imports what a task imports (:data:`PRELOAD`)
  once, then forks one worker per further ``IN:OUT`` pair of inherited pipe file descriptors and serves the first
  pair itself (:func:`serve_group`): every worker starts with the imports done, paid for once (as Spark's Python
  daemon forks its workers, :mod:`lakesink.executor.pydaemon`);
* or the driver, while it is still single-threaded, imports :data:`PRELOAD` itself and forks the group
  (:func:`forked_group`): the imports the driver needs anyway are then not paid a second time.

Every worker is named ``lakesink-worker`` (``/proc/PID/comm``, what ``ps`` and ``top`` show). Each worker's frames
are a big-endian 8-byte length and a pickle:

* worker → driver, first: ``("ready", pid)``;
* driver → worker: ``(task, arg)``, ``task`` a cloudpickled callable (the same closure a Spark task runs);
* worker → driver: ``("ok", [result rows])`` or ``("error", text)``, ``text`` the task's traceback, whose last
  line names the error as a Spark task failure's does.

A worker ends as soon as its ``IN`` pipe closes, mid-task too: the driver has gone or abandoned the task, and
nothing will commit what the task would upload (those objects are orphans, as after a failed Spark task).
"""
from __future__ import annotations

import os
import pickle
import queue
import struct
import sys
import threading
from typing import Any, BinaryIO

from lakesink.executor.pydaemon import TASK_MODULES, preload

__all__ = ["MODULE", "PRELOAD", "NAME", "read_frame", "write_frame", "run_task", "serve", "serve_group",
           "forked_group", "parse_pairs", "main"]

#: what ``python -m`` runs
MODULE = "lakesink.executor.local_worker"

#: imported before the first task: cloudpickle to load the tasks, and what they import
PRELOAD = ("cloudpickle", *TASK_MODULES)

#: every worker process's name (``/proc/PID/comm``: at most 15 bytes)
NAME = "lakesink-worker"

_LENGTH = struct.Struct(">Q")


def _read_exactly(stream: BinaryIO, n: int) -> bytes:
    # a raw pipe's read returns what has arrived so far: loop until n bytes or the end of the stream
    parts, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def read_frame(stream: BinaryIO) -> bytes | None:
    """One frame's payload from ``stream``; None at a clean end of stream (EOFError if it ends mid-frame)."""
    head = _read_exactly(stream, _LENGTH.size)
    if not head:
        return None
    if len(head) < _LENGTH.size:
        raise EOFError("stream ended inside a frame header")
    (n,) = _LENGTH.unpack(head)
    body = _read_exactly(stream, n)
    if len(body) < n:
        raise EOFError(f"stream ended after {len(body)} of {n} bytes of a frame")
    return body


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    """Write one frame and flush it."""
    stream.write(_LENGTH.pack(len(payload)) + payload)
    stream.flush()


def run_task(message: bytes) -> tuple[str, Any]:
    """Run one task message ``(cloudpickled callable, arg)``: ``("ok", list of its results)`` or
    ``("error", traceback text)``."""
    import traceback

    try:
        blob, arg = pickle.loads(message)
        task = pickle.loads(blob)  # cloudpickle's output loads with pickle (it imports cloudpickle)
        return "ok", list(task(arg))
    except BaseException as e:  # noqa: BLE001 - everything goes back to the driver, which fails the batch
        text = "".join(traceback.format_exception(e)).rstrip()
        print(f"lakesink local worker {os.getpid()}: task failed:\n{text}", file=sys.stderr, flush=True)
        return "error", text


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    """Serve tasks from ``inp`` until it closes, then end this process. Its Kafka consumers are kept from one task
    to the next (:mod:`lakesink.executor.kept_consumer`): the process ends with its run."""
    from lakesink.executor.kept_consumer import keep_consumers

    keep_consumers()
    try:
        write_frame(out, pickle.dumps(("ready", os.getpid())))
    except OSError:
        os._exit(0)  # the driver is done already (a run with nothing to archive)
    tasks: queue.Queue = queue.Queue()

    def reader() -> None:
        try:
            while (message := read_frame(inp)) is not None:
                tasks.put(message)
        except (OSError, EOFError):
            pass
        os._exit(0)  # the driver closed the pipe (or is gone): end now, even mid-task

    threading.Thread(target=reader, name="lakesink-worker-in", daemon=True).start()
    while True:
        status, payload = run_task(tasks.get())
        try:
            write_frame(out, pickle.dumps((status, payload), protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:
            os._exit(0)


def parse_pairs(args: list[str]) -> list[tuple[int, int]]:
    """``IN:OUT`` arguments as file descriptor pairs."""
    pairs = []
    for a in args:
        i, _, o = a.partition(":")
        pairs.append((int(i), int(o)))
    if not pairs:
        raise ValueError("no IN:OUT file descriptor pair given")
    return pairs


def serve_group(pairs: list[tuple[int, int]]) -> None:
    """Fork a worker per pair after the first, serve the first pair in this process; each worker keeps only its
    own pair. Never returns (each worker ends its process when its pipe closes)."""
    import warnings

    mine = pairs[0]
    for pair in pairs[1:]:
        with warnings.catch_warnings():  # Python 3.12+: see lakesink.runners.local's fork of the group
            warnings.simplefilter("ignore", DeprecationWarning)
            child = os.fork()
        if child == 0:
            mine = pair
            break
    for pair in pairs:
        if pair != mine:
            os.close(pair[0])
            os.close(pair[1])
    _name_process()
    serve(os.fdopen(mine[0], "rb"), os.fdopen(mine[1], "wb"))


def forked_group(pairs: list[tuple[int, int]], output: int | None) -> None:
    """The group's start in a child the driver forked (:class:`lakesink.runners.local.LocalTasks`): leave the
    driver's session, keep only ``pairs`` and standard streams (``output``, the run's log file, as stdout and
    stderr), put back what the driver changed (signal handlers, logging), then :func:`serve_group`. Never returns:
    whatever happens, the process ends here, and the driver's code never runs on in it."""
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        if output is not None:
            os.dup2(output, 1)
            os.dup2(output, 2)
        keep = sorted({0, 1, 2, *(fd for pair in pairs for fd in pair)})
        # as a spawned group's close_fds: no pipe end or socket of the driver's stays open here (a worker of an
        # earlier group must see its pipe close when the driver closes it)
        for low, high in zip(keep, keep[1:] + [_max_fd()]):
            os.closerange(low + 1, high)
        _reset_driver_state()
        serve_group(pairs)
    except BaseException:  # noqa: BLE001 - the driver's stack is below: never unwind into it
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


def _max_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (OSError, ValueError):
        return 65536


def _reset_driver_state() -> None:
    """Signal handlers and logging as a new interpreter has them: the driver's stop handlers and its log handlers
    (on files this child has closed) are not the workers'."""
    import logging
    import signal

    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    loggers = [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    for lg in loggers:
        lg.handlers.clear()
        lg.disabled = False
        lg.propagate = True
        lg.setLevel(logging.NOTSET)
    logging.getLogger().setLevel(logging.WARNING)
    logging.disable(logging.NOTSET)


def _name_process() -> None:
    try:
        with open("/proc/self/comm", "w") as f:
            f.write(NAME)
    except OSError:  # not Linux: the name is only for people looking at ps
        pass


def main(argv: list[str] | None = None) -> None:
    """Preload once, fork a worker per further pair, serve the first pair here."""
    pairs = parse_pairs(sys.argv[1:] if argv is None else argv)
    # before any thread: forked children copy only the forking thread. No pandas: these workers never hand pyarrow a
    # pandas object (no Spark here)
    preload(PRELOAD, pandas=False)
    serve_group(pairs)


if __name__ == "__main__":
    main()
