"""Run the page-view pipeline of ``kafkalog demo`` from your own code, then use its topics yourself.

    .venv/bin/python examples/pageviews_pipeline.py [DATA_DIR]     # default: demo-data

The pipeline itself lives in ``kafkalog.demo.pipeline`` (one source of truth; ``run()`` takes any
SparkSession). This script shows what comes after it: a Spark query over a *result* topic, and the
storage API answering "which offset holds the first view after 09:30?" from the time index.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import functions as F

from kafkalog.demo.pipeline import run as run_demo
from kafkalog.demo.settings import DEFAULT_DATA_DIR, NEWSLETTER_AT_MS, SESSIONS_TOPIC, TOPIC
from kafkalog.spark.session import get_session
from kafkalog.storage.log_manager import LogManager

SESSION_SCHEMA = ("user_id string, session_start timestamp, session_end timestamp, duration_s double, "
                  "views long, distinct_pages long, landing_page string, exit_page string, source string, "
                  "device string, converted boolean")


def main(data_dir: Path) -> None:
    spark = get_session(app_name="pageviews-example")
    try:
        # A smaller run than the demo's default: this script is about what you do afterwards.
        result = run_demo(spark, data_dir, events=50_000)

        # The sessions topic holds JSON values; parse them back and ask a new question of them.
        sessions = (spark.read.format("kafkalog").option("subscribe", SESSIONS_TOPIC)
                    .load(str(result.kafka_dir.resolve()))
                    .select(F.from_json(F.col("value").cast("string"), SESSION_SCHEMA).alias("s"))
                    .select("s.*"))
        print("\nSessions by device, from the pageviews-sessions topic:")
        (sessions.groupBy("device")
         .agg(F.count("*").alias("sessions"),
              F.round(F.avg("views"), 2).alias("views_per_session"),
              F.round(100 * F.avg(F.col("converted").cast("int")), 1).alias("conversion_pct"))
         .orderBy(F.desc("sessions"))
         .show())
    finally:
        spark.stop()

    # No Spark needed to seek by time: each partition's time index answers directly.
    print("First page view at or after the 09:30 newsletter, per partition of 'pageviews':")
    with LogManager(result.kafka_dir, read_only=True) as lm:
        for p in lm.partitions(TOPIC):
            found = lm.get_log(TOPIC, p).offset_for_timestamp(NEWSLETTER_AT_MS)
            print(f"  partition {p}: offset {found.offset if found else 'none'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(DEFAULT_DATA_DIR))
