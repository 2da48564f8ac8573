"""The driver ``test_cluster.py`` submits to a Spark standalone cluster with ``spark-submit``.

    cluster_job.py MASTER DATA_DIR OUT_DIR RESULT_JSON FILTER_SQL [S3_URI S3_OPTIONS_JSON]

Reads topic ``events`` (batch, then filtered), writes it to topic ``copy`` of OUT_DIR, optionally
reads the S3 copy of DATA_DIR, and writes what it saw to RESULT_JSON.
"""

from __future__ import annotations

import base64
import json
import sys
import time

from kafkalog.spark.session import get_session


def _rows(df) -> list[list]:
    def b64(v):
        return None if v is None else base64.b64encode(bytes(v)).decode("ascii")

    return sorted([r["topic"], r["partition"], r["offset"], b64(r["key"]), b64(r["value"])]
                  for r in df.select("topic", "partition", "offset", "key", "value").collect())


def main() -> None:
    master, data_dir, out_dir, result_path, filter_sql = sys.argv[1:6]
    spark = get_session(app_name="kafkalog-cluster-test", master=master)
    sc = spark.sparkContext
    # Executors register asynchronously: wait (bounded) until both workers gave one.
    deadline = time.monotonic() + 40
    while len(sc._jsc.sc().statusTracker().getExecutorInfos()) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    result: dict = {"master": sc.master,
                    "executors": len(sc._jsc.sc().statusTracker().getExecutorInfos()) - 1}

    def events():  # a new DataFrame per query (pushdown.check_plan_reuse explains why)
        return spark.read.format("kafkalog").option("subscribe", "events").option("minPartitions", "4") \
            .load(data_dir)

    result["batch"] = _rows(events())
    result["filtered"] = _rows(events().where(filter_sql))
    (events().select("key", "value").write.format("kafkalog").mode("append")
     .option("topic", "copy").option("createTopicPartitions", "2").save(out_dir))
    if len(sys.argv) > 7:
        uri, options = sys.argv[6], json.loads(sys.argv[7])
        remote = spark.read.format("kafkalog").options(**options).option("subscribe", "events").load(uri)
        result["s3"] = _rows(remote)
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(result, f)
    spark.stop()


if __name__ == "__main__":
    main()
