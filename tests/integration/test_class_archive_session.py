"""The local test session maps the JVM class-data archive scripts/bootstrap built (lakesink.runtime.class_archive):
the option is on the driver JVM's command line, and the archive file is mapped into its memory."""
from __future__ import annotations

from pathlib import Path

from lakesink.runtime.class_archive import archive_path
from lakesink.runtime.spark import default_jars_dir


def test_the_session_jvm_maps_the_class_archive(spark):
    path = archive_path(sorted(str(p) for p in default_jars_dir().glob("*.jar")))
    assert path is not None and path.is_file(), f"scripts/bootstrap builds {path}"
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()  # noqa: SLF001
    assert f"-XX:SharedArchiveFile={path}" in list(runtime.getInputArguments())
    maps = Path(f"/proc/{runtime.getPid()}/maps").read_text()
    assert str(path) in maps, "the JVM refused the archive (class path or JDK build differs from the dump's)"
    assert spark.range(10).count() == 10
