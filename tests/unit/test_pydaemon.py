"""lakesink.executor.pydaemon: Spark's Python daemon with the installed pyspark (bytecode) instead of pyspark.zip
(source compiled in every worker), only when both are the same version."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pyspark

from lakesink.executor.pydaemon import installed_pyspark_path

ZIP = Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip"


def test_the_zip_gives_way_to_the_same_installed_version():
    site = str(Path(pyspark.__file__).parent.parent)
    path = [str(ZIP), "/nowhere", site]
    assert installed_pyspark_path(path) == ["/nowhere", site]


def test_nothing_changes_without_a_zip_or_for_another_version(tmp_path):
    site = str(Path(pyspark.__file__).parent.parent)
    assert installed_pyspark_path([site]) is None
    other = tmp_path / "pyspark.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("pyspark/__init__.py", "")
        z.writestr("pyspark/version.py", '__version__: str = "0.0.1"\n')
    assert installed_pyspark_path([str(other), site]) is None
    assert installed_pyspark_path([str(ZIP), str(tmp_path / "empty")]) is None  # no installed pyspark


def test_a_worker_imports_compiled_pyspark(tmp_path):
    """What the daemon's workers get: with the zip first on PYTHONPATH, as Spark sets it, pyspark comes from the
    installed package after the daemon's path change."""
    code = ("import sys; from lakesink.executor.pydaemon import installed_pyspark_path; "
            "sys.path[:] = installed_pyspark_path(sys.path) or sys.path; import pyspark.worker; "
            "print(pyspark.__file__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": f"{ZIP}:{Path(__file__).parents[2]}", "PATH": "/usr/bin:/bin"}).stdout
    assert "pyspark.zip" not in out and out.strip().endswith("pyspark/__init__.py")


def _prints_ok(code: str) -> None:
    """Run ``code`` in a child interpreter (a preload changes the interpreter for good): it must print ok."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_the_daemon_preloads_what_tasks_import_so_forked_workers_have_it():
    """Every PRELOAD name imports (a renamed module would otherwise silently stop being preloaded); preload
    imports them and pandas through pyarrow's first conversion, skips what cannot be imported, and freezes the
    collector's view of what it loaded. Run in a child: the preload changes the interpreter for good."""
    code = ("import gc, sys; from lakesink.executor.pydaemon import PRELOAD, preload; "
            "done = preload(PRELOAD + ('lakesink.no_such_module',)); "
            "assert done == list(PRELOAD), done; "
            "assert all(m in sys.modules for m in PRELOAD); "
            "assert 'pandas' in sys.modules; "
            "assert gc.get_freeze_count() > 0; print('ok')")
    _prints_ok(code)


def test_the_local_workers_preload_list_imports_too():
    """The local engine's workers (lakesink.executor.local_worker) preload the same task modules, with cloudpickle
    instead of pyspark's worker: every name imports."""
    code = ("import sys; from lakesink.executor.local_worker import PRELOAD; "
            "from lakesink.executor.pydaemon import TASK_MODULES, preload; "
            "assert set(TASK_MODULES) < set(PRELOAD) and 'cloudpickle' in PRELOAD; "
            "assert 'pyarrow.compute' in TASK_MODULES; "  # not imported by pyarrow: each worker would import it
            "assert preload(PRELOAD) == list(PRELOAD); print('ok')")
    _prints_ok(code)


def test_the_local_workers_convert_python_lists_without_importing_pandas():
    """preload(pandas=False), as the local engine's workers preload: pyarrow's conversions of Python lists (what the
    tasks do) no longer import pandas; once pandas is imported after all (a plugin), pyarrow converts its objects
    as before (a categorical Series is a dictionary array, not a failed sequence of strings and NaN)."""
    code = ("import sys; from lakesink.executor.local_worker import PRELOAD; "
            "from lakesink.executor.pydaemon import preload; import pyarrow as pa; "
            "assert preload(PRELOAD, pandas=False) == list(PRELOAD); "
            "from lakesink.executor.pydaemon import skip_pandas_probe; finders = len(sys.meta_path); "
            "assert not skip_pandas_probe() and len(sys.meta_path) == finders; "  # a second call adds nothing
            "pa.array([1, 2]); pa.array([b'x', None], pa.binary()); pa.Table.from_pylist([{'a': 'x'}]); "
            "assert 'pandas' not in sys.modules, 'pandas imported'; "
            "import pandas as pd; "
            "assert pa.array(pd.Series(['a', None], dtype='category')).type == pa.dictionary(pa.int8(), pa.string()); "
            "df = pa.table({'a': [1, 2]}).to_pandas(); assert list(df['a']) == [1, 2]; "
            "print('ok')")
    _prints_ok(code)
