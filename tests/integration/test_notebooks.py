"""Every notebook under notebooks/ runs top to bottom (code cells executed in one namespace)."""
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, spark):  # `spark` first, so get_spark() in the notebook reuses the session
    nb = json.loads(path.read_text())
    ns: dict = {"__name__": "__notebook__"}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        try:
            exec(compile(src, f"{path.name}[cell {i}]", "exec"), ns)
        except Exception:
            if "stack" in ns:
                ns["stack"].stop()
            raise


def test_there_is_a_notebook():
    assert NOTEBOOKS
