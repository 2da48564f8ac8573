"""KafkaConfig: Kafka's names and defaults, server.properties, one clear error for a bad value."""

import pytest

from kafkalog.broker.config import KafkaConfig
from kafkalog.errors import InvalidConfigError


def test_defaults_are_kafkas():
    config = KafkaConfig()
    assert (config.node_id, config.num_partitions, config.auto_create_topics_enable) == (1, 1, True)
    assert config.message_max_bytes == 1048588 and config.socket_request_max_bytes == 100 * 1024 * 1024
    assert config.connections_max_idle_ms == 600000 and config.log_retention_check_interval_ms == 300000
    assert config.listener == ("127.0.0.1", 9092) and config.advertised_listener is None
    assert config.log_config.retention_ms == 7 * 24 * 3600 * 1000


def test_server_properties_and_overrides(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text(
        "node.id = 4\nlisteners=PLAINTEXT://[::1]:19092,SSL://host:9093\nlog.retention.minutes=5\n"
        "log.segment.bytes: 1048576\nmessage.max.bytes 5000\ncompression.type=lz4\n"
        "advertised.listeners=PLAINTEXT://kafka.example:29092\n"
    )
    config = KafkaConfig.from_props({"num.partitions": 3}, file=props)
    assert (config.node_id, config.num_partitions, config.listener) == (4, 3, ("::1", 19092))
    assert config.advertised_listener == ("kafka.example", 29092)
    log_config = config.log_config
    assert (log_config.retention_ms, log_config.segment_bytes) == (300_000, 1 << 20)
    assert (log_config.max_message_bytes, log_config.compression_type) == (5000, "lz4")
    assert config.with_overrides({"node.id": 9}).node_id == 9


@pytest.mark.parametrize(
    "props",
    [
        {"num.partitions": "0"},
        {"num.partitions": "three"},
        {"auto.create.topics.enable": "yes"},
        {"listeners": "127.0.0.1:9092"},
        {"listeners": "PLAINTEXT://host:99999"},
        {"log.segment.bytes": "1"},
        {"compression.type": "brotli"},
        {"socket.request.max.bytes": "0"},
    ],
)
def test_bad_values_are_one_clear_error(props):
    with pytest.raises(InvalidConfigError) as e:
        KafkaConfig.from_props(props)
    assert "\n" not in str(e.value)
