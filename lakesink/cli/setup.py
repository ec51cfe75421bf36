"""`lakesink setup`: download the pinned JVM artifacts a pip-installed lakesink runs with (logic in
:mod:`lakesink.runtime.jars`).

The Spark jars (Kafka source, Avro, Delta, S3A + AWS SDK) and the Kafka broker of ``lakesink dev up``/``demo`` by
default; the Schema Registry (Apicurio) with ``--registry``. Each file's SHA-256 is checked against the pin shipped
in the package. Safe to repeat: a set already in place is only compared with its stamp.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field

DESCRIPTION = """Download the JVM artifacts pip does not install, pinned with their SHA-256 in the package (the same
files as the project's jvm/*/pom.xml): the Spark jars every local Spark session needs (Kafka source, Avro, Delta,
S3A + AWS SDK, 680 MB), the Kafka broker jars of `lakesink dev up` and `lakesink demo` (45 MB) and, with
--registry, the Schema Registry (Apicurio, 115 MB). Into $LAKESINK_CACHE_DIR/jars (default ~/.cache/lakesink/jars),
where every command looks for them. From Maven Central unless --maven-url/$LAKESINK_MAVEN_URL or --from names
another Maven repository. A file whose checksum differs is not installed and the command exits 5."""


@dataclass
class SetupResult:
    """``lakesink setup``: one entry per artifact set."""

    sets: list = field(default_factory=list)  # lakesink.runtime.jars.FetchResult
    class_archive: str | None = None
    exit_code: int = 0

    def __str__(self) -> str:
        lines = []
        for r in self.sets:
            if r.up_to_date:
                lines.append(f"{r.set}: {r.files} files up to date in {r.dir}")
            elif not r.downloaded:
                lines.append(f"{r.set}: {r.files} files already there, SHA-256 checked, in {r.dir}")
            else:
                lines.append(f"{r.set}: {r.downloaded} of {r.files} files downloaded ({r.bytes / 1e6:.0f} MB, "
                             f"SHA-256 checked) into {r.dir}")
        if self.class_archive:
            lines.append(f"class archive: {self.class_archive}")
        return "\n".join(lines)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("setup", help="download the Spark and Kafka jars (pinned, checksummed) a pip install needs",
                       description=DESCRIPTION)
    p.add_argument("--registry", action="store_true", help="also the Schema Registry (Apicurio) of `dev up`")
    p.add_argument("--no-kafka", action="store_true", help="not the Kafka broker jars (no `dev up` or `demo`)")
    p.add_argument("--dir", default=None,
                   help="where to put them (default $LAKESINK_CACHE_DIR/jars or ~/.cache/lakesink/jars; commands "
                        "look elsewhere only through LAKESINK_JARS_DIR, LAKESINK_KAFKA_JARS_DIR, LAKESINK_REGISTRY_DIR)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--maven-url", default=None,
                     help="the Maven repository to download from (default $LAKESINK_MAVEN_URL or Maven Central)")
    src.add_argument("--from", dest="from_dir", default=None, metavar="DIR",
                     help="a local Maven repository (Maven's layout, e.g. ~/.m2/repository) to copy from")
    p.add_argument("--class-archive", action="store_true",
                   help="also build the JVM class-data archive local Spark sessions map (about a minute, once; "
                        "each later session starts 1-2 s faster)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, output) -> SetupResult:
    from pathlib import Path

    from lakesink.errors import InvalidArgumentError
    from lakesink.runtime import jars

    base = args.maven_url
    if args.from_dir:
        src = Path(args.from_dir).expanduser().resolve()
        if not src.is_dir():
            raise InvalidArgumentError(f"--from {args.from_dir}: not a directory (a Maven repository is expected)")
        base = src.as_uri()
    root = Path(args.dir).expanduser() if args.dir else None
    kinds = ["spark"] + ([] if args.no_kafka else ["kafka"]) + (["registry"] if args.registry else [])
    result = SetupResult()
    for kind in kinds:
        result.sets.append(jars.fetch(kind, root, base, say=output.progress))
    if args.class_archive:
        from lakesink.runtime.class_archive import build

        import os

        spark_dir = Path(result.sets[0].dir)
        os.environ[jars.SET_ENV["spark"]] = str(spark_dir)  # the dump's session takes these jars, not others
        output.progress("building the JVM class-data archive (about a minute)")
        _, result.class_archive = build(sorted(str(p) for p in spark_dir.glob("*.jar")))
    return result
