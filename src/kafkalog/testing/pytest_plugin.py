"""pytest plugin (registered through the ``pytest11`` entry point): a real Kafka-wire broker on
127.0.0.1 over a temporary data directory.

    def test_roundtrip(kafkalog_broker):
        producer = KafkaProducer(bootstrap_servers=kafkalog_broker.bootstrap_servers)

Broker configs for a test module or test: ``@pytest.mark.kafkalog_broker_config({"num.partitions": 4})``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafkalog_broker_config(configs): broker configs for kafkalog_broker")


@pytest.fixture
def kafkalog_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A started ``kafkalog.broker.Broker`` on a free port; stopped (cleanly) after the test."""
    from kafkalog.broker.embedded import Broker

    configs: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("kafkalog_broker_config"))):
        configs.update(marker.args[0] if marker.args else marker.kwargs)
    with Broker(tmp_path_factory.mktemp("kafkalog-broker"), configs=configs) as broker:
        yield broker
