"""SparkSession factory for lakesink: local sessions with our jars, or an existing cluster session.

Two modes, chosen by :func:`get_spark`:

*Local* (the default on a laptop/CI): builds a new session with

- ``PYSPARK_PYTHON=sys.executable`` and ``SPARK_LOCAL_IP=127.0.0.1`` in the environment if unset (Python
  workers must run this interpreter; Spark must not bind a non-loopback address);
- every jar in the jar directory (``$LAKESINK_JARS_DIR``, else ``<checkout>/.cache/jars/spark``, else the user
  cache ``lakesink setup`` fills: :func:`default_jars_dir`) on the class path in local mode, or as ``spark.jars``
  for another master (:func:`jar_conf`) -- Kafka source, Avro, Delta, S3A + AWS SDK;
- the Delta SQL extension and catalog;
- in local mode, the JVM class-data archive ``scripts/bootstrap`` builds (:mod:`lakesink.runtime.class_archive`), when
  it is there, mapped by the driver JVM (its options go before any ``spark.driver.extraJavaOptions`` given);
- ``spark.ui.enabled=false``, ``spark.sql.shuffle.partitions=4`` and
  ``spark.databricks.delta.snapshotPartitions=4`` (Delta's default 50 makes every log replay of a small
  table run 50 tasks) unless ``conf`` overrides them;
- S3A settings from :class:`S3Settings` as ``spark.hadoop.fs.s3a.*`` (and ``fs.s3.impl`` mapped to S3A, so
  ``s3://`` URIs work too).

*Cluster* (Databricks, EMR, a session someone already built): used when a SparkSession is already active,
``DATABRICKS_RUNTIME_VERSION`` is set, or ``LAKESINK_USE_CLUSTER_JARS=1``. No jars are added (the cluster
provides Delta and Kafka); the S3 settings (and ``conf``) are applied only where the key is not already set,
via ``spark.conf`` (which Spark copies into the Hadoop conf of every data-source read/write) and, when the JVM
is reachable, the SparkContext's Hadoop configuration.

S3 keys (:func:`set_credentials`) go only into the SparkContext's Hadoop configuration, through py4j, never into
the session conf (``spark.conf.get`` would return them in clear to anyone holding the session, and ``SET`` lists
them). A session without a JVM in this process -- Spark Connect (Databricks serverless, shared clusters) -- gets
no keys from lakesink: its server reads ``s3a://`` with its own credentials (instance profile, storage credential,
its environment), and S3A's credential provider is left to the server too.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from lakesink.store.settings import S3Settings

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger("lakesink.runtime.spark")

#: S3A's credential provider setting: with static keys lakesink names SimpleAWSCredentialsProvider (the keys it
#: sets through py4j); never on a Spark Connect session, whose server brings its own credentials.
CREDENTIALS_PROVIDER = "fs.s3a.aws.credentials.provider"

JARS_ENV = "LAKESINK_JARS_DIR"
CLUSTER_ENV = "LAKESINK_USE_CLUSTER_JARS"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


#: Driver JVM options of a local session that only schedules Python tasks (``get_spark(scheduler_only=True)``):
#: the C1 compiler alone. A cold session spends seconds of its two cores JIT-compiling Spark's start-up code with
#: C2, whose faster code only pays off for data the JVM itself reads or writes (measured by hand here: session
#: 4.0 -> 3.1 s, first Python job 2.4 -> 1.9 s).
SCHEDULER_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"

def default_jars_dir(command: str | None = None) -> Path:
    """The Spark jar directory: ``$LAKESINK_JARS_DIR``, else ``<checkout>/.cache/jars/spark`` (scripts/bootstrap),
    else the per-user cache ``lakesink setup`` fills (:func:`lakesink.runtime.jars.find_dir`). NotInstalledError
    (exit 5, one line naming ``lakesink setup``; ``command`` says who needs them) when none holds a jar."""
    from lakesink.runtime.jars import find_dir

    return find_dir("spark", command)


def cluster_environment() -> bool:
    """Whether this process runs where sessions come from a cluster (Databricks, or ``$LAKESINK_SPARK_CLUSTER``)."""
    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return True
    return os.environ.get(CLUSTER_ENV, "").strip().lower() in ("1", "true", "yes")


def _use_cluster() -> bool:
    if cluster_environment():
        return True
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is not None


def starts_local_jvm() -> bool:
    """Whether :func:`get_spark` would launch a new local JVM here (no cluster session, no JVM in this process)."""
    if "pyspark" not in sys.modules:  # no JVM and no session in a process that never imported pyspark: not imported
        return not cluster_environment()
    from pyspark import SparkContext

    return SparkContext._gateway is None and not _use_cluster()  # noqa: SLF001 - see launch_jvm_detached


def launch_jvm_detached(settings: dict[str, str], output: int | None = None) -> None:
    """Start the local Spark JVM (py4j gateway) in its own session and process group, unless one runs already.
    ``output``: a file descriptor for the JVM's stdout and stderr (and so its Python workers' stderr); default:
    this process's. (A JVM sharing this process's stdout keeps a caller reading it through a pipe waiting until
    the JVM has exited too, up to a second after this process.)

    systemd and schedulers stop a job by signalling its whole process group; a JVM in the driver's group died
    of that SIGTERM mid-batch, before the driver could finish or abandon the batch cleanly. In its own group
    only the Python driver gets the signal and decides. The JVM still ends with the driver: pyspark's gateway
    server exits when its stdin, a pipe from this process, is closed -- whatever way this process ends.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:  # noqa: SLF001 - pyspark's documented-in-code hook for a given gateway
        return
    conf = SparkConf(loadDefaults=False)
    conf.setAll(list(settings.items()))
    popen: dict = {"start_new_session": True}
    if output is not None:
        popen["stdout"] = popen["stderr"] = output
    gateway = launch_gateway(conf, popen_kwargs=popen)
    # SparkContext._ensure_initialized uses a gateway set here instead of launching its own
    SparkContext._gateway = gateway  # noqa: SLF001
    SparkContext._jvm = gateway.jvm  # noqa: SLF001


def get_spark(
    app_name: str = "lakesink",
    master: str | None = None,
    s3: S3Settings | None = None,
    conf: dict | None = None,
    scheduler_only: bool = False,
    jvm_output: int | None = None,
) -> "SparkSession":
    """Return a SparkSession ready for Kafka, Delta and S3A (see the module docstring for the two modes).

    ``master``: local mode only; default ``$LAKESINK_SPARK_MASTER`` or ``local[*]``.
    ``conf``: extra Spark settings, applied last (they override our defaults in local mode; in cluster mode
    they are applied only where unset, and static ones are skipped).
    ``scheduler_only``: the session will only run Python tasks (no data source, no Delta write in the JVM:
    :func:`lakesink.wiring.spark_schedules_only`); a local JVM then starts with :data:`SCHEDULER_JVM_OPTIONS`.
    ``jvm_output``: a file descriptor for the local JVM's output (:func:`launch_jvm_detached`); default: a new
    log file of this run, or the terminal with ``--verbose``/``$LAKESINK_VERBOSE`` (:func:`.logs.quiet_jvm`).
    """
    from pyspark.sql import SparkSession

    if _use_cluster():
        spark = SparkSession.getActiveSession() or SparkSession.builder.appName(app_name).getOrCreate()
        settings: dict[str, str] = {}
        if s3 is not None:
            settings.update(s3.hadoop_conf())
            if _jvm_hadoop_conf(spark) is None:  # no keys can be given (set_credentials): the server's own
                settings.pop(CREDENTIALS_PROVIDER, None)  # credentials, found by S3A's default chain
        _apply_where_unset(spark, settings, dict(conf or {}))
        if s3 is not None and not _has_credentials(spark):
            set_credentials(spark, s3.credential_conf())
        return spark

    from lakesink.runtime.jars import require_java

    require_java()  # one line naming what to install, not pyspark's JAVA_GATEWAY_EXITED
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkContext

    from lakesink.runtime.logs import quiet_jvm

    starts = SparkContext._gateway is None  # noqa: SLF001 - see launch_jvm_detached
    # a JVM started here prints to the run's log file, not the terminal, unless --verbose (lakesink.runtime.logs)
    with quiet_jvm(app_name, conf, jvm_output, starts) as (conf, jvm_output):
        settings = local_settings(app_name, master, s3, conf, scheduler_only)
        launch_jvm_detached(settings, jvm_output)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if s3 is not None:
        set_credentials(spark, s3.credential_conf())
    return spark


def spark_master(master: str | None = None) -> str:
    """The master a new session gets: ``master``, else ``$LAKESINK_SPARK_MASTER``, else ``local[*]``."""
    return master or os.environ.get("LAKESINK_SPARK_MASTER") or "local[*]"


def local_settings(app_name: str, master: str | None, s3: S3Settings | None = None, conf: dict | None = None,
                   scheduler_only: bool = False) -> dict[str, str]:
    """The Spark settings :func:`get_spark` launches a new JVM with (its parameters, same meaning)."""
    jars = sorted(str(p) for p in default_jars_dir().glob("*.jar"))
    master = spark_master(master)

    settings = {"spark.app.name": app_name, "spark.master": master, **jar_conf(master, jars),
                "spark.sql.extensions": DELTA_EXTENSION,
                "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
                "spark.ui.enabled": "false",
                # not ./spark-warehouse: a run must leave nothing in the user's working directory
                "spark.sql.warehouse.dir": local_warehouse_dir(),
                "spark.sql.shuffle.partitions": "4",
                "spark.databricks.delta.snapshotPartitions": "4"}
    if master.startswith("local"):
        from lakesink.executor.pydaemon import MODULE

        # workers import the installed pyspark's bytecode, not pyspark.zip's source (lakesink.executor.pydaemon)
        settings["spark.python.daemon.module"] = MODULE
    if s3 is not None:
        settings.update({f"spark.hadoop.{key}": value for key, value in s3.hadoop_conf().items()})
    settings.update({key: str(value) for key, value in (conf or {}).items()})
    options = settings.get("spark.driver.extraJavaOptions", "")
    if scheduler_only:  # given options come after ours: a later -XX wins
        options = f"{SCHEDULER_JVM_OPTIONS} {options}".strip()
    if master.startswith("local"):  # the driver JVM maps the classes of the class archive, when built
        from lakesink.runtime.class_archive import driver_options

        options = driver_options(jars, options)
    if options:
        settings["spark.driver.extraJavaOptions"] = options
    return settings


def set_credentials(spark: "SparkSession", creds: dict[str, str]) -> bool:
    """Put S3A credentials on the SparkContext's Hadoop configuration (through py4j, not argv); whether they
    were set.

    Every Hadoop configuration Spark and Delta build for a read, a write or a table log starts from
    this one, and tasks carry it to executors, so S3A's SimpleAWSCredentialsProvider finds the keys on
    every node. It is not a Spark property: the UI's and event log's Spark properties never hold it
    (their Hadoop properties are redacted by ``spark.redaction.regex``), and ``spark.conf.get`` does not
    read it. Without JVM access (Spark Connect, a shared cluster refusing py4j) the keys are NOT set: the
    session conf would hand them back in clear to ``spark.conf.get``; the server's own credentials apply,
    and a warning says so.
    """
    if not creds:
        return False
    from lakesink.manifest.table import is_connect

    jconf = _jvm_hadoop_conf(spark)
    if jconf is None:
        log.warning("the S3 keys of the config are not given to this Spark session (%s: no JVM in this process); "
                    "Spark reads s3a:// with the server's or cluster's own credentials (instance profile, storage "
                    "credential, its environment)", "Spark Connect" if is_connect(spark) else "no SparkContext")
        return False
    for key, value in creds.items():
        jconf.set(key, value)
    return True


def _jvm_hadoop_conf(spark: "SparkSession"):
    """The SparkContext's Hadoop configuration through py4j, or None: a Spark Connect session (no JVM in this
    process) or a shared cluster refusing py4j."""
    from lakesink.manifest.table import is_connect

    if is_connect(spark):
        return None
    try:
        return spark.sparkContext._jsc.hadoopConfiguration()  # classic PySpark only
    except Exception:  # noqa: BLE001
        return None


def local_warehouse_dir() -> str:
    """Spark's warehouse directory in local mode: under the temp directory, one per user (managed tables of a
    local session are scratch; a catalog-table manifest belongs in a real metastore)."""
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return os.path.join(tempfile.gettempdir(), f"lakesink-spark-warehouse-{uid}")


def jar_conf(master: str, jars: list[str]) -> dict[str, str]:
    """How the jars reach the JVMs. Local mode runs driver and executors in one JVM, and a standalone
    master on this host (``spark://127.0.0.1|localhost|<this host>``) runs its executors here too: the
    jars go on the class paths (``spark.driver.extraClassPath`` / ``spark.executor.extraClassPath``),
    read in place. ``spark.jars`` would copy every jar -- 686 MB of AWS SDK bundle among them -- into each
    session's scratch directory and each executor's work directory, seconds to minutes of every cold
    start, and left behind by a killed driver. Other masters get ``spark.jars``, which ships them to
    executors on other hosts."""
    path = os.pathsep.join(jars)
    if master.startswith("local"):
        return {"spark.driver.extraClassPath": path}
    if _standalone_on_this_host(master):
        return {"spark.driver.extraClassPath": path, "spark.executor.extraClassPath": path}
    return {"spark.jars": ",".join(jars)}


def _standalone_on_this_host(master: str) -> bool:
    """``spark://host:port[,host:port]`` whose every host is a loopback name or this machine's name."""
    if not master.startswith("spark://"):
        return False
    import socket

    local = {"127.0.0.1", "localhost", "::1", "[::1]", socket.gethostname(), socket.getfqdn()}
    hosts = [hp.rsplit(":", 1)[0] for hp in master[len("spark://"):].split(",") if hp]
    return bool(hosts) and all(h in local for h in hosts)


def _apply_where_unset(spark: "SparkSession", hadoop: dict[str, str], conf: dict) -> None:
    """Cluster mode: set Hadoop keys (session conf + SparkContext Hadoop conf) and Spark keys if unset."""
    jconf = None
    try:
        jconf = spark.sparkContext._jsc.hadoopConfiguration()  # classic PySpark only
    except Exception:
        jconf = None  # Spark Connect / shared clusters: session conf only
    for key, value in hadoop.items():
        if jconf is not None and jconf.get(key) is None:
            jconf.set(key, value)
        if spark.conf.get(key, None) is None and spark.conf.get(f"spark.hadoop.{key}", None) is None:
            _try_set(spark, key, value)
    for key, value in conf.items():
        if spark.conf.get(key, None) is None:
            _try_set(spark, key, str(value))


def _has_credentials(spark: "SparkSession") -> bool:
    """The cluster already configured S3A keys (then ours are not applied, like every other setting)."""
    from lakesink.manifest.table import is_connect

    if is_connect(spark):
        return False  # set_credentials says why none are given
    try:
        return spark.sparkContext._jsc.hadoopConfiguration().get("fs.s3a.access.key") is not None
    except Exception:  # noqa: BLE001
        return spark.conf.get("fs.s3a.access.key", None) is not None


def _try_set(spark: "SparkSession", key: str, value: str) -> None:
    try:
        spark.conf.set(key, value)
    except Exception:  # static/unmodifiable config on this cluster: leave it to the cluster
        pass


__all__ = ["get_spark", "spark_master", "cluster_environment", "local_settings", "launch_jvm_detached", "starts_local_jvm",
           "SCHEDULER_JVM_OPTIONS", "jar_conf", "set_credentials", "default_jars_dir", "JARS_ENV", "CLUSTER_ENV"]
