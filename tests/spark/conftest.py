"""One local SparkSession for the whole test run (JVM start-up costs ~10 s), bound to 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkalog.errors import KafkaLogError

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Every test in tests/spark is a Spark test, so that -m "not spark" leaves them all out. Conftest
    # hooks see the whole session's items: only those collected from this directory are marked.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.spark)


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
