"""A class-data-sharing archive for local Spark sessions: the classes a session loads, mapped, not parsed.

A cold ``lakesink`` command spends seconds of its Spark start loading and verifying ~20,000 JVM classes
(Spark, Delta, Hadoop, the AWS SDK). Java 17's dynamic CDS archive holds them pre-parsed: a local session
started with ``-XX:SharedArchiveFile`` maps it instead (measured by hand here: session 6.2 → 4.2-5.0 s, first
job 3.5 → 2.4 s). :func:`build` writes one by running a short session with ``-XX:ArchiveClassesAtExit``
(``scripts/bootstrap`` calls it; ``python -m lakesink.class_archive`` does the same), and
:func:`lakesink.spark.get_spark` uses it for local masters when it is there.

Safety: a JVM maps a *truncated* archive and crashes (SIGBUS, tried here), so an archive only ever appears
under its final name by ``os.replace`` after the JVM that wrote it exited with status 0. Its name carries
a digest of what it depends on (the java binary, pyspark's version, every jar's path, size and mtime), and
the JVM itself refuses, silently with the log options below, an archive whose class path or JDK build
differs, so a stale archive costs nothing but its speed-up. ``LAKESINK_CLASS_ARCHIVE=0`` turns it off.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["ENV", "archive_path", "java_options", "driver_options", "enabled", "build", "main"]

#: ``0`` (or ``false``/``no``) disables the archive: neither used nor built
ENV = "LAKESINK_CLASS_ARCHIVE"
#: the JVM's own CDS messages (an archive it cannot use) stay off the user's terminal
_QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"


def enabled() -> bool:
    """Whether ``$LAKESINK_CLASS_ARCHIVE`` allows the archive (it does unless set to 0/false/no)."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no")


def archive_path(jars: list[str]) -> Path | None:
    """Where the archive for local sessions with ``jars`` on the class path lives (next to the jar directory),
    or None without jars."""
    if not jars:
        return None
    import pyspark

    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else (
        shutil.which("java") or "java")
    digest = hashlib.sha256(f"{os.path.realpath(java)}\0{pyspark.__version__}".encode())
    for jar in sorted(jars):
        st = os.stat(jar)
        digest.update(f"\0{jar}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return Path(jars[0]).resolve().parent.parent / f"spark-classes-{digest.hexdigest()[:16]}.jsa"


def java_options(archive: Path) -> str:
    """The driver JVM options that map ``archive``."""
    return f"-XX:SharedArchiveFile={archive} {_QUIET}"


def driver_options(jars: list[str], given: str = "") -> str:
    """``spark.driver.extraJavaOptions`` for a local session with ``jars``: the archive's options (when it is
    enabled and built) before ``given`` (so options given later win)."""
    archive = archive_path(jars) if enabled() else None
    if archive is None or not archive.is_file():
        return given
    return f"{java_options(archive)} {given}".strip()


def build(timeout_s: float = 600) -> tuple[Path | None, str]:
    """Build the archive for the default jar directory unless it exists: (path or None, what happened).
    Runs the session in a child process (a JVM per archive) and never raises for a JVM that cannot dump."""
    from lakesink.spark import default_jars_dir

    jars = sorted(str(p) for p in default_jars_dir().glob("*.jar"))
    final = archive_path(jars)
    if final is None:
        return None, "no jars"
    if final.is_file():
        return final, f"{final} exists"
    for stale in final.parent.glob("spark-classes-*.jsa*"):  # archives of other jar sets, dead builds
        stale.unlink(missing_ok=True)
    tmp = final.with_name(f"{final.name}.{os.getpid()}.tmp")
    try:
        proc = subprocess.run([sys.executable, "-m", "lakesink.class_archive", "--dump", str(tmp)],
                              capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return None, f"no archive: the dump exited {proc.returncode}: {tail[0]}"
        os.replace(tmp, final)
        return final, f"wrote {final} ({final.stat().st_size >> 20} MB)"
    except subprocess.TimeoutExpired:
        return None, f"no archive: the dump took over {timeout_s:g}s"
    finally:
        tmp.unlink(missing_ok=True)


def _dump(tmp: str) -> int:
    """The child of :func:`build`: a local session doing what a sink batch does on the driver's JVM (a Delta
    table written and read, a Python UDF over Arrow, SQL), then the JVM's exit, which writes ``tmp``."""
    os.environ[ENV] = "0"  # this session writes the archive; it must not map an old one
    from lakesink.spark import get_spark

    spark = get_spark("lakesink-class-archive", master="local[1]",
                      conf={"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={tmp} {_QUIET}",
                            "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    work = tempfile.mkdtemp(prefix="lakesink-class-archive-")
    try:
        df = spark.range(1000).selectExpr("id", "cast(id as string) as s", "current_timestamp() as ts")
        df.write.format("delta").save(os.path.join(work, "t"))
        spark.read.format("delta").load(os.path.join(work, "t")).groupBy("s").count().collect()
        spark.range(100).mapInArrow(lambda batches: batches, "id long").collect()
        spark.sql("select 1 as x").collect()
    finally:
        gateway = spark.sparkContext._gateway  # noqa: SLF001 - the JVM process pyspark started
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return 1
    proc.stdin.close()  # pyspark's gateway server exits on EOF: System.exit, which dumps the classes
    return proc.wait(timeout=300)


def main(argv: list[str] | None = None) -> int:
    """``python -m lakesink.class_archive``: build the archive for the default jar directory."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--dump"] and len(argv) == 2:
        return _dump(argv[1])
    if not enabled():
        print(f"class archive: off ({ENV}={os.environ.get(ENV)})")
        return 0
    path, what = build()
    print(f"class archive: {what}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
