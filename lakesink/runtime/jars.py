"""The JVM artifacts lakesink runs with, pinned, and ``lakesink setup``'s download of them.

pip ships no jars. A local Spark session needs the *spark* set (Kafka source, Avro, Delta, S3A + the AWS SDK:
``jvm/spark/pom.xml``), the local broker of ``lakesink dev up``/``demo`` the *kafka* set (``jvm/kafka/pom.xml``)
and the local Schema Registry the *registry* set (Apicurio's distribution, ``jvm/registry/pom.xml``, a tar.gz
unpacked). :data:`LOCK` (``lakesink/runtime/jars.lock``, written by ``scripts/lock-jars`` from what Maven resolves
for those poms) pins every file: its Maven Central path, size and SHA-256. :func:`fetch` downloads a set from a
Maven repository (``$LAKESINK_MAVEN_URL``, default Maven Central; a ``file://`` mirror works alike), checks each
file's SHA-256 against the pin before it takes its final name, and writes a stamp once the whole set is in place,
so a second run only compares the stamp.

Where a set is looked up (:func:`find_dir`): its own environment variable, else the checkout's ``.cache/jars/<set>``
(``scripts/bootstrap``), else the per-user cache ``$LAKESINK_CACHE_DIR/jars/<set>`` (default
``${XDG_CACHE_HOME:-~/.cache}/lakesink``), where ``lakesink setup`` puts them. When none holds the set, the error is
one line naming the command that brings it.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from lakesink.errors import NotInstalledError, SetupError

__all__ = ["main", "LOCK", "SETS", "CENTRAL", "MAVEN_URL_ENV", "CACHE_ENV", "Artifact", "locked", "pom_digests",
           "cache_dir", "checkout_dir", "find_dir", "fetch", "FetchResult", "require_java", "SET_ENV"]

LOCK = Path(__file__).with_name("jars.lock")
SETS = ("spark", "kafka", "registry")
CENTRAL = "https://repo.maven.apache.org/maven2"
MAVEN_URL_ENV = "LAKESINK_MAVEN_URL"
CACHE_ENV = "LAKESINK_CACHE_DIR"
#: the environment variable that names a set's directory outright
SET_ENV = {"spark": "LAKESINK_JARS_DIR", "kafka": "LAKESINK_KAFKA_JARS_DIR", "registry": "LAKESINK_REGISTRY_DIR"}
#: what each set is, for messages
WHAT = {"spark": "the Spark jars (Kafka source, Delta, S3A)", "kafka": "the Kafka broker jars",
        "registry": "the Schema Registry (Apicurio)"}
#: the command that brings each set
HOW = {"spark": "lakesink setup", "kafka": "lakesink setup", "registry": "lakesink setup --registry"}
STAMP = ".lakesink-lock"


@dataclass(frozen=True)
class Artifact:
    """One pinned file: its set, Maven repository path, size in bytes and SHA-256."""

    set: str
    path: str
    size: int
    sha256: str

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def _lock_lines() -> list[list[str]]:
    return [line.split() for line in LOCK.read_text().splitlines() if line.strip() and not line.startswith("#")]


def locked(kind: str) -> list[Artifact]:
    """The pinned files of set ``kind``."""
    return [Artifact(f[0], f[3], int(f[2]), f[1]) for f in _lock_lines() if f[0] == kind]


def pom_digests() -> dict[str, str]:
    """``{set: SHA-256 of jvm/<set>/pom.xml}`` the lock was written from (tests compare them to the checkout's)."""
    return {f[1]: f[2] for f in _lock_lines() if f[0] == "pom"}


def _set_digest(kind: str) -> str:
    h = hashlib.sha256()
    for a in locked(kind):
        h.update(f"{a.path}\0{a.size}\0{a.sha256}\n".encode())
    return h.hexdigest()


def cache_dir() -> Path:
    """``$LAKESINK_CACHE_DIR/jars``, else ``${XDG_CACHE_HOME:-~/.cache}/lakesink/jars``: where setup puts the sets."""
    base = os.environ.get(CACHE_ENV)
    if not base:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "lakesink")
    return Path(base) / "jars"


def checkout_dir() -> Path:
    """``<checkout>/.cache/jars`` of the source tree this package was imported from (scripts/bootstrap)."""
    return Path(__file__).resolve().parents[2] / ".cache" / "jars"


def _has_jars(path: Path) -> bool:
    return path.is_dir() and any(path.glob("*.jar"))


def find_dir(kind: str, command: str | None = None) -> Path:
    """The directory holding set ``kind``: its environment variable, else the checkout's, else the user cache.
    NotInstalledError (one line, naming what brings it) when none holds it; ``command`` names who needs it."""
    env = SET_ENV[kind]
    needs = f"{command} needs" if command else "lakesink needs"
    if os.environ.get(env):
        path = Path(os.environ[env])
        if _has_jars(path):
            return path
        raise NotInstalledError(f"{needs} {WHAT[kind]}: ${env} names {path}, which holds no jar "
                                f"(unset it to use `{HOW[kind]}`'s download)")
    for path in (checkout_dir() / kind, cache_dir() / kind):
        if _has_jars(path):
            return path
    raise NotInstalledError(f"{needs} {WHAT[kind]}, not found in {cache_dir() / kind}: run `{HOW[kind]}` "
                            f"to download them (or set ${env})")


def require_java(command: str | None = None, minimum: int = 17) -> str:
    """The java executable (``$JAVA_HOME/bin/java``, else ``java`` on PATH); NotInstalledError naming what to
    install when there is none. The version is checked where the JVM starts (its own error names it)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if found:
        return found
    needs = f"{command} needs" if command else "lakesink needs"
    raise NotInstalledError(f"{needs} Java >= {minimum}, not found (no JAVA_HOME, no java on PATH): install a JDK "
                            f"(e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME")


@dataclass
class FetchResult:
    """What :func:`fetch` did for one set."""

    set: str
    dir: str
    files: int
    downloaded: int
    bytes: int
    up_to_date: bool


def _up_to_date(kind: str, dest: Path) -> bool:
    try:
        if (dest / STAMP).read_text().strip() != _set_digest(kind):
            return False
    except OSError:
        return False
    if kind == "registry":
        return _has_jars(dest)
    return all((dest / a.name).is_file() and (dest / a.name).stat().st_size == a.size for a in locked(kind))


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _download(base: str, art: Artifact, target: Path) -> int:
    """``base/art.path`` into ``target`` (SHA-256 checked before the rename); bytes downloaded."""
    url = f"{base}/{art.path}"
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    h = hashlib.sha256()
    size = 0
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, open(tmp, "wb") as out:
            for chunk in iter(lambda: resp.read(1 << 20), b""):
                h.update(chunk)
                out.write(chunk)
                size += len(chunk)
        got = h.hexdigest()
        if got != art.sha256:
            raise SetupError(f"setup: {art.name} from {url} has SHA-256 {got[:16]}… ({size} bytes), not the pinned "
                             f"{art.sha256[:16]}… ({art.size} bytes): a corrupted download or a wrong mirror; "
                             f"nothing was installed for it")
        os.replace(tmp, target)
        return size
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", None) or e
        raise SetupError(f"setup: cannot download {url}: {reason} (network? set ${MAVEN_URL_ENV} or --maven-url "
                         f"for another Maven repository)") from None
    finally:
        tmp.unlink(missing_ok=True)


def fetch(kind: str, root: Path | None = None, base_url: str | None = None, workers: int = 4,
          say=lambda msg: None) -> FetchResult:
    """Put set ``kind`` into ``root/kind`` (default :func:`cache_dir`): every pinned file downloaded from
    ``base_url`` (default ``$LAKESINK_MAVEN_URL`` or Maven Central) unless present with its pinned size and
    SHA-256; files of other versions removed; the registry's tar.gz unpacked. SetupError on a failed download or
    a checksum mismatch (the set's stamp is then not written, so the next run checks every file again)."""
    dest = (root or cache_dir()) / kind
    base = (base_url or os.environ.get(MAVEN_URL_ENV) or CENTRAL).rstrip("/")
    arts = locked(kind)
    if not arts:
        raise SetupError(f"setup: the package's jar lock {LOCK} pins no {kind} artifact")
    if _up_to_date(kind, dest):
        return FetchResult(kind, str(dest), len(arts), 0, 0, True)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / STAMP).unlink(missing_ok=True)
    if kind == "registry":
        return _fetch_unpacked(kind, dest, base, arts, say)
    wanted = {a.name for a in arts}
    for old in dest.glob("*.jar"):
        if old.name not in wanted:
            old.unlink()
    todo = [a for a in arts if not ((dest / a.name).is_file() and (dest / a.name).stat().st_size == a.size
                                    and _sha256_of(dest / a.name) == a.sha256)]
    if todo:
        say(f"downloading {len(todo)} of {len(arts)} {kind} jars "
            f"({sum(a.size for a in todo) / 1e6:.0f} MB) from {base} into {dest}")
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        # largest first: the AWS SDK bundle (650 MB) overlaps with everything else
        sizes = list(pool.map(lambda a: _download(base, a, dest / a.name), sorted(todo, key=lambda a: -a.size)))
    (dest / STAMP).write_text(_set_digest(kind) + "\n")
    return FetchResult(kind, str(dest), len(arts), len(todo), sum(sizes), False)


def _fetch_unpacked(kind: str, dest: Path, base: str, arts: list[Artifact], say) -> FetchResult:
    """The registry: its one tar.gz downloaded into a temporary directory, checked, unpacked in place of ``dest``."""
    (art,) = arts
    say(f"downloading {art.name} ({art.size / 1e6:.0f} MB) from {base} into {dest}")
    work = Path(tempfile.mkdtemp(prefix=f".{kind}-", dir=dest.parent))
    try:
        size = _download(base, art, work / art.name)
        unpacked = work / "unpacked"
        try:
            with tarfile.open(work / art.name) as tf:
                if hasattr(tarfile, "data_filter"):
                    tf.extractall(unpacked, filter="data")
                else:  # pragma: no cover - Python < 3.10.12
                    tf.extractall(unpacked)
        except (OSError, tarfile.TarError) as e:
            raise SetupError(f"setup: cannot unpack {art.name} into {dest}: {e}") from None
        (unpacked / STAMP).write_text(_set_digest(kind) + "\n")
        old = work / "old"
        os.replace(dest, old)
        os.replace(unpacked, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return FetchResult(kind, str(dest), 1, 1, size, False)


def main(argv: list[str] | None = None) -> int:
    """``python -m lakesink.runtime.jars DIR SET...``: what ``lakesink setup --dir DIR`` does, runnable before
    lakesink's dependencies are installed (standard library only): scripts/bootstrap runs it beside pip."""
    import sys

    from lakesink.errors import LakesinkError

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or any(k not in SETS for k in argv[1:]):
        print(f"usage: python -m lakesink.runtime.jars DIR {{{','.join(SETS)}}}...", file=sys.stderr)
        return 2
    try:
        for kind in argv[1:]:
            r = fetch(kind, Path(argv[0]), say=lambda msg: print(msg, flush=True))
            done = "up to date" if r.up_to_date else f"{r.downloaded} downloaded, SHA-256 checked"
            print(f"{kind}: {r.files} files ({done}) in {r.dir}", flush=True)
    except LakesinkError as e:
        print(f"lakesink: error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
