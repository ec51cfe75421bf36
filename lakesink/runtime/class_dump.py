"""``python -m lakesink.runtime.class_dump``: builds the class-data archive of local Spark sessions
(:mod:`lakesink.runtime.class_archive`) for the default jar directory; ``--dump FILE`` is the child process that
runs a short session and writes the archive as its JVM exits."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile

from lakesink.runtime.class_archive import ENV, QUIET, build, enabled
from lakesink.runtime.spark import default_jars_dir

__all__ = ["main"]


def _dump(tmp: str) -> int:
    """The child of :func:`build`: a local session doing what a sink batch does on the driver's JVM (a Delta
    table written and read, a Python UDF over Arrow, SQL), then the JVM's exit, which writes ``tmp``."""
    os.environ[ENV] = "0"  # this session writes the archive; it must not map an old one
    from lakesink.runtime.spark import get_spark

    spark = get_spark("lakesink-class-archive", master="local[1]",
                      conf={"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={tmp} {QUIET}",
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
    """``python -m lakesink.runtime.class_dump``: build the archive for the default jar directory."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--dump"] and len(argv) == 2:
        return _dump(argv[1])
    if not enabled():
        print(f"class archive: off ({ENV}={os.environ.get(ENV)})")
        return 0
    jars = sorted(str(p) for p in default_jars_dir().glob("*.jar"))
    path, what = build(jars)
    print(f"class archive: {what}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
