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
