"""An SSL listener (Kafka's ``listeners=SSL://…`` with a PEM or PKCS12 keystore): kafka-python,
confluent-kafka (which checks the host name against the certificate) and aiokafka produce and
consume over TLS — Fetch responses included, whose file regions cannot go out with ``sendfile``
there — mutual TLS with ``ssl.client.auth=required``, and one clear error for each config mistake."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from pathlib import Path

import confluent_kafka as ck
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkalog.broker.config import KafkaConfig
from kafkalog.broker.embedded import Broker
from kafkalog.broker.ssl_factory import server_ssl_context
from kafkalog.errors import InvalidConfigError
from tests.broker._pki import make_pki

TIMEOUT_S = 20
RECORDS = 6000
API_VERSIONS_V0 = b"\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04test"  # a framed request
VALUE = b"v" * 200  # 6000 x 200 B: more than the 512 KiB above which a fetch sends file regions


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate."""
    return make_pki(tmp_path_factory.mktemp("pki"))


def _tls_configs(pki: Path, **extra: str) -> dict[str, str]:
    return {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki / "server.pem"),
        **extra,
    }


def _kp_produce_consume(bootstrap: str, topic: str, **tls) -> int:
    producer = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", **tls)
    try:
        for _ in range(RECORDS):
            producer.send(topic, VALUE, partition=0)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        security_protocol="SSL",
        consumer_timeout_ms=5000,
        auto_offset_reset="earliest",
        **tls,
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        return sum(1 for record in consumer if record.value == VALUE)
    finally:
        consumer.close()


def test_kafka_python_confluent_and_aiokafka_over_tls(pki, tmp_path):
    with Broker(tmp_path / "data", configs=_tls_configs(pki)) as broker:
        bootstrap = broker.bootstrap_servers
        assert _kp_produce_consume(bootstrap, "kp", ssl_cafile=str(pki / "ca.pem")) == RECORDS

        # confluent-kafka checks the broker's name against the certificate (https by default).
        tls = {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki / "ca.pem"),
        }
        producer = ck.Producer(tls)
        for _ in range(RECORDS):
            producer.produce("ck", VALUE, partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        consumer = ck.Consumer({**tls, "group.id": "ck-tls", "enable.auto.commit": False})
        consumer.assign([ck.TopicPartition("ck", 0, 0)])
        got, deadline = 0, time.monotonic() + TIMEOUT_S
        while got < RECORDS and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(1000, 1.0) if not m.error() and m.value() == VALUE)
        consumer.close()
        assert got == RECORDS

        async def aio() -> int:
            from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
            from aiokafka.helpers import create_ssl_context

            context = create_ssl_context(cafile=str(pki / "ca.pem"))
            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context
            )
            await producer.start()
            try:
                await asyncio.gather(*[await producer.send("aio", VALUE, partition=0) for _ in range(100)])
            finally:
                await producer.stop()
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap,
                security_protocol="SSL",
                ssl_context=context,
                auto_offset_reset="earliest",
            )
            await consumer.start()
            try:
                consumer.assign([TopicPartition("aio", 0)])
                batches = await consumer.getmany(timeout_ms=5000, max_records=1000)
                return sum(len(records) for records in batches.values())
            finally:
                await consumer.stop()

        assert asyncio.run(aio()) == 100


def test_plaintext_client_on_a_tls_listener_is_dropped_not_hung(pki, tmp_path):
    with Broker(tmp_path / "data", configs=_tls_configs(pki)) as broker:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT_S) as sock:
            # An ApiVersions request in plaintext, where a TLS ClientHello belongs.
            sock.sendall(API_VERSIONS_V0)
            answer = b""
            while chunk := sock.recv(4096):  # bounded by the socket timeout
                answer += chunk
        # At most a TLS alert record (content type 21), then the close: never a Kafka response.
        assert answer == b"" or answer[0] == 21
        # The broker still serves TLS clients.
        assert (
            _kp_produce_consume(broker.bootstrap_servers, "after", ssl_cafile=str(pki / "ca.pem")) == RECORDS
        )


def test_mutual_tls_and_a_pkcs12_keystore(pki, tmp_path):
    configs = {
        "listeners": "CLIENTS://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENTS:SSL",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(pki / "server.p12"),
        "ssl.keystore.password": "store-secret",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
        "ssl.client.auth": "required",
    }
    with Broker(tmp_path / "data", configs=configs) as broker:
        bootstrap = broker.bootstrap_servers
        with_cert = {
            "ssl_cafile": str(pki / "ca.pem"),
            "ssl_certfile": str(pki / "client.crt"),
            "ssl_keyfile": str(pki / "client.key"),
        }
        assert _kp_produce_consume(bootstrap, "mtls", **with_cert) == RECORDS
        # Without a client certificate the broker answers nothing: the TLS layer refuses the client
        # (with TLS 1.3 the alert comes after the client's side of the handshake), as with Kafka.
        context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        with socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT_S) as raw:
            try:
                with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    tls.sendall(API_VERSIONS_V0)
                    answer = tls.recv(4096)
            except (ssl.SSLError, ConnectionError):
                answer = b""
        assert answer == b""


@pytest.mark.parametrize(
    "configs, message",
    [
        ({"listeners": "SSL://127.0.0.1:0"}, "needs the broker's key and certificates"),
        (
            {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "JKS", "ssl.keystore.location": "x.jks"},
            "use PEM or PKCS12",
        ),
        (
            {
                "listeners": "SSL://127.0.0.1:0",
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "/nonexistent",
            },
            "Cannot load the SSL keystore",
        ),
        (
            {"listeners": "X://127.0.0.1:0", "listener.security.protocol.map": "X:KERBEROS"},
            "unknown security protocol KERBEROS",
        ),
        ({"listeners": "INTERNAL://127.0.0.1:0"}, "no security protocol"),
        (
            {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.client.auth": "required"},
            "needs the broker's key",
        ),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.enabled.protocols": "TLSv1"}, "ssl.enabled.protocols"),
    ],
)
def test_config_mistakes_are_one_clear_error(configs, message):
    with pytest.raises(InvalidConfigError, match=message):
        server_ssl_context(KafkaConfig.from_props(configs))


def test_client_auth_without_a_truststore_is_refused(pki):
    configs = {**_tls_configs(pki), "ssl.client.auth": "requested"}
    with pytest.raises(InvalidConfigError, match="needs a truststore"):
        server_ssl_context(KafkaConfig.from_props(configs))


def test_inline_pem_keystore(pki, tmp_path):
    pem = (pki / "server.pem").read_text()
    key_end = pem.index("-----END PRIVATE KEY-----") + len("-----END PRIVATE KEY-----")
    configs = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": pem[:key_end],
        "ssl.keystore.certificate.chain": pem[key_end:].strip(),
    }
    with Broker(tmp_path / "data", configs=configs) as broker:
        assert (
            _kp_produce_consume(broker.bootstrap_servers, "inline", ssl_cafile=str(pki / "ca.pem")) == RECORDS
        )


def test_a_plaintext_and_an_ssl_listener_on_one_broker(pki, tmp_path):
    """Two listeners serve one log: records produced on the PLAINTEXT one are consumed on the SSL one
    (aiokafka's own test_ssl_consume does this), and each listener's Metadata names its own endpoint.
    The keystore is given for the SSL listener by name (Kafka's ``listener.name.<name>.`` prefix)."""
    from tests.broker import _raw

    configs = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SSL",
        "listener.name.secure.ssl.keystore.type": "PEM",
        "listener.name.secure.ssl.keystore.location": str(pki / "server.pem"),
    }
    with Broker(tmp_path / "data", configs=configs) as broker:
        ports = broker.server.bound_ports
        assert set(ports) == {"PLAINTEXT", "SECURE"} and broker.port == ports["PLAINTEXT"]
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        for _ in range(RECORDS):
            producer.send("both", VALUE, partition=0)
        producer.flush(TIMEOUT_S)
        producer.close(TIMEOUT_S)
        secure = f"127.0.0.1:{ports['SECURE']}"
        consumer = KafkaConsumer(
            bootstrap_servers=secure,
            security_protocol="SSL",
            ssl_cafile=str(pki / "ca.pem"),
            consumer_timeout_ms=5000,
            auto_offset_reset="earliest",
        )
        try:
            consumer.assign([TopicPartition("both", 0)])
            assert sum(1 for record in consumer if record.value == VALUE) == RECORDS
            # The SSL listener's clients are told about the SSL endpoint.
            assert {b.port for b in consumer._client.cluster.brokers()} == {ports["SECURE"]}
        finally:
            consumer.close()
        with _raw.connect(broker.bootstrap_servers) as sock:
            cls, _ = _raw.request_class(3, 12)
            metadata = _raw.request(
                sock,
                cls(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
            )
            assert [(b.host, b.port) for b in metadata.brokers] == [("127.0.0.1", ports["PLAINTEXT"])]


@pytest.mark.parametrize(
    "listeners, message",
    [
        ("PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093", "different name"),
        ("PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092", "different port"),
    ],
)
def test_listener_mistakes(listeners, message):
    with pytest.raises(InvalidConfigError, match=message):
        KafkaConfig.from_props({"listeners": listeners})


def test_advertised_listener_must_name_a_listener():
    with pytest.raises(InvalidConfigError, match=r"advertised\.listeners names OTHER"):
        KafkaConfig.from_props(
            {"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "OTHER://example.com:9092"}
        )


def test_serve_port_moves_the_first_listener_and_keeps_the_ssl_one(pki, tmp_path):
    import re
    import signal
    import subprocess
    import sys
    import threading

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkalog.cli",
            "serve",
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            "0",
            "--config",
            "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:0",
            "--config",
            "ssl.keystore.type=PEM",
            "--config",
            f"ssl.keystore.location={pki / 'server.pem'}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, line = time.monotonic() + 60, ""
        while time.monotonic() < deadline and "Kafka-wire broker" not in line and proc.poll() is None:
            line = proc.stderr.readline()
        # Keep reading the broker's output, so that its logging never waits on a full pipe.
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        found = dict(re.findall(r"(PLAINTEXT|SSL) 127\.0\.0\.1:(\d+)", line))
        assert set(found) == {"PLAINTEXT", "SSL"} and found["PLAINTEXT"] != "9092", line
        bootstrap = f"127.0.0.1:{found['SSL']}"
        assert _kp_produce_consume(bootstrap, "cli", ssl_cafile=str(pki / "ca.pem")) == RECORDS
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def test_sasl_ssl_listener(pki, tmp_path):
    """SASL/PLAIN inside TLS (SASL_SSL), with kafka-python."""
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
    configs = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki / "server.pem"),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
    }
    with Broker(tmp_path / "data", configs=configs) as broker:
        bootstrap = broker.bootstrap_servers
        auth = {
            "security_protocol": "SASL_SSL",
            "ssl_cafile": str(pki / "ca.pem"),
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-secret",
        }
        producer = KafkaProducer(bootstrap_servers=bootstrap, **auth)
        for _ in range(RECORDS):
            producer.send("sasl-ssl", VALUE, partition=0)
        producer.flush(TIMEOUT_S)
        producer.close(TIMEOUT_S)
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, consumer_timeout_ms=5000, auto_offset_reset="earliest", **auth
        )
        try:
            consumer.assign([TopicPartition("sasl-ssl", 0)])
            assert sum(1 for record in consumer if record.value == VALUE) == RECORDS
        finally:
            consumer.close()
