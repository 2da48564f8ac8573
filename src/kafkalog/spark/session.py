"""A local SparkSession set up the way kafkalog's tests, benchmarks and demos need it.

* every socket on 127.0.0.1 (``SPARK_LOCAL_IP``, driver host and bind address), no UI on :4040;
* quiet: the log4j2 configuration shipped next to this module, plus ``setLogLevel("ERROR")``
  (PySpark's "interpreter" log level overrides log4j's root level, so both are needed);
* workers run this interpreter (``PYSPARK_PYTHON=sys.executable``), so they see the same packages;
* ``spark.sql.session.timeZone=UTC``, so timestamps print as Kafka's epoch milliseconds mean them;
* ``spark.sql.python.filterPushdown.enabled=true`` (off by default in Spark 4.3): the kafkalog
  reader implements ``pushFilters``, and Spark refuses to plan a read of such a source while the
  flag is off (``DATA_SOURCE_PUSHDOWN_DISABLED``);
* the ``kafkalog`` format registered.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from kafkalog.errors import KafkaLogError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FILTER_PUSHDOWN_CONF", "JAVA_MISSING_MESSAGE", "check_java", "get_session", "log4j2_config_path"]

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
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
    os.environ["PYSPARK_PYTHON"] = sys.executable
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
        .config(FILTER_PUSHDOWN_CONF, "true")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
        .config("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    register(spark)
    return spark
