"""Every notebook under notebooks/ runs top to bottom in a fresh Python process of its own, as a kernel
would run it: code cells executed in order in one namespace, with its own Spark session, and the test's
parameters applied right after the cell tagged ``parameters`` (where papermill injects them).

The quickstart runs self-contained (it starts its own local stack, the path a new user takes); the other two are
given the test session's broker, S3 endpoint and registry as parameters, the path a cluster user takes
(endpoints passed in, nothing started by the notebook).

Each run is quiet (issue #28 item 6): its stderr holds no Spark banner, log4j/SLF4J line, progress bar, Python
traceback or librdkafka line (:func:`support.noise.noise_lines`) -- the session the notebooks get from
``lakesink.get_spark`` logs to a file; ``LAKESINK_VERBOSE=1`` brings it back (tests/integration/test_quiet_runs.py)."""
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

RUNNER = r"""
import json, sys
nb = json.load(open(sys.argv[1]))
params = json.loads(sys.argv[2])
ns = {"__name__": "__notebook__"}
try:
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{sys.argv[1]}[cell {i}]", "exec"), ns)
            if "parameters" in cell["metadata"].get("tags", []):
                ns.update(params)
finally:
    if ns.get("stack") is not None:
        ns["stack"].stop()
print("NOTEBOOK OK " + json.dumps({"manifest_location": ns.get("manifest_location"),
                                   "started_stack": ns.get("stack") is not None}))
"""


def run_notebook(name: str, params: dict, cwd: Path) -> dict:
    logs = cwd / "spark-logs"
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(NOTEBOOK_DIR / f"{name}.ipynb"), json.dumps(params)],
                          capture_output=True, text=True, timeout=540, cwd=cwd,
                          env={**os.environ, "LAKESINK_LOG_DIR": str(logs)})
    ok = [line for line in proc.stdout.splitlines() if line.startswith("NOTEBOOK OK ")]
    assert proc.returncode == 0 and ok, (proc.stdout[-3000:] + proc.stderr[-5000:])
    # before: 43, 10 and 27 stderr lines (quickstart, schema_evolution, restore_and_query)
    assert noise_lines(proc.stderr) == [], proc.stderr[-5000:]
    # ... which went to the session's log file instead
    assert any(noise_lines(p.read_text()) for p in logs.iterdir()), [p.name for p in logs.iterdir()]
    return json.loads(ok[-1][len("NOTEBOOK OK "):])


def test_the_three_notebooks_are_parameterised_and_clean():
    assert {p.stem for p in NOTEBOOKS} >= {"quickstart", "schema_evolution", "restore_and_query"}
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        tagged = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
        assert len(tagged) == 1 and tagged[0]["cell_type"] == "code", path.name
        assert "bootstrap_servers = None" in "".join(tagged[0]["source"]), path.name
        assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), path.name


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
    assert out == {"manifest_location": f"s3a://{endpoints['bucket']}/_lakesink/{topic}", "started_stack": False}
