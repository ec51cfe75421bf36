"""The wheel `python -m build` makes stands alone: from a fresh virtualenv, outside the checkout, with PYTHONPATH
unset (so the lakesink that runs is the wheel's, not the source tree's) and no jar directory named, `lakesink
setup` fetches the pinned jars (checking every SHA-256: a corrupted jar fails in one line) into the user cache,
where `sink`, `sql`, `restore --dry-run` and `dev up`/`down` find them; before it, `sql` and `dev up` say in one
line to run it.

setup reads a file:// Maven mirror built from the checkout's .cache/jars here (fast, offline); the same code
against Maven Central is what bench/first_run.py measures (`lakesink setup` through scripts/bootstrap)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from lakesink.runtime import jars
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
    assert "lakesink/runtime/jars.lock" in names  # what `lakesink setup` downloads
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

    assert r.returncode == 0 and r.stdout.startswith(f"lakesink {__version__}; native kernels"), r.stderr


@pytest.fixture(scope="module")
def maven_mirror(tmp_path_factory) -> Path:
    """A Maven-layout directory serving the pinned spark and kafka jars (links to the checkout's .cache/jars)."""
    mirror = tmp_path_factory.mktemp("m2")
    for kind in ("spark", "kafka"):
        for art in jars.locked(kind):
            (mirror / art.path).parent.mkdir(parents=True, exist_ok=True)
            (mirror / art.path).symlink_to(ROOT / ".cache" / "jars" / kind / art.name)
    return mirror


def _wheel_run(venv: Path, args: list[str], cache: Path, cwd: Path, **extra: str) -> tuple[int, str]:
    """``lakesink ARGS`` from the wheel's venv: no PYTHONPATH, no jar directory named, the user cache ``cache``."""
    env = {"LAKESINK_CACHE_DIR": str(cache), **{v: "" for v in jars.SET_ENV.values()}, **extra}
    old = os.environ.pop("PYTHONPATH", None)
    try:
        return run_cli(args, env_extra=env, command=[str(venv / "bin" / "lakesink")], cwd=cwd)
    finally:
        if old is not None:
            os.environ["PYTHONPATH"] = old


def _one_error(rc: int, out: str) -> str:
    errors = [ln for ln in out.splitlines() if ln.startswith("lakesink:")]
    assert rc == 5 and len(errors) == 1 and "Traceback" not in out, (rc, out[-3000:])
    return errors[0]


def test_wheel_setup_then_sink_sql_and_restore_dry_run(wheel_venv, maven_mirror, kafka, s3, bucket, topic_name,
                                                       tmp_path):
    cache = tmp_path / "user-cache"
    kafka.create_topic(topic_name, partitions=1)
    produce(kafka, topic_name, json_payloads(20))
    cfg = write_config(tmp_path, base_config(kafka, s3, bucket, topic_name, **{"s3.credentials.source": "static"}))
    sql = ["sql", "--config", cfg, "SELECT kafka_partition, sum(record_count) AS n FROM manifest "
           "WHERE kind = 'object' GROUP BY kafka_partition"]

    # before setup: one line naming the command that brings the jars (the Spark route; the default for this path
    # manifest is DuckDB, which needs none: it runs below)
    line = _one_error(*_wheel_run(wheel_venv, sql[:3] + ["--engine", "spark"] + sql[3:], cache, tmp_path))
    assert "needs the Spark jars" in line and "run `lakesink setup`" in line, line

    # a corrupted jar on the mirror: refused in one line, not installed
    bad = tmp_path / "bad-m2"
    shutil.copytree(maven_mirror, bad, symlinks=True)
    victim = min(jars.locked("spark"), key=lambda a: a.size)
    (bad / victim.path).unlink()
    (bad / victim.path).write_bytes((ROOT / ".cache" / "jars" / "spark" / victim.name).read_bytes()[:-1] + b"X")
    line = _one_error(*_wheel_run(wheel_venv, ["setup", "--from", str(bad)], cache, tmp_path))
    assert victim.name in line and "SHA-256" in line and "nothing was installed" in line, line
    assert not (cache / "jars" / "spark" / victim.name).exists()

    rc, out = _wheel_run(wheel_venv, ["setup", "--from", str(maven_mirror)], cache, tmp_path)
    assert rc == 0, out[-3000:]
    assert "spark: 1 of 18 files downloaded" in out and "kafka: 46 of 46 files downloaded" in out, out
    rc, out = _wheel_run(wheel_venv, ["setup", "--from", str(maven_mirror)], cache, tmp_path)
    assert (rc, out.splitlines()[0]) == (0, f"spark: 18 files up to date in {cache / 'jars' / 'spark'}"), out

    rc, out = _wheel_run(wheel_venv, ["sink", "--config", cfg, "--once", "--flush-tail"], cache, tmp_path)
    assert rc == 0, out
    assert "batch 0: 2 objects, 20 records" in out, out
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket, Prefix="topics/").get("Contents", [])]
    assert sorted(k.rsplit("+", 1)[1] for k in keys if k.endswith(".json")) == [
        "0000000000.json", "0000000010.json"], keys

    rc, out = _wheel_run(wheel_venv, ["verify", "--config", cfg], cache, tmp_path)  # every object read back
    assert rc == 0, out[-3000:]
    assert "2 object(s)" in out and "20 records; no fault" in out, out[-3000:]

    rc, out = _wheel_run(wheel_venv, ["--format", "json", *sql], cache, tmp_path)
    assert rc == 0, out[-3000:]
    assert '"n": 20' in out.strip().splitlines()[-1], out[-3000:]

    rc, out = _wheel_run(wheel_venv, ["--format", "json", "restore", "--config", cfg, "--to-topic", f"{topic_name}-copy",
                                      "--dry-run", "--master", "local[1]"], cache, tmp_path)
    assert rc == 0, out[-3000:]
    import json

    doc = json.loads(out.strip().splitlines()[-1])
    assert (doc["dry_run"], doc["records"], doc["produced"]) == (True, 20, 0), doc


def test_wheel_dev_up_and_down_after_setup(wheel_venv, maven_mirror, tmp_path):
    cache = tmp_path / "user-cache"
    line = _one_error(*_wheel_run(wheel_venv, ["dev", "up"], cache, tmp_path))
    assert line.startswith("lakesink: error: dev up needs the Kafka broker jars") and "`lakesink setup`" in line, line
    rc, out = _wheel_run(wheel_venv, ["setup", "--from", str(maven_mirror), "--no-kafka"], cache, tmp_path)
    assert rc == 0, out
    rc, out = _wheel_run(wheel_venv, ["setup", "--from", str(maven_mirror)], cache, tmp_path)
    assert rc == 0, out
    # the registry was not downloaded: dev up says how to get it, or to leave it out
    line = _one_error(*_wheel_run(wheel_venv, ["dev", "up"], cache, tmp_path))
    assert "`lakesink setup --registry`" in line and "--no-registry" in line, line
    # the demo needs no registry (issue #28 item 7: it is neither downloaded nor started for it)
    rc, out = _wheel_run(wheel_venv, ["demo", "--records", "100"], cache, tmp_path)
    assert rc == 0 and "== OK: 100 of 100 records archived exactly once in " in out, out[-3000:]
    try:
        rc, out = _wheel_run(wheel_venv, ["dev", "up", "--no-registry"], cache, tmp_path)
        assert rc == 0, out[-3000:]
        assert out.startswith(f"dev stack up (state: {tmp_path / '.lakesink' / 'dev-stack.json'}"), out
        assert "Schema Registry" not in out, out
        rc, out = _wheel_run(wheel_venv, ["--format", "json", "dev", "status"], cache, tmp_path)
        assert rc == 0, out
        import json

        doc = json.loads(out.strip().splitlines()[-1])
        assert doc["running"] is True and doc["ports_open"] == {"kafka": True, "s3": True}, doc
    finally:
        rc, out = _wheel_run(wheel_venv, ["dev", "down"], cache, tmp_path)
    assert (rc, out) == (0, "dev stack stopped\n"), out


def test_setup_from_a_checkout_installs_then_finds_both_sets(maven_mirror, tmp_path):
    """``lakesink setup`` as a checkout runs it (``python -m lakesink.cli``), on a valid mirror: both sets installed
    and checked, then a second run finds them up to date."""
    target = tmp_path / "jars"
    rc, out = run_cli(["setup", "--from", str(maven_mirror), "--dir", str(target)])
    assert rc == 0, out[-3000:]
    assert "spark: 18 of 18 files downloaded" in out and "kafka: 46 of 46 files downloaded" in out, out
    assert sorted(p.name for p in (target / "spark").glob("*.jar")) == sorted(a.name for a in jars.locked("spark"))
    rc, out = run_cli(["setup", "--from", str(maven_mirror), "--dir", str(target)])
    assert (rc, out.splitlines()[0]) == (0, f"spark: 18 files up to date in {target / 'spark'}"), out
