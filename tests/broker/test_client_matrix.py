"""kafka-python, confluent-kafka and aiokafka each produce with every codec they support, with acks
0/1/all and idempotence on and off; then each of the three reads back, with ``assign``, every topic
all of them wrote — keys, values, headers and timestamps equal — and so do ``kafkalog consume``
(reading the data directory while the broker runs) and ``kafkalog verify``."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time

import aiokafka
import confluent_kafka as ck
import kafka
import pytest

from kafkalog.broker import Broker
from kafkalog.cli import main

N = 12
BASE_TS = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# (acks, idempotent): every codec with the idempotent acks=all producer, every ack level uncompressed.
ACK_CASES = [("all", True), ("all", False), ("1", False), ("0", False)]


def _cases():
    for client in ("kp", "ck", "aio"):
        for codec in CODECS:
            yield client, codec, "all", True
        for acks, idem in ACK_CASES[1:]:
            yield client, "none", acks, idem


CASES = list(_cases())


def _records(topic: str) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]]:
    out = []
    for i in range(N):
        key = None if i == 3 else b"key-%d" % i
        value = None if i == 4 else (f"{topic} value {i} ".encode() * 30)
        headers = [("h1", b"x%d" % i), ("empty", b"")] if i % 2 == 0 else []
        out.append((key, value, headers, BASE_TS + i * 7))
    return out


def _topic(client, codec, acks, idem):
    return f"{client}-{codec}-acks{acks}-{'idem' if idem else 'plain'}"


def _produce_kp(bootstrap, topic, codec, acks, idem):
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        acks={"all": "all", "1": 1, "0": 0}[acks],
        enable_idempotence=idem,
        linger_ms=20,
    )
    futures = [
        producer.send(topic, key=k, value=v, headers=h, timestamp_ms=t) for k, v, h, t in _records(topic)
    ]
    producer.flush(20)
    for f in futures:
        f.get(20)
    producer.close(10)


def _produce_ck(bootstrap, topic, codec, acks, idem):
    conf = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20, "acks": acks}
    if idem:
        conf["enable.idempotence"] = True
    producer = ck.Producer(conf)
    errors = []
    for k, v, h, t in _records(topic):
        producer.produce(
            topic,
            key=k,
            value=v,
            headers=h or None,
            timestamp=t,
            on_delivery=lambda err, _msg: err and errors.append(err),
        )
    assert producer.flush(20) == 0
    assert errors == []


def _produce_aio(bootstrap, topic, codec, acks, idem):
    async def run():
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            acks={"all": "all", "1": 1, "0": 0}[acks],
            enable_idempotence=idem,
            linger_ms=20,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(topic, key=k, value=v, headers=h, timestamp_ms=t)
                for k, v, h, t in _records(topic)
            ]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), 30))


PRODUCERS = {"kp": _produce_kp, "ck": _produce_ck, "aio": _produce_aio}


@pytest.fixture(scope="module")
def produced(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("matrix")
    with Broker(data_dir) as broker:
        expected = {}
        for client, codec, acks, idem in CASES:
            topic = _topic(client, codec, acks, idem)
            PRODUCERS[client](broker.bootstrap_servers, topic, codec, acks, idem)
            expected[topic] = _records(topic)
        yield broker, data_dir, expected


def _normalise(headers):
    return [(k, bytes(v) if v is not None else None) for k, v in (headers or [])]


def test_kafka_python_reads_everything(produced):
    broker, _, expected = produced
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, consumer_timeout_ms=3000)
    consumer.assign([kafka.TopicPartition(t, 0) for t in expected])
    consumer.seek_to_beginning()
    got = {t: [] for t in expected}
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < N * len(expected) and time.monotonic() < deadline:
        for m in consumer:
            got[m.topic].append((m.key, m.value, _normalise(m.headers), m.timestamp))
    consumer.close()
    assert got == expected


def test_confluent_kafka_reads_everything(produced):
    broker, _, expected = produced
    consumer = ck.Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "matrix", "enable.auto.commit": False}
    )
    consumer.assign([ck.TopicPartition(t, 0, ck.OFFSET_BEGINNING) for t in expected])
    got = {t: [] for t in expected}
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < N * len(expected) and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got[m.topic()].append((m.key(), m.value(), _normalise(m.headers()), m.timestamp()[1]))
    consumer.close()
    assert got == expected


def test_aiokafka_reads_everything(produced):
    broker, _, expected = produced

    async def run():
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
        await consumer.start()
        got = {t: [] for t in expected}
        try:
            tps = [aiokafka.TopicPartition(t, 0) for t in expected]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + 30
            while sum(map(len, got.values())) < N * len(expected) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for tp, messages in batches.items():
                    got[tp.topic].extend(
                        (m.key, m.value, _normalise(m.headers), m.timestamp) for m in messages
                    )
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(asyncio.wait_for(run(), 60)) == expected


def _b64(value):
    return None if value is None else base64.b64decode(value)


def test_kafkalog_consume_reads_the_live_data_directory_and_verify_passes_after_stop(produced, capsys):
    broker, data_dir, expected = produced
    cli = [sys.executable, "-m", "kafkalog.cli"]
    for i, (topic, records) in enumerate(expected.items()):
        args = ["consume", "--data-dir", str(data_dir), "--topic", topic, "--binary"]
        if i == 0:  # another process, reading next to the running broker
            out = subprocess.run([*cli, *args], capture_output=True, text=True, timeout=60, check=True).stdout
        else:  # the same read-only path in this process (a process start per topic is slow)
            assert main(args) == 0
            out = capsys.readouterr().out
        rows = [json.loads(line) for line in out.splitlines()]
        got = [
            (_b64(r["key"]), _b64(r["value"]), [(k, _b64(v)) for k, v in r["headers"]], r["timestamp"])
            for r in rows
        ]
        assert got == records, topic
    # verify after a clean stop: a live writer's index files are still preallocated (Kafka trims them
    # when it closes a segment), which verify would report
    broker.stop()
    assert (data_dir / ".kafka_cleanshutdown").exists()
    verify = subprocess.run(
        [*cli, "verify", "--data-dir", str(data_dir)], capture_output=True, text=True, timeout=120
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
