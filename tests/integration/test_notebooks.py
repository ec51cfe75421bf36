"""Every notebook under notebooks/ runs top to bottom in a Jupyter kernel of its own (nbclient and ipykernel, as
``jupyter nbconvert --execute`` or papermill would run it), with its own Spark session, and the test's parameters in
a cell right after the cell tagged ``parameters`` (where papermill injects them). The executed notebook, outputs
and all, is written next to the test's files.

The quickstart runs self-contained (it starts its own local stack, the path a new user takes); the other two are
given the test session's broker, S3 endpoint and registry as parameters, the path a cluster user takes
(endpoints passed in, nothing started by the notebook).

Each notebook's pictures (issue #31 item 5) are in its outputs: a cell that shows a ``lakesink.notebook`` chart has
a PNG output of that chart's title, not an empty one, of a non-trivial size.

Each run is quiet (issue #28 item 6): neither the runner's stderr nor a stream output of the executed notebook holds a
Spark banner, log4j/SLF4J line, progress bar, Python traceback or librdkafka line (:func:`support.noise.noise_lines`)
-- the session the notebooks get from ``lakesink.session`` logs to a file; ``LAKESINK_VERBOSE=1`` brings it back
(tests/integration/test_quiet_runs.py)."""
import ast
import base64
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support.noise import noise_lines

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))

#: The charts each notebook shows: the call in a cell's source -> the title of the PNG that cell must output.
CHARTS = {
    "quickstart": {"hourly_chart(": "Archived records and bytes per hour (record time, UTC)",
                   "sizes_chart(": "Object size distribution",
                   "lag_chart(": "Lag: records on the broker not yet archived",
                   "coverage_chart(": "Offset coverage: archived objects and gaps"},
    "schema_evolution": {"schema_chart(": "Schema versions over time (record time, UTC)"},
    "restore_and_query": {"coverage_chart(": "Offset coverage: archived objects and gaps"},
}

# Runs in a process of its own (the kernel inherits its environment and working directory). The stack is stopped
# whatever happens (a kernel killed on a failed cell would leave the broker running).
RUNNER = r"""
import json, sys
import nbformat
from nbclient import NotebookClient

source, executed, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
nb = nbformat.read(source, as_version=4)
at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])) + 1
nb.cells.insert(at, nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in params.items()),
                                              metadata={"tags": ["injected-parameters"]}))
client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": "."}})
result = nbformat.v4.new_code_cell('import json\nprint("NOTEBOOK OK " + json.dumps({"manifest_location": '
                                   'manifest_location, "started_stack": stack is not None}))')
cleanup = nbformat.v4.new_code_cell('if globals().get("stack") is not None:\n    stack.stop()')
with client.setup_kernel():
    try:
        for i, cell in enumerate(nb.cells):
            client.execute_cell(cell, i)
        nb.cells.append(result)
        client.execute_cell(result, len(nb.cells) - 1)
    finally:
        nb.cells.append(cleanup)
        client.execute_cell(cleanup, len(nb.cells) - 1)
        nbformat.write(nb, executed)
print("".join(o.get("text", "") for o in result.outputs))
"""


def run_notebook(name: str, params: dict, cwd: Path) -> dict:
    logs = cwd / "spark-logs"
    executed = cwd / f"{name}.executed.ipynb"
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(NOTEBOOK_DIR / f"{name}.ipynb"), str(executed),
                           json.dumps(params)], capture_output=True, text=True, timeout=540, cwd=cwd,
                          env={**os.environ, "LAKESINK_LOG_DIR": str(logs)})
    ok = [line for line in proc.stdout.splitlines() if line.startswith("NOTEBOOK OK ")]
    assert proc.returncode == 0 and ok, (proc.stdout[-3000:] + proc.stderr[-5000:])
    nb = json.loads(executed.read_text())
    streams = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                      for o in c["outputs"] if o["output_type"] == "stream")
    # before: 43, 10 and 27 stderr lines (quickstart, schema_evolution, restore_and_query)
    assert noise_lines(proc.stderr) == [], proc.stderr[-5000:]
    assert noise_lines(streams) == [], streams[-5000:]
    # what a cell prints fits a screen (the quickstart's config was one line of 1,872 characters)
    assert max(map(len, streams.splitlines())) <= 160, max(streams.splitlines(), key=len)
    # ... which went to the session's log file instead
    assert any(noise_lines(p.read_text()) for p in logs.iterdir()), [p.name for p in logs.iterdir()]
    assert_charts(name, nb)
    return json.loads(ok[-1][len("NOTEBOOK OK "):])


def assert_charts(name: str, nb: dict) -> None:
    """Each chart cell of CHARTS[name] output one PNG of that title, with something drawn in it."""
    for call, title in CHARTS[name].items():
        (cell,) = [c for c in nb["cells"] if c["cell_type"] == "code" and call in "".join(c["source"])]
        images = [o for o in cell["outputs"] if "image/png" in o.get("data", {})]
        assert [o["metadata"]["lakesink"] for o in images] == [{"title": title, "empty": False}], cell["outputs"]
        png = base64.b64decode(images[0]["data"]["image/png"])
        assert png.startswith(b"\x89PNG") and len(png) > 10_000, (call, len(png))


def test_the_three_notebooks_are_parameterised_and_clean():
    assert {p.stem for p in NOTEBOOKS} >= {"quickstart", "schema_evolution", "restore_and_query"}
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        tagged = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
        assert len(tagged) == 1 and tagged[0]["cell_type"] == "code", path.name
        assert "bootstrap_servers = None" in "".join(tagged[0]["source"]), path.name
        assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), path.name


#: What a notebook may import from lakesink: the public API, the notebook helpers and the local stack.
PUBLIC = {"lakesink", "lakesink.notebook", "lakesink.devstack.stack"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_use_the_public_api_show_and_widgets(path):
    """No internal module (lakesink.driver, .executor, .wiring, ...), no bare .show(): tables and charts go through
    lakesink.notebook.show (display() on Databricks), parameters through its widgets."""
    sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    imported = set()
    for node in (n for src in sources for n in ast.walk(ast.parse(src))):
        if isinstance(node, ast.ImportFrom) and node.module.startswith("lakesink"):
            imported |= {node.module} | {f"{node.module}.{a.name}" for a in node.names
                                         if node.module == "lakesink" and a.name in ("wiring", "driver", "executor")}
        elif isinstance(node, ast.Import):
            imported |= {a.name for a in node.names if a.name.startswith("lakesink")}
        elif isinstance(node, ast.Attribute) and node.attr == "show":
            raise AssertionError(f"{path.name}: .show() in {ast.unparse(node)}: use lakesink.notebook.show")
    assert imported <= PUBLIC, imported - PUBLIC
    assert any("widgets(globals()" in src for src in sources) and any("show(" in src for src in sources)


@pytest.mark.timeout(600)
def test_quickstart_self_contained(tmp_path):
    out = run_notebook("quickstart", {"job_name": "qs-ci"}, tmp_path)
    assert out == {"manifest_location": "s3a://archive/_lakesink/qs-ci", "started_stack": True}


@pytest.fixture
def endpoints(kafka, s3, bucket, schema_registry_url) -> dict:
    """Parameters pointing a notebook at the test session's services (as on a cluster)."""
    return {"bootstrap_servers": kafka.bootstrap_servers, "s3_endpoint": s3.endpoint_url,
            "schema_registry_url": schema_registry_url, "aws_access_key_id": s3.access_key,
            "aws_secret_access_key": s3.secret_key, "bucket": bucket}


@pytest.mark.timeout(600)
def test_schema_evolution_with_given_endpoints(kafka, endpoints, tmp_path):
    topic = f"users-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=2)
    out = run_notebook("schema_evolution", {**endpoints, "topic": topic, "job_name": topic}, tmp_path)
    assert out == {"manifest_location": f"s3a://{endpoints['bucket']}/_lakesink/{topic}", "started_stack": False}


@pytest.mark.timeout(600)
def test_restore_and_query_with_given_endpoints(kafka, endpoints, tmp_path):
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=3)
    kafka.create_topic(f"{topic}-restored", partitions=3)
    out = run_notebook("restore_and_query", {**endpoints, "topic": topic, "job_name": topic,
                                             "restore_to": f"{topic}-restored"}, tmp_path)
    assert out == {"manifest_location": f"s3a://{endpoints['bucket']}/_lakesink/{topic}",
                   "started_stack": False}
