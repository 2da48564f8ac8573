"""Steps 2-4: the Spark jobs over the topics: the batch job, its results written back to topics,
and the incremental ``Trigger.AvailableNow`` stream.

pyspark is imported inside the functions: importing this module does not need Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalog.demo.events import CHECKOUT_DONE, RETURNING
from kafkalog.demo.settings import (
    BY_PAGE_TOPIC,
    JSON_TIME,
    SESSION_GAP,
    STREAM_TIMEOUT_S,
    TOP_N,
    TOPIC,
    WINDOW,
    DemoError,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


PAGEVIEW_SCHEMA = "user_id string, page string, referrer string, device string, duration_ms int"


def read_topic(spark: SparkSession, kafka_path: str, topic: str, **options: str) -> DataFrame:
    return spark.read.format("kafkalog").option("subscribe", topic).options(**options).load(kafka_path)


def parse_pageviews(raw: DataFrame) -> DataFrame:
    """Kafka rows (key, value, topic, partition, offset, timestamp, ...) -> one typed row per view.
    The record timestamp is the event time."""
    from pyspark.sql import functions as F

    return raw.select(
        "partition", "offset", F.col("timestamp").alias("ts"),
        F.from_json(F.col("value").cast("string"), PAGEVIEW_SCHEMA).alias("v"),
    ).select("partition", "offset", "ts", "v.*")


def views_per_window(views: DataFrame) -> DataFrame:
    """Views, unique users and time on page, per page per 15-minute window."""
    from pyspark.sql import functions as F

    return (views.groupBy(F.window("ts", WINDOW).alias("window"), "page")
            .agg(F.count("*").alias("views"),
                 F.count_distinct("user_id").alias("unique_users"),
                 F.sum("duration_ms").alias("total_duration_ms"))
            .withColumn("avg_seconds", F.round(F.col("total_duration_ms") / F.col("views") / 1000, 1)))


def top_pages_per_window(per_window: DataFrame, n: int = TOP_N) -> DataFrame:
    """The ``n`` most viewed pages of each window (ties broken by page name, so reruns agree)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_views = Window.partitionBy("window").orderBy(F.desc("views"), F.asc("page"))
    return per_window.withColumn("rank", F.row_number().over(by_views)).where(F.col("rank") <= n)


def top_pages(views: DataFrame, n: int = 10) -> DataFrame:
    from pyspark.sql import functions as F

    return (views.groupBy("page")
            .agg(F.count("*").alias("views"), F.count_distinct("user_id").alias("unique_users"),
                 F.round(F.avg("duration_ms") / 1000, 1).alias("avg_seconds"))
            .orderBy(F.desc("views"), F.asc("page")).limit(n))


def sessionize(views: DataFrame) -> DataFrame:
    """One row per user session: Spark's session windows close after 30 minutes without a view."""
    from pyspark.sql import functions as F

    return (views.groupBy("user_id", F.session_window("ts", SESSION_GAP))
            .agg(F.min("ts").alias("session_start"),
                 F.max("ts").alias("session_end"),
                 F.count("*").alias("views"),
                 F.count_distinct("page").alias("distinct_pages"),
                 F.min_by("page", "ts").alias("landing_page"),
                 F.max_by("page", "ts").alias("exit_page"),
                 F.min_by("referrer", "ts").alias("first_referrer"),
                 F.min("device").alias("device"),  # a user's device never changes here
                 F.bool_or(F.col("page") == CHECKOUT_DONE).alias("converted"))
            # A session that begins on one of our own pages came back to a tab left open.
            .withColumn("source", F.when(F.col("first_referrer").startswith("/"), F.lit(RETURNING))
                        .otherwise(F.col("first_referrer")))
            .withColumn("duration_s",
                        (F.unix_millis("session_end") - F.unix_millis("session_start")) / 1000)
            .drop("session_window", "first_referrer"))


def session_stats(sessions: DataFrame) -> dict[str, float]:
    from pyspark.sql import functions as F

    row = sessions.agg(
        F.count("*").alias("sessions"),
        F.avg("views").alias("avg_views"),
        F.median("duration_s").alias("median_duration_s"),
        F.avg((F.col("views") == 1).cast("int")).alias("bounce_rate"),
        F.avg(F.col("converted").cast("int")).alias("conversion_rate"),
    ).first()
    assert row is not None
    return row.asDict()


def sessions_by_source(sessions: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return (sessions.groupBy("source")
            .agg(F.count("*").alias("sessions"), F.avg("views").alias("avg_views"),
                 F.avg((F.col("views") == 1).cast("int")).alias("bounce_rate"),
                 F.avg(F.col("converted").cast("int")).alias("conversion_rate"))
            .orderBy(F.desc("sessions"), F.asc("source")))


# --- 3. results back to topics -------------------------------------------------------------------


def top_pages_records(top: DataFrame) -> DataFrame:
    """Kafka records (key = page, JSON value, timestamp = window start) for TOP_PAGES_TOPIC."""
    from pyspark.sql import functions as F

    value = F.struct(
        F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
        "rank", "page", "views", "unique_users", "avg_seconds",
    )
    return top.select(F.col("page").alias("key"), F.to_json(value, JSON_TIME).alias("value"),
                      F.col("window.start").alias("timestamp"))


def session_records(sessions: DataFrame) -> DataFrame:
    """Kafka records (key = user id, JSON value, timestamp = session start) for SESSIONS_TOPIC."""
    from pyspark.sql import functions as F

    value = F.struct("user_id", "session_start", "session_end", "duration_s", "views", "distinct_pages",
                     "landing_page", "exit_page", "source", "device", "converted")
    return sessions.select(F.col("user_id").alias("key"), F.to_json(value, JSON_TIME).alias("value"),
                           F.col("session_start").alias("timestamp"))


def write_topic(records: DataFrame, kafka_path: str, topic: str) -> None:
    (records.write.format("kafkalog").option("topic", topic).option("kafka.compression.type", "zstd")
     .mode("append").save(kafka_path))


# --- 4. the incremental stream -------------------------------------------------------------------


def run_by_page_stream(spark: SparkSession, kafka_path: str, checkpoint: str) -> int:
    """One ``Trigger.AvailableNow`` run of the re-keying stream; returns the rows it read.

    A fresh checkpoint starts at ``earliest``; a checkpoint from an earlier run starts where that
    run stopped, so each run reads only what arrived in between.
    """
    from pyspark.sql import functions as F

    query = (
        spark.readStream.format("kafkalog").option("subscribe", TOPIC).option("startingOffsets", "earliest")
        .load(kafka_path)
        .select(F.get_json_object(F.col("value").cast("string"), "$.page").alias("key"), "value", "timestamp")
        .writeStream.format("kafkalog")
        .option("topic", BY_PAGE_TOPIC).option("kafka.compression.type", "lz4")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(kafka_path)
    )
    try:
        if not query.awaitTermination(STREAM_TIMEOUT_S):
            raise DemoError(f"the streaming run did not finish within {STREAM_TIMEOUT_S} s")
    finally:
        query.stop()  # a no-op once it finished; stops it if awaiting failed
    return sum(int(progress["numInputRows"]) for progress in query.recentProgress)
