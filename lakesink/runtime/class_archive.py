"""A class-data-sharing archive for local Spark sessions: the classes a session loads, mapped, not parsed.

A cold ``lakesink`` command spends seconds of its Spark start loading and verifying ~20,000 JVM classes
(Spark, Delta, Hadoop, the AWS SDK). Java 17's dynamic CDS archive holds them pre-parsed: a local session
started with ``-XX:SharedArchiveFile`` maps it instead (measured by hand here: session 6.2 → 4.2-5.0 s, first
job 3.5 → 2.4 s). :func:`build` writes one by running a short session with ``-XX:ArchiveClassesAtExit``
(``scripts/bootstrap`` calls it, ``lakesink setup --class-archive`` too, for the jars in the user cache;
``python -m lakesink.runtime.class_dump`` does the same for whichever jar directory a session would use), and
:func:`lakesink.runtime.spark.get_spark` uses it for local masters when it is there.

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
from pathlib import Path

__all__ = ["ENV", "QUIET", "archive_path", "java_options", "driver_options", "enabled", "build"]

#: ``0`` (or ``false``/``no``) disables the archive: neither used nor built
ENV = "LAKESINK_CLASS_ARCHIVE"
#: the JVM's own CDS messages (an archive it cannot use) stay off the user's terminal
QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"


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
    return f"-XX:SharedArchiveFile={archive} {QUIET}"


def driver_options(jars: list[str], given: str = "") -> str:
    """``spark.driver.extraJavaOptions`` for a local session with ``jars``: the archive's options (when it is
    enabled and built) before ``given`` (so options given later win)."""
    archive = archive_path(jars) if enabled() else None
    if archive is None or not archive.is_file():
        return given
    return f"{java_options(archive)} {given}".strip()


def build(jars: list[str], timeout_s: float = 600) -> tuple[Path | None, str]:
    """Build the archive for local sessions with ``jars`` unless it exists: (path or None, what happened).
    Runs the session in a child process (``python -m lakesink.runtime.class_dump``, a JVM per archive) and never
    raises for a JVM that cannot dump."""
    final = archive_path(jars)
    if final is None:
        return None, "no jars"
    if final.is_file():
        return final, f"{final} exists"
    for stale in final.parent.glob("spark-classes-*.jsa*"):  # archives of other jar sets, dead builds
        stale.unlink(missing_ok=True)
    tmp = final.with_name(f"{final.name}.{os.getpid()}.tmp")
    try:
        proc = subprocess.run([sys.executable, "-m", "lakesink.runtime.class_dump", "--dump", str(tmp)],
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
