"""Points of the sink's commit protocol that a caller can observe.

A :class:`Hooks` object is passed to :class:`~lakesink.driver.sink.SinkJob` (``hooks=``); what
:meth:`Hooks.for_executors` returns travels, pickled, to the executors inside the batch context. lakesink's own hooks do nothing; tests pass hooks that inject
faults (kill the driver at a point, raise) to prove exactly-once. Production code never reads a hook from
the environment.

Driver points, in order: ``before_resolve`` (executors done, conflicts not yet resolved), ``before_commit``
(everything uploaded and resolved), ``during_commit`` (the Delta commit is about to start), ``after_commit``
(committed and verified); ``lakesink expire`` also calls ``before_commit``, ``during_commit``, ``after_commit``
and ``after_delete`` (after each file it deletes). Executor point: ``after_upload`` (a commit group's objects are uploaded).
"""
from __future__ import annotations

DRIVER_POINTS = ("before_resolve", "before_commit", "during_commit", "after_commit", "after_delete")
EXECUTOR_POINTS = ("after_upload",)


class Hooks:
    """No-op hooks; subclass and override."""

    def driver(self, point: str) -> None:
        """Called on the driver at each of :data:`DRIVER_POINTS`."""

    def executor(self, point: str) -> None:
        """Called in an executor task at each of :data:`EXECUTOR_POINTS`."""

    def for_executors(self) -> "Hooks":
        """The hooks shipped to the executors (pickled with the batch context): none by default, so
        driver-only hooks may hold anything; a subclass with executor points returns a picklable self."""
        return NO_HOOKS


NO_HOOKS = Hooks()
