"""Local worker processes: they run a batch's tasks for :class:`lakesink.runners.local.LocalTasks`, the
sink's engine on one machine when Spark would only schedule Python tasks there.

``python -m lakesink.executor.local_worker IN:OUT [IN:OUT ...]`` starts in its own session (a terminal's ^C or a
scheduler's SIGTERM to the driver's process group reaches the driver, which decides, not the workers), imports
what a task imports (:data:`PRELOAD`) once, then forks one worker per further ``IN:OUT`` pair of inherited pipe
file descriptors and serves the first pair itself: every worker starts with the imports done, paid for once (as
Spark's Python daemon forks its workers, :mod:`lakesink.executor.pydaemon`). Each worker's frames are a big-endian
8-byte length and a pickle:

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

__all__ = ["MODULE", "PRELOAD", "read_frame", "write_frame", "run_task", "serve", "parse_pairs", "main"]

#: what ``python -m`` runs
MODULE = "lakesink.executor.local_worker"

#: imported before the first task: cloudpickle to load the tasks, and what they import
PRELOAD = ("pyspark.cloudpickle", *TASK_MODULES)

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
        task = pickle.loads(blob)  # cloudpickle's output loads with pickle (it imports pyspark.cloudpickle)
        return "ok", list(task(arg))
    except BaseException as e:  # noqa: BLE001 - everything goes back to the driver, which fails the batch
        text = "".join(traceback.format_exception(e)).rstrip()
        print(f"lakesink local worker {os.getpid()}: task failed:\n{text}", file=sys.stderr, flush=True)
        return "error", text


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    """Serve tasks from ``inp`` until it closes, then end this process."""
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


def main(argv: list[str] | None = None) -> None:
    """Preload once, fork a worker per further pair, serve the first pair here."""
    pairs = parse_pairs(sys.argv[1:] if argv is None else argv)
    # before any thread: forked children copy only the forking thread. No pandas: these workers never hand pyarrow a
    # pandas object (no Spark here)
    preload(PRELOAD, pandas=False)
    mine = pairs[0]
    for pair in pairs[1:]:
        if os.fork() == 0:
            mine = pair
            break
    for pair in pairs:  # each worker keeps its own pair only
        if pair != mine:
            os.close(pair[0])
            os.close(pair[1])
    serve(os.fdopen(mine[0], "rb"), os.fdopen(mine[1], "wb"))


if __name__ == "__main__":
    main()
