"""kafkalog topics as a Spark data source: ``spark.read/readStream/write/writeStream.format("kafkalog")``.

``register(spark)`` makes the format available in a session, checks that Spark's Python workers can
import kafkalog, and turns on Python filter pushdown where Spark keeps each scan's pushdown plan to
itself (not PySpark 4.3.0, see ``kafkalog.spark.pushdown``); ``kafkalog.spark.session.get_session()``
starts a local session with everything set up. When the top-level package ``pyspark_kafkalog`` is
importable (it is installed with kafkalog), PySpark registers the format by itself.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FORMAT_NAME", "KafkaLogDataSource", "get_session", "register"]

FORMAT_NAME = "kafkalog"


def register(spark: Any) -> None:
    """Register ``format("kafkalog")`` in ``spark``; enable Python filter pushdown where it is safe.

    Raises ``KafkaLogError`` saying what to do when the Python that Spark starts for its local
    workers cannot import kafkalog."""
    from kafkalog.spark.pushdown import plan_kept_per_scan
    from kafkalog.spark.session import FILTER_PUSHDOWN_CONF, check_worker_python
    from kafkalog.spark.source import KafkaLogDataSource

    check_worker_python(spark)
    if plan_kept_per_scan():
        spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    try:
        spark.dataSource.register(KafkaLogDataSource)
    except Exception as e:
        # Already there through pyspark_kafkalog's static registration, which cannot be overridden.
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise


def get_session(*args: Any, **kwargs: Any) -> Any:
    from kafkalog.spark.session import get_session as _get_session

    return _get_session(*args, **kwargs)


def __getattr__(name: str) -> Any:
    if name == "KafkaLogDataSource":
        from kafkalog.spark.source import KafkaLogDataSource

        return KafkaLogDataSource
    raise AttributeError(name)
