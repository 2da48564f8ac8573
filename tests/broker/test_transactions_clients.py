"""Transactions with real clients: confluent-kafka (librdkafka), kafka-python and aiokafka producers
commit and abort, read_committed consumers see exactly the committed records, a second producer with
the same transactional id fences the first, and a consume-transform-produce loop commits its input
offsets in the same transaction as its output (exactly once)."""

from __future__ import annotations

import asyncio
import time
import uuid

import aiokafka
import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kafka_errors
from kafka.structs import OffsetAndMetadata

CONFIG = {
    "num.partitions": 2,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
}
pytestmark = pytest.mark.kafkalog_broker_config(CONFIG)
DEADLINE_S = 30.0


def create_topics(bootstrap: str, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, 2) for t in topics]).values():
        future.result(30)


def consume_all(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    """Every record of ``topic`` a fresh consumer with ``isolation`` reads: waits for ``expected``
    records, then a little longer to be sure nothing more comes."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    settle = None
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
            if len(got) >= expected:
                settle = settle or time.monotonic() + 1.0
                if time.monotonic() > settle:
                    break
    finally:
        consumer.close()
    return sorted(got)


def test_confluent_kafka_commit_and_abort(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    create_topics(bootstrap, "t")
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "ck-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("t", b"commit-%d" % i, partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce("t", b"abort-%d" % i, partition=i % 2)
    producer.flush(30)  # on the broker, so that read_uncommitted can see them
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("t", b"commit-10", partition=0)
    producer.commit_transaction(30)

    committed = sorted(b"commit-%d" % i for i in range(11))
    assert consume_all(bootstrap, "t", "read_committed", 11) == committed
    assert consume_all(bootstrap, "t", "read_uncommitted", 15) == sorted(
        committed + [b"abort-%d" % i for i in range(4)]
    )


def test_confluent_kafka_second_producer_fences_the_first(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    create_topics(bootstrap, "t")
    first = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "shared"})
    first.init_transactions(30)
    first.begin_transaction()
    first.produce("t", b"zombie", partition=0)
    first.flush(30)
    second = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "shared"})
    second.init_transactions(30)  # aborts the first one's open transaction
    with pytest.raises(ck.KafkaException) as fenced:
        first.commit_transaction(30)
    assert fenced.value.args[0].fatal()
    second.begin_transaction()
    second.produce("t", b"winner", partition=0)
    second.commit_transaction(30)
    assert consume_all(bootstrap, "t", "read_committed", 1) == [b"winner"]


def test_confluent_kafka_exactly_once_consume_transform_produce(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    create_topics(bootstrap, "in", "out")
    source = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        source.produce("in", b"%d" % i, partition=i % 2)
    source.flush(30)

    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["in"])
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "eos-app"})
    producer.init_transactions(30)
    done = 0
    aborted_once = False
    deadline = time.monotonic() + DEADLINE_S
    while done < 40:
        assert time.monotonic() < deadline, f"only {done} of 40 records were processed"
        messages = [m for m in consumer.consume(10, 0.5) if m.error() is None]
        if not messages:
            continue
        producer.begin_transaction()
        for m in messages:
            producer.produce("out", b"x" + m.value(), partition=m.partition())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        if not aborted_once:
            # a failed step: abort, and read the same input again from the committed offsets
            producer.abort_transaction(30)
            aborted_once = True
            for tp in consumer.committed(consumer.assignment(), 30):
                consumer.seek(ck.TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            continue
        producer.commit_transaction(30)
        done += len(messages)
    consumer.close()

    assert consume_all(bootstrap, "out", "read_committed", 40) == sorted(b"x%d" % i for i in range(40))
    checker = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "eos"})
    committed = checker.committed([ck.TopicPartition("in", 0), ck.TopicPartition("in", 1)], 30)
    checker.close()
    assert [tp.offset for tp in committed] == [20, 20]


def test_kafka_python_transactions_and_read_committed_consumer(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    create_topics(bootstrap, "t")
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-tx")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(5):
        producer.send("t", b"kept-%d" % i, partition=i % 2)
    producer.send_offsets_to_transaction({TopicPartition("t", 0): OffsetAndMetadata(7, "kp", -1)}, "kp-app")
    producer.commit_transaction()
    producer.begin_transaction()
    for i in range(3):
        producer.send("t", b"dropped-%d" % i, partition=i % 2)
    producer.send_offsets_to_transaction({TopicPartition("t", 0): OffsetAndMetadata(99, "", -1)}, "kp-app")
    producer.flush()
    producer.abort_transaction()
    producer.close()
    app = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-app", enable_auto_commit=False)
    assert app.committed(TopicPartition("t", 0)) == 7  # the aborted transaction's 99 does not count
    app.close()

    consumer = KafkaConsumer(
        "t",
        bootstrap_servers=bootstrap,
        group_id="kp-reader",
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        consumer_timeout_ms=3000,
    )
    got = sorted(m.value for m in consumer)
    consumer.close()
    assert got == sorted(b"kept-%d" % i for i in range(5))


def test_kafka_python_admin_describes_and_lists_transactions(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    create_topics(bootstrap, "t")
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "described"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("t", b"open", partition=1)
    producer.flush(30)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        description = admin.describe_transactions(["described"])["described"]
        assert str(description.state.value) == "Ongoing"
        assert {(tp.topic, tp.partition) for tp in description.topic_partitions} == {("t", 1)}
        listed = [t for listings in admin.list_transactions().values() for t in listings]
        assert [(t.transactional_id, str(t.state.value)) for t in listed] == [("described", "Ongoing")]
        with pytest.raises(kafka_errors.TransactionalIdNotFoundError):
            admin.describe_transactions(["nobody"])
    finally:
        admin.close()
        producer.abort_transaction(30)


def test_aiokafka_transactional_producer(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    create_topics(bootstrap, "t")

    async def run() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-tx")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(4):
                    await producer.send_and_wait("t", b"aio-%d" % i, partition=i % 2)
                await producer.send_offsets_to_transaction({aiokafka.TopicPartition("t", 1): 4}, "aio-app")
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    await producer.send_and_wait("t", b"aio-aborted", partition=0)
                    raise RuntimeError("the application fails: the transaction is aborted")
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            "t",
            bootstrap_servers=bootstrap,
            group_id="aio-reader",
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < 4 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=300)).values():
                    got.extend(r.value for r in records)
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return sorted(got)

    assert asyncio.run(run()) == sorted(b"aio-%d" % i for i in range(4))
    app = KafkaConsumer(bootstrap_servers=bootstrap, group_id="aio-app", enable_auto_commit=False)
    assert app.committed(TopicPartition("t", 1)) == 4
    app.close()


def test_kafka_python_admin_finds_and_aborts_a_hanging_transaction(kafkalog_broker):
    """KIP-664's tooling: DescribeProducers shows the open transaction's first offset, and
    WriteTxnMarkers (the admin's abort_transaction) ends it, so read_committed readers move on."""
    from kafka.admin._transactions import AbortTransactionSpec

    bootstrap = kafkalog_broker.bootstrap_servers
    create_topics(bootstrap, "t")
    source = ck.Producer({"bootstrap.servers": bootstrap})
    source.produce("t", b"before", partition=0)
    source.flush(30)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "hanging"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("t", b"hanging", partition=0)
    producer.flush(30)
    source.produce("t", b"after", partition=0)
    source.flush(30)
    log = kafkalog_broker.server.log_manager.get_log("t", 0)
    assert log.last_stable_offset == 1

    tp = TopicPartition("t", 0)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        (state,) = admin.describe_producers([tp])[tp].active_producers
        assert state.current_transaction_start_offset == 1
        assert state.last_sequence == 0
        admin.abort_transaction(
            AbortTransactionSpec(tp, state.producer_id, state.producer_epoch, state.coordinator_epoch)
        )
        (after,) = admin.describe_producers([tp])[tp].active_producers
        assert after.current_transaction_start_offset == -1
        unknown = AbortTransactionSpec(TopicPartition("nope", 0), state.producer_id, state.producer_epoch, -1)
        with pytest.raises(kafka_errors.UnknownTopicOrPartitionError):
            admin.abort_transaction(unknown)
    finally:
        admin.close()
    assert log.last_stable_offset == log.log_end_offset
    assert consume_all(bootstrap, "t", "read_committed", 2) == [b"after", b"before"]
    producer.abort_transaction(30)
