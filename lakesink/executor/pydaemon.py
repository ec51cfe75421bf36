"""Spark's Python daemon (``spark.python.daemon.module``), run with the installed pyspark's compiled bytecode.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on its Python workers' path, and a module imported from
a zip is compiled from source in every worker process (the zip holds no bytecode): ~0.9 s of CPU for
``pyspark.worker`` alone on this project's machine (0.2 s from an installed pyspark), spent by each new worker
before its first record, and more for the ``pyspark.sql`` modules a task's closure imports. When the very same
pyspark version is installed next to lakesink (``pip install lakesink`` brings it, with bytecode), this daemon
takes the zip off ``sys.path`` and runs pyspark's own daemon, whose forked workers then import compiled modules.
With no installed pyspark, or another version, it changes nothing.

It also imports, once, what every lakesink task imports (:data:`PRELOAD`), before the daemon forks its workers:
each worker then starts with them in memory instead of importing them itself -- about a second of CPU per
worker on this project's machine, pandas the largest part (pyarrow imports it on its first conversion of a
Python list, to check for pandas types).

:func:`lakesink.runtime.spark.get_spark` sets it for the local sessions it creates (where lakesink is importable by the
workers' interpreter by construction); cluster sessions keep their own daemon.
"""
from __future__ import annotations

import sys
import zipfile
from importlib.machinery import PathFinder
from pathlib import Path

#: what ``spark.python.daemon.module`` names
MODULE = "lakesink.executor.pydaemon"

#: modules a lakesink task imports; what they import comes along (numpy with pyarrow, botocore with boto3, the
#: store, archiver and formats with the task). pyarrow.compute is not imported by pyarrow itself: each worker would
#: import it on its first batch. Spark's daemon and the local engine's workers both preload them.
TASK_MODULES = ("pyarrow", "pyarrow.compute", "confluent_kafka", "boto3", "lakesink.executor.task",
                "lakesink.executor.kafka_reader", "lakesink.executor.columnar")

#: what this daemon imports before it forks workers (:func:`preload`): pyspark's worker and the task modules
PRELOAD = ("pyspark.worker", *TASK_MODULES)


def _version_text(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("'\"")
    return None


def installed_pyspark_path(path: list[str]) -> list[str] | None:
    """``path`` without its pyspark zip, when the pyspark found there instead is the zip's version; else None."""
    zips = [p for p in path if p.endswith("pyspark.zip")]
    if not zips:
        return None
    rest = [p for p in path if p not in zips]
    spec = PathFinder.find_spec("pyspark", rest)
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        installed = _version_text((Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text())
        with zipfile.ZipFile(zips[0]) as z:
            zipped = _version_text(z.read("pyspark/version.py").decode())
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    return rest if installed is not None and installed == zipped else None


class _NoPandas:
    """A meta path finder that refuses ``pandas`` (installed for one pyarrow conversion: :func:`skip_pandas_probe`)."""

    @staticmethod
    def find_spec(name: str, path=None, target=None):
        if name == "pandas":
            raise ImportError("pandas is not probed in this process")
        return None


class _RearmOnPandas:
    """A meta path finder that, when pandas is imported after all (by a plugin, say), tells pyarrow once its import
    is done: the probe :func:`skip_pandas_probe` made said no, and pyarrow would treat a pandas object as a plain
    sequence until something asked it for pandas outright."""

    def find_spec(self, name: str, path=None, target=None):
        if name != "pandas":
            return None
        import importlib.util

        sys.meta_path.remove(self)  # once; and so that the lookup below finds the real pandas
        spec = importlib.util.find_spec("pandas")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module) -> None:
            run(module)
            import pyarrow

            pyarrow.table({"x": []}).to_pandas()  # asks for pandas outright: pyarrow's probe runs again, and finds it

        spec.loader.exec_module = exec_module
        return spec


def skip_pandas_probe() -> bool:
    """Let this process's pyarrow convert Python lists without importing pandas (the largest import
    of a local worker): pyarrow tries ``import pandas`` once, on its first conversion of a Python object, to tell
    pandas objects apart, and keeps the answer; here that try meets ImportError. Anything that asks pyarrow for
    pandas itself (``to_pandas``) still imports it then, and an ``import pandas`` later in the process makes pyarrow
    probe again (:class:`_RearmOnPandas`), so code that does use pandas converts as before. Used by the local engine's
    workers, which themselves never use pandas. False when pandas was already imported or the probe already
    skipped (nothing to do)."""
    import pyarrow

    if "pandas" in sys.modules or any(isinstance(f, _RearmOnPandas) for f in sys.meta_path):
        return False  # pandas there already, or probed without it already (one re-arming finder is enough)
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pyarrow.array([0])
    finally:
        sys.meta_path.remove(finder)
    sys.meta_path.insert(0, _RearmOnPandas())
    return True


def preload(modules: tuple[str, ...] = PRELOAD, pandas: bool = True) -> list[str]:
    """Import ``modules`` (and let pyarrow import pandas, unless ``pandas`` is False: :func:`skip_pandas_probe`) in
    this process, parse the S3 client's botocore data once (:func:`lakesink.credentials.warm_s3_models`), then
    freeze the collector's view of them, so forked workers share their pages instead of importing them (and the
    collector never copies them). A module that fails to import is left for the task to import, and fail, itself.
    Returns the imported names."""
    import gc
    import importlib

    done = []
    for name in modules:
        try:
            importlib.import_module(name)
            done.append(name)
        except Exception:  # noqa: BLE001 - the task's own import reports it
            pass
    if "boto3" in done:  # every task opens a store: its S3 client then finds botocore's data parsed
        try:
            from lakesink.credentials import warm_s3_models

            warm_s3_models()
        except Exception:  # noqa: BLE001 - the task's own client reports it
            pass
    try:
        if pandas:
            import pyarrow

            pyarrow.array([0])  # pyarrow's pandas check imports pandas on its first conversion: here, once
        else:
            skip_pandas_probe()
    except Exception:  # noqa: BLE001
        pass
    gc.freeze()
    return done


def main() -> None:
    better = installed_pyspark_path(sys.path)
    if better is not None:
        sys.path[:] = better
    preload()  # after the path change: pyspark and what it imports, compiled
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
