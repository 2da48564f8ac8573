"""PySpark auto-registration hook: every importable top-level ``pyspark_*`` module that defines
``DefaultSource`` is registered as a data source under ``DefaultSource.name()`` ("kafkalog")."""

from kafkalog.spark.source import KafkaLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
