"""The JVM class-data archive of local Spark sessions (lakesink.runtime.class_archive): where it lives, when a
session maps it, and that it only ever appears whole (a JVM crashes on a truncated archive)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lakesink.runtime import class_archive
from lakesink.runtime.class_archive import archive_path, build, driver_options, enabled, java_options


@pytest.fixture
def jars(tmp_path, monkeypatch) -> list[str]:
    d = tmp_path / "jars" / "spark"
    d.mkdir(parents=True)
    for name in ("a.jar", "b.jar"):
        (d / name).write_bytes(b"PK" + name.encode())
    monkeypatch.setattr("lakesink.runtime.spark.default_jars_dir", lambda: d)
    monkeypatch.delenv(class_archive.ENV, raising=False)
    return sorted(str(p) for p in d.glob("*.jar"))


def test_the_archive_sits_beside_the_jar_directory_keyed_by_the_jars(jars):
    path = archive_path(jars)
    assert path.parent == Path(jars[0]).parent.parent and path.name.startswith("spark-classes-")
    assert archive_path(list(reversed(jars))) == path
    st = os.stat(jars[0])
    os.utime(jars[0], ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a jar replaced: another archive
    assert archive_path(jars) != path
    assert archive_path([]) is None


def test_a_session_maps_the_archive_only_when_it_is_built_and_enabled(jars, monkeypatch):
    given = "-Dlog4j2.configurationFile=file:/x"
    assert driver_options(jars, given) == given  # not built
    archive_path(jars).write_bytes(b"built")
    assert driver_options(jars, given) == f"{java_options(archive_path(jars))} {given}"
    assert driver_options(jars).startswith(f"-XX:SharedArchiveFile={archive_path(jars)} ")
    assert "-Xlog:cds=off" in java_options(archive_path(jars))  # a JVM refusing it says nothing
    for off in ("0", "false", "NO"):
        monkeypatch.setenv(class_archive.ENV, off)
        assert not enabled() and driver_options(jars, given) == given


def _fake_dump(payload: bytes | None, rc: int):
    def run(cmd, **kw):
        tmp = Path(cmd[-1])
        assert cmd[-2] == "--dump" and tmp.name.endswith(".tmp")
        if payload is not None:
            tmp.write_bytes(payload)
        return subprocess.CompletedProcess(cmd, rc, "", "" if rc == 0 else "Error occurred during initialization of VM")
    return run


def test_build_publishes_the_archive_by_rename_after_a_clean_exit(jars, monkeypatch):
    monkeypatch.setattr(class_archive.subprocess, "run", _fake_dump(b"classes", 0))
    path, what = build(jars)
    assert path == archive_path(jars) and path.read_bytes() == b"classes" and "wrote" in what
    assert not list(path.parent.glob("*.tmp"))
    assert build(jars) == (path, f"{path} exists")  # built once


@pytest.mark.parametrize("payload, rc", [(b"half an arch", 1), (None, 0), (b"", 0)])
def test_a_failed_or_empty_dump_leaves_no_archive_and_no_temp_file(jars, monkeypatch, payload, rc):
    monkeypatch.setattr(class_archive.subprocess, "run", _fake_dump(payload, rc))
    path, what = build(jars)
    assert path is None and what.startswith("no archive")
    assert not archive_path(jars).exists() and not list(archive_path(jars).parent.glob("spark-classes-*"))


def test_a_new_build_removes_archives_of_other_jar_sets(jars, monkeypatch):
    old = archive_path(jars).parent / "spark-classes-0000000000000000.jsa"
    old.write_bytes(b"old")
    monkeypatch.setattr(class_archive.subprocess, "run", _fake_dump(b"new", 0))
    path, _ = build(jars)
    assert path.read_bytes() == b"new" and not old.exists()
