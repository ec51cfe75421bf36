"""The wheel `python -m build` makes installs with no extra steps and runs: `lakesink --help` and one
`lakesink sink --once` against the local stack, from a fresh virtualenv, outside the checkout, with
PYTHONPATH unset — so the lakesink that runs is the wheel's, not the source tree's."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from support.archive_checks import base_config, json_payloads, produce, run_cli, write_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """Build the wheel once (no isolation: setuptools is already here) and install it with --no-deps into a
    venv that sees this interpreter's installed dependencies through a .pth line (not its editable lakesink,
    whose finder .pth is not processed from an added path)."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", str(work / "dist"), str(ROOT)],
                   check=True, capture_output=True, cwd=ROOT)
    (whl,) = (work / "dist").glob("lakesink-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    assert "lakesink/runtime/log4j2-cli.properties" in names and "lakesink/credentials.py" in names
    assert any(n.endswith("entry_points.txt") for n in names)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    # install first: with the .pth in place pip would see the checkout's editable lakesink and skip it
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-index", str(whl)], check=True, capture_output=True, env=_env(), cwd=work)
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, **extra}


def test_wheel_console_script_help_runs_the_installed_package(wheel_venv, tmp_path):
    py, script = wheel_venv / "bin" / "python", wheel_venv / "bin" / "lakesink"
    where = subprocess.run([str(py), "-c", "import lakesink; print(lakesink.__file__)"], env=_env(),
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(str(wheel_venv)), where
    r = subprocess.run([str(script), "--help"], env=_env(), cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "sink" in r.stdout and "usage" in r.stdout.lower()
    r = subprocess.run([str(script), "--version"], env=_env(), cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    from lakesink import __version__

    assert (r.returncode, r.stdout.strip()) == (0, f"lakesink {__version__}"), r.stderr


def test_wheel_sink_once_against_the_local_stack(wheel_venv, kafka, s3, bucket, topic_name, tmp_path):
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(20))
    cfg = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{"s3.credentials.source": "static"}))
    # outside the checkout, so the installed package cannot be found beside the default jars: name them
    env = {"LAKESINK_JARS_DIR": str(ROOT / ".cache" / "jars" / "spark")}
    old = os.environ.pop("PYTHONPATH", None)
    try:
        rc, out = run_cli(["sink", "--config", cfg, "--once", "--flush-tail"], env_extra=env,
                          command=[str(wheel_venv / "bin" / "lakesink")], cwd=tmp_path)
    finally:
        if old is not None:
            os.environ["PYTHONPATH"] = old
    assert rc == 0, out
    assert "batch 0: 2 objects, 20 records" in out, out
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket, Prefix="topics/").get("Contents", [])]
    assert sorted(k.rsplit("+", 1)[1] for k in keys if k.endswith(".json")) == [
        "0000000000.json", "0000000010.json"], keys
