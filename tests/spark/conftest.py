"""One local SparkSession for the whole test run (JVM start-up costs ~10 s), bound to 127.0.0.1."""

from __future__ import annotations

import os

import pytest

from kafkalog.errors import KafkaLogError


@pytest.fixture(scope="session")
def spark():
    from kafkalog.spark.session import check_java, get_session

    try:
        check_java()
    except KafkaLogError as e:
        pytest.fail(str(e), pytrace=False)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = get_session(
        app_name="kafkalog-tests",
        master="local[2]",
        conf={"spark.sql.execution.arrow.maxRecordsPerBatch": "10000", "spark.driver.memory": "1g"},
    )
    yield session
    session.stop()
