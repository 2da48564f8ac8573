"""The ``kafkalog`` Spark data source: Kafka topics of a kafkalog data directory, with the schema and
options of Spark's built-in Kafka source.

    spark.read.format("kafkalog").option("subscribe", "orders").load("/data/kafka")

The ``path`` option (or ``load(path)``/``save(path)``) is the data directory. See
``kafkalog.spark.options`` for the options and ``kafkalog.spark.pushdown`` for filter pushdown
(off where Spark shares one pushdown plan between all scans of a DataFrame, as PySpark 4.3.0 does).
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)

from kafkalog.errors import InvalidConfigError
from kafkalog.spark.arrow import spark_schema
from kafkalog.spark.options import SourceOptions, parse_sink_options, parse_source_options, user_errors

__all__ = ["FORMAT_NAME", "KafkaLogDataSource"]

FORMAT_NAME = "kafkalog"


def _check_schema(schema: object, include_headers: bool) -> None:
    expected = spark_schema(include_headers)
    if schema != expected:
        raise InvalidConfigError(
            "The kafkalog source has a fixed schema and cannot be set with a custom one: expected "
            f"{expected.simpleString()}, got {getattr(schema, 'simpleString', lambda: schema)()} "
            "(the 'headers' column comes with includeHeaders=true)"
        )


def pushdown_enabled(opts: SourceOptions) -> bool:
    """``filterPushdown``: as given, else on only where Spark keeps each scan's pushdown plan to
    itself (``pushdown.plan_kept_per_scan``): PySpark 4.3.0 shares one plan between all scans of a
    DataFrame, and a narrowed plan there returns wrong rows for some query shapes."""
    if opts.filter_pushdown is not None:
        return opts.filter_pushdown
    from kafkalog.spark.pushdown import plan_kept_per_scan

    return plan_kept_per_scan()


class KafkaLogDataSource(DataSource):
    """``format("kafkalog")``: batch and streaming reads, batch and streaming writes."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    @user_errors
    def schema(self):  # -> StructType
        # Validate early, so a bad option fails at load() rather than at the first action.
        opts = parse_source_options(self.options, streaming=None)
        return spark_schema(opts.include_headers)

    @user_errors
    def reader(self, schema) -> DataSourceReader:
        from kafkalog.spark.reader import KafkaLogBatchReader, KafkaLogFilteringReader

        opts = parse_source_options(self.options, streaming=False)
        _check_schema(schema, opts.include_headers)
        return KafkaLogFilteringReader(opts) if pushdown_enabled(opts) else KafkaLogBatchReader(opts)

    @user_errors
    def streamReader(self, schema) -> DataSourceStreamReader:
        from kafkalog.spark.stream import KafkaLogStreamReader

        opts = parse_source_options(self.options, streaming=True)
        _check_schema(schema, opts.include_headers)
        return KafkaLogStreamReader(opts)

    @user_errors
    def writer(self, schema, overwrite: bool) -> DataSourceWriter:
        from kafkalog.spark.writer import KafkaLogWriter, prepare_write

        if overwrite:
            raise InvalidConfigError(
                "Save mode overwrite is not allowed for kafkalog: a log can only be appended to. "
                "Use mode('append')."
            )
        opts = parse_sink_options(self.options)
        return KafkaLogWriter(opts, prepare_write(opts, schema))

    @user_errors
    def streamWriter(self, schema, overwrite: bool) -> DataSourceStreamWriter:
        from kafkalog.spark.writer import KafkaLogStreamWriter, prepare_write

        # Output mode complete asks the sink to truncate first; a log cannot be, and Spark's Kafka
        # sink ignores the request too (its truncate() is a no-op): each epoch appends every row.
        del overwrite
        opts = parse_sink_options(self.options)
        return KafkaLogStreamWriter(opts, prepare_write(opts, schema))
