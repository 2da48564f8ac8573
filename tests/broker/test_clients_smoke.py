"""Each real client produces to and consumes from the broker (the skeleton's end-to-end proof)."""

import asyncio
import time

import aiokafka
import confluent_kafka as ck
from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def test_kafka_python_roundtrip(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(5):
        producer.send(
            "kp", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)], timestamp_ms=1000 + i
        ).get(10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=2000)
    consumer.assign([TopicPartition("kp", 0)])
    consumer.seek_to_beginning()
    got = [(m.offset, m.key, m.value, m.headers, m.timestamp) for m in consumer]
    consumer.close()
    assert got == [(i, b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], 1000 + i) for i in range(5)]


def test_confluent_kafka_roundtrip_with_group_id_and_assign(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(5):
        producer.produce("ck", key=b"k%d" % i, value=b"v%d" % i, timestamp=2000 + i)
    assert producer.flush(10) == 0
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition("ck", 0, ck.OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + 15
    while len(got) < 5 and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.key(), m.value(), m.timestamp()[1]))
    consumer.close()
    assert got == [(i, b"k%d" % i, b"v%d" % i, 2000 + i) for i in range(5)]


def test_aiokafka_roundtrip(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers

    async def run():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait("aio", b"v%d" % i, key=b"k%d" % i, timestamp_ms=3000 + i)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition("aio", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            batches = await consumer.getmany(timeout_ms=5000)
            return [(m.offset, m.key, m.value, m.timestamp) for ms in batches.values() for m in ms]
        finally:
            await consumer.stop()

    got = asyncio.run(asyncio.wait_for(run(), 30))
    assert got == [(i, b"k%d" % i, b"v%d" % i, 3000 + i) for i in range(3)]
