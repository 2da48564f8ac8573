"""Per-topic configs apply on produce through the storage engine's validator: compression.type
recompresses, message.timestamp.type=LogAppendTime stamps the append time (and the Produce
response says so), max.message.bytes refuses larger batches; broker-level log.* names are the
defaults of every topic."""

from __future__ import annotations

import time

import kafka
from kio.schema.errors import ErrorCode

from kafkalog.broker import Broker
from kafkalog.records.types import CompressionType
from tests.broker import _raw
from tests.broker.test_produce_errors import _batch, _produce


def _create_topics(broker, topics):
    async def create():
        for name, configs in topics.items():
            broker.server.log_manager.create_topic(name, 1, configs)

    broker.run_coroutine(create())


def test_topic_configs_on_produce(tmp_path):
    with Broker(tmp_path, configs={"log.segment.bytes": 1 << 20}) as broker:
        _create_topics(
            broker,
            {
                "zstd": {"compression.type": "zstd"},
                "append-time": {"message.timestamp.type": "LogAppendTime"},
                "small": {"max.message.bytes": 600},
            },
        )
        assert broker.server.log_manager.topic_config("zstd").segment_bytes == 1 << 20
        producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=5)
        for i in range(10):
            producer.send("zstd", key=b"k%d" % i, value=b"compress me " * 20)
        producer.flush(10)
        producer.close()
        log = broker.server.log_manager.get_log("zstd", 0)
        assert {b.compression_type for b in log.batches(0)} == {CompressionType.ZSTD}
        consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, consumer_timeout_ms=2000)
        consumer.assign([kafka.TopicPartition("zstd", 0)])
        consumer.seek_to_beginning()
        assert [(m.key, m.value) for m in consumer] == [(b"k%d" % i, b"compress me " * 20) for i in range(10)]
        consumer.close()

        with _raw.connect(broker.bootstrap_servers) as sock:
            before = int(time.time() * 1000)
            r = _produce(sock, "append-time", _batch(2, timestamp=1000))
            after = int(time.time() * 1000)
            assert r.error_code == ErrorCode.none
            assert before <= round(r.log_append_time.timestamp() * 1000) <= after
            assert _produce(sock, "small", _batch(1, size=1000)).error_code == ErrorCode.message_too_large
            assert _produce(sock, "small", _batch(1, size=100)).error_code == ErrorCode.none
        stamped = list(broker.server.log_manager.get_log("append-time", 0).records(0))
        assert all(before <= rec.timestamp <= after for rec in stamped) and len(stamped) == 2


def test_a_topics_message_format_version_is_kept_but_ignored_by_the_broker(tmp_path):
    """Kafka's KRaft brokers ignore message.format.version (LogConfig.shouldIgnoreMessageFormatVersion):
    the value is stored and described, the logs write v2 — headers and all. Offline tools honour it."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    with Broker(tmp_path) as broker:
        _create_topics(broker, {"old-format": {"message.format.version": "0.10.2"}})
        producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        producer.send("old-format", b"v", headers=[("h", b"1")]).get(10)
        producer.close()
        log = broker.server.log_manager.get_log("old-format", 0)
        assert [b.magic for b in log.batches(0)] == [2]
        assert [[(h.key, h.value) for h in r.headers] for r in log.records(0)] == [[("h", b"1")]]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        resource = ConfigResource(ConfigResource.Type.TOPIC, "old-format")
        described = admin.describe_configs([resource])[resource].result(10)
        assert described["message.format.version"].value == "0.10.2"
        assert broker.server.log_manager.topic_config("old-format").message_format_version == "0.10.2"


def _alter_topic(sock, topic, ops):
    cls, mod = _raw.request_class(44, 1)
    configs = tuple(mod.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops)
    resource = mod.AlterConfigsResource(resource_type=2, resource_name=topic, configs=configs)
    (result,) = _raw.request(sock, cls(resources=(resource,), validate_only=False)).responses
    return result.error_code, result.error_message


def test_topic_config_answers_as_kafkas_controller_and_config_helper(tmp_path):
    """DescribeConfigs' synonyms as Kafka's ConfigHelper builds them (cut at the first broker
    synonym's name: log.retention.ms has no default of its own; none for configs no broker config
    sets); IncrementalAlterConfigs as its controller (DELETE of an unknown name changes nothing,
    APPEND to one is "not LIST"); only the first broker synonym is dynamic; CreateTopics echoes the
    strings given."""
    from tests.broker.test_admin_protocol import _create
    from tests.broker.test_dynamic_broker_configs import DEFAULT, STATIC, TOPIC, _alter, _describe, _synonyms

    with Broker(tmp_path, configs={"log.retention.hours": "1"}) as broker, \
            _raw.connect(broker.bootstrap_servers) as sock:
        created = _create(sock, "t", configs=[("cleanup.policy", "compact, delete"), ("segment.ms", "0100")],
                          version=5)
        assert created.error_code == ErrorCode.none
        returned = {c.name: (c.value, c.config_source) for c in created.configs}
        assert returned["cleanup.policy"] == ("compact, delete", TOPIC)
        assert returned["segment.ms"] == ("0100", TOPIC)
        assert returned["retention.ms"] == ("3600000", STATIC)  # the controller's own rules
        assert returned["segment.bytes"] == (str(1 << 30), DEFAULT)

        described = _describe(sock, 2, "t")
        retention = described["retention.ms"]
        assert (retention.value, retention.config_source, _synonyms(retention)) == ("3600000", DEFAULT, [])
        assert _synonyms(described["segment.ms"]) == [("segment.ms", "100", TOPIC)]
        assert _synonyms(described["segment.bytes"]) == [("log.segment.bytes", str(1 << 30), DEFAULT)]
        remote = described["remote.storage.enable"]
        assert (remote.config_source, _synonyms(remote)) == (DEFAULT, [])

        assert _alter_topic(sock, "t", [("no.such.config", 1, None)]) == (ErrorCode.none, None)
        assert _alter_topic(sock, "t", [("no.such.config", 2, "x")]) == (
            ErrorCode.invalid_config, "Can't APPEND to key no.such.config because its type is not LIST.")
        assert _alter_topic(sock, "t", [("no.such.config", 0, "x")]) == (
            ErrorCode.invalid_config, "Unknown topic config name: no.such.config")

        assert _alter(sock, "", [("log.retention.hours", 0, "2")]) == (
            ErrorCode.invalid_request, "Cannot update these configs dynamically: Set(log.retention.hours)")
        broker_configs = _describe(sock, 4, str(broker.server.apis.node_id))
        assert broker_configs["log.retention.hours"].read_only
        assert not broker_configs["log.retention.ms"].read_only
        assert broker_configs["log.retention.ms"].value is None  # Kafka's null default
        assert broker_configs["log.roll.hours"].value == "168"
