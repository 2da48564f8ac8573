"""A local SparkSession set up the way kafkalog's tests, benchmarks and demos need it.

* every socket on 127.0.0.1 (``SPARK_LOCAL_IP``, driver host and bind address), no UI on :4040;
* quiet: the log4j2 configuration shipped next to this module (errors only, and no stack traces
  of failed tasks: the failure reaches the caller as an exception), ``setLogLevel("ERROR")``
  (PySpark's "interpreter" log level overrides log4j's root level, so both are needed), and
  errors raised in Python show their message only
  (``spark.sql.execution.pyspark.udf.hideTraceback.enabled=true``; pass it as ``false`` in
  ``conf`` to see Python tracebacks again);
* workers run this interpreter (``PYSPARK_PYTHON=sys.executable``) unless ``PYSPARK_PYTHON`` or
  ``spark.pyspark.python`` says otherwise, so they see the same packages;
* ``spark.sql.session.timeZone=UTC``, so timestamps print as Kafka's epoch milliseconds mean them;
* the ``kafkalog`` format registered (``kafkalog.spark.register``, which also decides about
  filter pushdown).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from kafkalog.errors import KafkaLogError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "FILTER_PUSHDOWN_CONF",
    "JAVA_MISSING_MESSAGE",
    "check_java",
    "check_worker_python",
    "get_session",
    "log4j2_config_path",
]

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
HIDE_TRACEBACK_CONF = "spark.sql.execution.pyspark.udf.hideTraceback.enabled"
WORKER_PYTHON_CONF = "spark.pyspark.python"
JAVA_MISSING_MESSAGE = (
    "Java 17 or later is required to run Spark but no 'java' was found on PATH or in JAVA_HOME. "
    "Install it, e.g. 'apt-get install -y openjdk-17-jre-headless' (Debian/Ubuntu) or "
    "'brew install openjdk@17' (macOS), then retry."
)

_FALLBACK_LOG4J = (
    "rootLogger.level = error\nrootLogger.appenderRef.stdout.ref = console\n"
    "appender.console.type = Console\nappender.console.name = console\n"
    "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
    "appender.console.layout.pattern = %p %c{1}: %m%n%ex\n"
    "logger.executor.name = org.apache.spark.executor.Executor\nlogger.executor.level = off\n"
    "logger.tsm.name = org.apache.spark.scheduler.TaskSetManager\nlogger.tsm.level = off\n"
    "logger.ts.name = org.apache.spark.scheduler.TaskSchedulerImpl\nlogger.ts.level = off\n"
)


def check_java() -> str:
    """Path of the java executable Spark will use; raises ``KafkaLogError`` saying how to install it."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise KafkaLogError(JAVA_MISSING_MESSAGE)
    return found


def log4j2_config_path() -> Path:
    """The shipped ``log4j2.properties`` (written to a temp file if the package lacks it)."""
    try:
        ref = resources.files("kafkalog.spark").joinpath("log4j2.properties")
        if ref.is_file():
            return Path(str(ref))
    except (ModuleNotFoundError, FileNotFoundError):
        pass
    path = Path(tempfile.gettempdir()) / "kafkalog-log4j2.properties"
    if not path.exists():
        path.write_text(_FALLBACK_LOG4J, encoding="utf-8")
    return path


def check_worker_python(spark: SparkSession) -> None:
    """Fail with what to do when the Python that Spark starts for its local workers cannot import
    kafkalog (otherwise the first read fails with ModuleNotFoundError deep in a JVM trace). Workers
    on other hosts cannot be checked from here; Spark Connect sessions have no context to ask."""
    try:
        sc = spark.sparkContext
        python, master = sc.pythonExec, sc.master
    except Exception:  # Spark Connect: no SparkContext in this process
        return
    if not str(master).startswith("local") or not python:
        return
    found = shutil.which(python)
    if found and Path(found).resolve() == Path(sys.executable).resolve():
        return
    try:
        probe = subprocess.run([python, "-c", "import kafkalog.spark.source"], capture_output=True,
                               text=True, timeout=60, check=False)
        ok, why = probe.returncode == 0, (probe.stderr.strip().splitlines() or ["failed"])[-1]
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, why = False, str(e)
    if not ok:
        raise KafkaLogError(
            f"Spark starts its Python workers with {python!r}, which cannot import kafkalog ({why}). "
            f"Start the Spark session with PYSPARK_PYTHON (or the conf '{WORKER_PYTHON_CONF}') set to "
            f"this interpreter, {sys.executable!r} (kafkalog.spark.session.get_session() does that "
            f"when neither is set), or install kafkalog into {python!r}."
        )


def get_session(
    app_name: str = "kafkalog",
    master: str = "local[2]",
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """A local SparkSession bound to 127.0.0.1 with the kafkalog source registered.

    If a session already runs in this process it is reused (Spark allows one SparkContext per
    process); the SQL settings above are then applied to it at runtime.
    """
    check_java()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if WORKER_PYTHON_CONF not in (conf or {}):
        # Workers that run another Python would not find kafkalog (or find another version).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafkalog.spark import register

    log4j = log4j2_config_path().as_uri()
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config(HIDE_TRACEBACK_CONF, "true")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
        .config("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    if HIDE_TRACEBACK_CONF not in (conf or {}):
        spark.conf.set(HIDE_TRACEBACK_CONF, "true")
    register(spark)
    return spark
