"""The local test session maps the JVM class-data archive scripts/bootstrap built (lakesink.runtime.class_archive):
the option is on the driver JVM's command line, and the archive file is mapped into its memory; the suite's
``$SPARK_SUBMIT_OPTS`` (tests/conftest.py: the C1 compiler alone) reaches the driver JVM too."""
from __future__ import annotations

from pathlib import Path

from lakesink.runtime.class_archive import archive_path
from lakesink.runtime.spark import default_jars_dir


def test_the_session_jvm_maps_the_class_archive(spark):
    path = archive_path(sorted(str(p) for p in default_jars_dir().glob("*.jar")))
    assert path is not None and path.is_file(), f"scripts/bootstrap builds {path}"
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()  # noqa: SLF001
    args = list(runtime.getInputArguments())
    assert f"-XX:SharedArchiveFile={path}" in args and "-XX:TieredStopAtLevel=1" in args, args
    maps = Path(f"/proc/{runtime.getPid()}/maps").read_text()
    assert str(path) in maps, "the JVM refused the archive (class path or JDK build differs from the dump's)"
    assert spark.range(10).count() == 10
