"""`lakesink setup` and what a command says when something it needs is not installed (lakesink.runtime.jars):
the pinned artifacts match the project's poms, a download is checked against its pinned SHA-256 (a corrupted
file is not installed), the sets are found where setup put them, and a missing set, Java or moto is one line
naming what brings it, exit 5."""
from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from lakesink.errors import EXIT_UNREACHABLE, NotInstalledError, SetupError
from lakesink.runtime import jars

ROOT = Path(__file__).resolve().parents[2]


def test_the_lock_was_written_from_the_poms_in_the_checkout():
    for kind, digest in jars.pom_digests().items():
        pom = ROOT / "jvm" / kind / "pom.xml"
        assert hashlib.sha256(pom.read_bytes()).hexdigest() == digest, (
            f"{pom} changed since lakesink/runtime/jars.lock was written: run scripts/lock-jars")
    assert set(jars.pom_digests()) == set(jars.SETS)


def test_every_direct_dependency_of_the_spark_pom_is_pinned_at_its_version():
    m = "{http://maven.apache.org/POM/4.0.0}"
    root = ET.parse(ROOT / "jvm" / "spark" / "pom.xml").getroot()
    props = {p.tag[len(m):]: (p.text or "").strip() for p in root.findall(f"{m}properties/*")}
    pinned = {a.path for a in jars.locked("spark")}
    for dep in root.findall(f"{m}dependencies/{m}dependency"):
        g, a, v = (re.sub(r"\$\{([^}]+)\}", lambda x: props[x.group(1)], dep.findtext(f"{m}{t}").strip())
                   for t in ("groupId", "artifactId", "version"))
        assert f"{g.replace('.', '/')}/{a}/{v}/{a}-{v}.jar" in pinned
    assert all(re.fullmatch(r"[0-9a-f]{64}", a.sha256) and a.size > 0 for k in jars.SETS for a in jars.locked(k))


@pytest.fixture
def fake_lock(tmp_path, monkeypatch):
    """A lock pinning two small jars, and a Maven-layout mirror serving them."""
    mirror = tmp_path / "mirror"
    lines = []
    for name, body in (("a", b"PK first jar"), ("b", b"PK second jar, longer")):
        rel = f"org/example/{name}/1.0/{name}-1.0.jar"
        (mirror / rel).parent.mkdir(parents=True)
        (mirror / rel).write_bytes(body)
        lines.append(f"spark {hashlib.sha256(body).hexdigest()} {len(body)} {rel}")
    lock = tmp_path / "jars.lock"
    lock.write_text("# test\n" + "\n".join(lines) + "\n")
    monkeypatch.setattr(jars, "LOCK", lock)
    return mirror


def test_fetch_downloads_checks_and_then_only_compares_its_stamp(fake_lock, tmp_path):
    dest = tmp_path / "cache"
    (dest / "spark").mkdir(parents=True)
    (dest / "spark" / "a-0.9.jar").write_bytes(b"an older version")  # would clash on the class path
    r = jars.fetch("spark", dest, fake_lock.as_uri())
    assert (r.files, r.downloaded, r.up_to_date) == (2, 2, False)
    assert sorted(p.name for p in (dest / "spark").glob("*.jar")) == ["a-1.0.jar", "b-1.0.jar"]
    again = jars.fetch("spark", dest, fake_lock.as_uri())
    assert (again.downloaded, again.up_to_date) == (0, True)


def test_a_corrupted_download_is_not_installed_and_fails_in_one_line(fake_lock, tmp_path):
    (fake_lock / "org/example/b/1.0/b-1.0.jar").write_bytes(b"PK second jar, tampered")
    with pytest.raises(SetupError) as e:
        jars.fetch("spark", tmp_path / "cache", fake_lock.as_uri())
    msg = str(e.value)
    assert "\n" not in msg and "b-1.0.jar" in msg and "SHA-256" in msg and "pinned" in msg, msg
    assert e.value.exit_code == EXIT_UNREACHABLE
    assert not (tmp_path / "cache" / "spark" / "b-1.0.jar").exists()
    assert not (tmp_path / "cache" / "spark" / jars.STAMP).exists()
    assert not list((tmp_path / "cache" / "spark").glob(".*part"))


def test_an_unreachable_repository_is_one_line_naming_the_url(fake_lock, tmp_path):
    with pytest.raises(SetupError, match=r"cannot download file:///nowhere/org/example/.*LAKESINK_MAVEN_URL"):
        jars.fetch("spark", tmp_path / "cache", "file:///nowhere")


def test_sets_are_found_in_the_user_cache_setup_fills(fake_lock, tmp_path, monkeypatch):
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path / "c"))
    monkeypatch.delenv(jars.SET_ENV["spark"], raising=False)
    monkeypatch.setattr(jars, "checkout_dir", lambda: tmp_path / "no-checkout")
    with pytest.raises(NotInstalledError) as e:
        jars.find_dir("spark", "sql")
    assert str(e.value) == (f"sql needs the Spark jars (Kafka source, Delta, S3A), not found in "
                            f"{tmp_path / 'c' / 'jars' / 'spark'}: run `lakesink setup` to download them "
                            f"(or set $LAKESINK_JARS_DIR)")
    assert e.value.exit_code == EXIT_UNREACHABLE
    jars.fetch("spark", None, fake_lock.as_uri())
    assert jars.find_dir("spark") == tmp_path / "c" / "jars" / "spark"
    from lakesink.runtime.spark import default_jars_dir

    assert default_jars_dir() == tmp_path / "c" / "jars" / "spark"
    # the class archive of those jars sits beside them, where `python -m lakesink.runtime.class_dump` builds it
    from lakesink.runtime.class_archive import archive_path

    assert archive_path(sorted(str(p) for p in default_jars_dir().glob("*.jar"))).parent == tmp_path / "c" / "jars"


def test_no_java_is_one_line_naming_what_to_install(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NotInstalledError, match=r"^sql needs Java >= 17, not found .*install a JDK"):
        jars.require_java("sql")


def _cli_without_moto(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``lakesink ARGS`` in a process where ``import moto`` finds nothing (as in a plain pip install)."""
    code = ("import sys; sys.modules['moto'] = None\n"
            "from lakesink.cli.process import entry_point; entry_point(sys.argv[1:])")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args, command", [(["dev", "up"], "dev up"), (["demo"], "demo")])
def test_the_local_stack_without_moto_names_the_extra(args, command, tmp_path):
    r = _cli_without_moto(args, tmp_path)
    assert r.returncode == EXIT_UNREACHABLE, r.stderr
    assert r.stderr == (f"lakesink: error: {command} needs moto for its local S3 endpoint, which is not "
                        f"installed: pip install 'lakesink[local]'\n")
    assert not (tmp_path / ".lakesink" / "dev-stack.json").exists()


def test_dev_up_without_the_registry_download_names_setup_or_no_registry(tmp_path, monkeypatch):
    from lakesink.devstack.stack import LocalStack

    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path / "c"))
    monkeypatch.setenv(jars.SET_ENV["registry"], "")
    monkeypatch.setattr(jars, "checkout_dir", lambda: tmp_path / "no-checkout")
    kafka = tmp_path / "c" / "jars" / "kafka"
    kafka.mkdir(parents=True)
    (kafka / "k.jar").write_bytes(b"PK")
    LocalStack(registry=False).check_installed("dev up")  # nothing missing without a registry
    with pytest.raises(NotInstalledError, match=r"^dev up needs the Schema Registry \(Apicurio\), not found in .*: "
                                                r"run `lakesink setup --registry`.*; or leave it out: --no-registry$"):
        LocalStack().check_installed("dev up")


def test_setup_is_a_command_with_its_options():
    from lakesink.cli.main import build_parser

    args = build_parser().parse_args(["setup", "--registry", "--from", "/m2", "--dir", "/d"])
    assert (args.registry, args.from_dir, args.dir, args.class_archive) == (True, "/m2", "/d", False)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["setup", "--from", "/m2", "--maven-url", "http://x"])


def test_a_command_missing_the_jars_names_itself_and_setup(tmp_path, monkeypatch, capsys, no_active_spark_session):
    from lakesink.cli.main import main

    cfg = tmp_path / "job.properties"
    cfg.write_text("name=j\ntopics=t\nformat.class=json\nflush.size=10\ns3.bucket.name=bucket\ns3.region=us-east-1\n"
                   "store.url=http://127.0.0.1:1\naws.access.key.id=testing\naws.secret.access.key=testing\n"
                   "manifest.location=s3a://bucket/m\nkafka.bootstrap.servers=127.0.0.1:1\n")
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path / "c"))
    monkeypatch.setenv(jars.SET_ENV["spark"], "")
    monkeypatch.setattr(jars, "checkout_dir", lambda: tmp_path / "no-checkout")
    assert main(["sql", "--config", str(cfg), "--engine", "spark", "SELECT 1"]) == EXIT_UNREACHABLE
    assert capsys.readouterr().err == (
        f"lakesink: error: sql needs the Spark jars (Kafka source, Delta, S3A), not found in "
        f"{tmp_path / 'c' / 'jars' / 'spark'}: run `lakesink setup` to download them (or set $LAKESINK_JARS_DIR)\n")
