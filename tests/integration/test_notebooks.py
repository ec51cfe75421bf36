"""Every notebook under notebooks/ runs top to bottom in a fresh Python process of its own, as a kernel
would run it (code cells executed in order in one namespace; its own Spark session and local stack)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))

RUNNER = r"""
import json, sys
nb = json.load(open(sys.argv[1]))
ns = {"__name__": "__notebook__"}
try:
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{sys.argv[1]}[cell {i}]", "exec"), ns)
finally:
    if "stack" in ns:
        ns["stack"].stop()
print("NOTEBOOK OK")
"""


@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(path)], capture_output=True, text=True, timeout=540,
                          cwd=tmp_path)
    assert proc.returncode == 0 and "NOTEBOOK OK" in proc.stdout, (proc.stdout[-3000:] + proc.stderr[-5000:])


def test_there_is_a_notebook():
    assert NOTEBOOKS
