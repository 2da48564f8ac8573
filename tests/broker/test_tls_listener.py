"""An SSL listener (Kafka's ``listeners=SSL://…`` with a PEM or PKCS12 keystore): kafka-python,
confluent-kafka (which checks the host name against the certificate) and aiokafka produce and
consume over TLS — Fetch responses included, whose file regions cannot go out with ``sendfile``
there — mutual TLS with ``ssl.client.auth=required``, and one clear error for each config mistake."""

from __future__ import annotations

import asyncio
import logging
import re
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
            {
                "listeners": "SSL://127.0.0.1:0",
                "ssl.keystore.type": "JKS",
                "ssl.keystore.location": "x.jks",
                "ssl.keystore.password": "x",
            },
            "use PEM or PKCS12",
        ),
        (
            {
                "listeners": "SSL://127.0.0.1:0",
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "/nonexistent",
            },
            "Failed to load PEM SSL keystore /nonexistent",
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


def _sasl_ssl_configs(pki: Path, **extra: str) -> dict[str, str]:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
    return {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki / "server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        **extra,
    }


def test_sasl_ssl_client_auth_only_from_the_listener_prefix(pki, tmp_path, caplog):
    """KIP-684: the plain ssl.client.auth is for SSL listeners; a SASL_SSL listener asks for client
    certificates only when listener.name.<name>.ssl.client.auth says so (Kafka warns otherwise)."""
    configs = _sasl_ssl_configs(pki, **{"ssl.client.auth": "required"})
    with caplog.at_level(logging.WARNING, logger="kafkalog.broker.ssl_factory"):
        assert server_ssl_context(KafkaConfig.from_props(configs), "SASL_SSL", "SASL_SSL").verify_mode == (
            ssl.CERT_NONE
        )
    assert any(
        "Broker configuration 'ssl.client.auth' is applied only to SSL listeners" in r.getMessage()
        for r in caplog.records
    )
    prefixed = {**configs, "listener.name.sasl_ssl.ssl.client.auth": "required"}
    assert server_ssl_context(KafkaConfig.from_props(prefixed), "SASL_SSL", "SASL_SSL").verify_mode == (
        ssl.CERT_REQUIRED
    )
    # The same configs on an SSL listener: the plain one counts.
    assert server_ssl_context(KafkaConfig.from_props(configs), "SSL", "SSL").verify_mode == ssl.CERT_REQUIRED
    # A SASL/PLAIN client without a certificate logs in and produces.
    with Broker(tmp_path / "data", configs=configs) as broker:
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap_servers,
            security_protocol="SASL_SSL",
            ssl_cafile=str(pki / "ca.pem"),
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password="alice-secret",
        )
        try:
            assert producer.send("no-cert", b"v", partition=0).get(TIMEOUT_S).offset == 0
        finally:
            producer.close(TIMEOUT_S)


def _encrypted_keystore(pki: Path) -> Path:
    from cryptography.hazmat.primitives import serialization

    pem = (pki / "server.pem").read_bytes()
    key = serialization.load_pem_private_key(pem, password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"key-secret"),
    )
    path = pki / "server-encrypted.pem"
    path.write_bytes(encrypted + pem[pem.index(b"-----BEGIN CERTIFICATE-----") :])
    return path


def test_encrypted_pem_key_without_password_fails_without_prompting(pki, tmp_path):
    """kafkalog serve in a terminal: OpenSSL would ask for the pass phrase there and wait; Kafka fails
    at startup, and so does kafkalog, at once. With ssl.key.password the key loads."""
    import os
    import pty
    import select
    import signal
    import sys

    keystore = _encrypted_keystore(pki)
    with_password = _tls_configs(
        pki, **{"ssl.keystore.location": str(keystore), "ssl.key.password": "key-secret"}
    )
    server_ssl_context(KafkaConfig.from_props(with_password))
    with pytest.raises(InvalidConfigError, match="Private key could not be loaded"):
        server_ssl_context(
            KafkaConfig.from_props(_tls_configs(pki, **{"ssl.keystore.location": str(keystore)}))
        )

    args = [
        sys.executable,
        "-m",
        "kafkalog.cli",
        "serve",
        "--data-dir",
        str(tmp_path / "data"),
        "--port",
        "0",
        "--config",
        "listeners=SSL://127.0.0.1:0",
        "--config",
        "ssl.keystore.type=PEM",
        "--config",
        f"ssl.keystore.location={keystore}",
    ]
    pid, fd = pty.fork()
    if pid == 0:  # the child: kafkalog with the pseudo-terminal as its terminal
        os.execv(sys.executable, args)
    output, deadline, status = b"", time.monotonic() + 60, None
    try:
        while time.monotonic() < deadline and status is None:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    output += os.read(fd, 4096)
                except OSError:  # the child closed the terminal
                    pass
            done, code = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                status = code
    finally:
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert status is not None and status != 0, output
    assert b"pass phrase" not in output.lower()
    assert b"Private key could not be loaded" in output


@pytest.mark.parametrize(
    "protocols, negotiated",
    [
        ("TLSv1.2,TLSv1.1,TLSv1,SSLv2Hello", "TLSv1.2"),
        ("TLSv1.3,TLSv1.1", "TLSv1.3"),
        ("TLSv1.2, TLSv1.3", "TLSv1.3"),
    ],
)
def test_enabled_protocols_java_knows_but_never_negotiates_are_accepted(pki, tmp_path, protocols, negotiated):
    configs = _tls_configs(pki, **{"ssl.enabled.protocols": protocols})
    with Broker(tmp_path / "data", configs=configs) as broker:
        context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        with (
            socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT_S) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            assert tls.version() == negotiated


@pytest.mark.parametrize(
    "protocols, message",
    [
        ("TLSv1.1,TLSv1", "none is enabled|neither is enabled"),
        ("TLSv1.2,TLSv1.4", "Unsupported protocol TLSv1.4"),
        ("tlsv1.2", "Unsupported protocol tlsv1.2"),  # the JDK's names are case-sensitive
    ],
)
def test_enabled_protocols_refused(pki, protocols, message):
    with pytest.raises(InvalidConfigError, match=message):
        server_ssl_context(KafkaConfig.from_props(_tls_configs(pki, **{"ssl.enabled.protocols": protocols})))


def test_failed_handshake_is_one_info_line(pki, tmp_path, caplog):
    """As Kafka's Selector: 'Failed authentication with /<ip> (channelId=…) (SSL handshake failed)'
    at INFO, no traceback — for a client without the certificate ssl.client.auth=required asks for,
    and for a plaintext client on the TLS port."""
    configs = _tls_configs(
        pki,
        **{
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki / "ca.pem"),
            "ssl.client.auth": "required",
        },
    )
    with (
        caplog.at_level(logging.DEBUG, logger="kafkalog.broker.socket_server"),
        Broker(tmp_path / "data", configs=configs) as broker,
    ):
        context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        with socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT_S) as raw:
            try:
                with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    tls.sendall(API_VERSIONS_V0)
                    assert tls.recv(4096) == b""
            except (ssl.SSLError, ConnectionError):
                pass
        with socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT_S) as sock:
            sock.sendall(API_VERSIONS_V0)
            while sock.recv(4096):  # bounded by the socket timeout
                pass
        deadline = time.monotonic() + TIMEOUT_S
        failed: list[logging.LogRecord] = []
        while len(failed) < 2 and time.monotonic() < deadline:
            failed = [r for r in caplog.records if "Failed authentication" in r.getMessage()]
            time.sleep(0.05)
    assert len(failed) == 2, [r.getMessage() for r in caplog.records]
    for record in failed:
        assert record.levelno == logging.INFO and record.exc_info is None
        assert re.fullmatch(
            r"Failed authentication with /127\.0\.0\.1 \(channelId=127\.0\.0\.1:\d+-\d+\) "
            r"\(SSL handshake failed\)",
            record.getMessage(),
        )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name == "asyncio"]


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"ssl.keystore.password": "x"}, "SSL key store password cannot be specified with PEM format"),
        (
            {"ssl.keystore.key": "k", "ssl.keystore.certificate.chain": "c"},
            r"Both SSL key store location and separate private key are specified\.",
        ),
        (
            {"ssl.keystore.location": "", "ssl.keystore.key": "k"},
            r"SSL private key is specified, but certificate chain is not specified\.",
        ),
        (
            {"ssl.keystore.location": "", "ssl.keystore.certificate.chain": "c"},
            "SSL certificate chain is specified, but private key is not specified",
        ),
        (
            {"ssl.keystore.type": "PKCS12", "ssl.keystore.password": None},
            r"SSL key store is specified, but key store password is not specified\.",
        ),
        (
            {"ssl.truststore.certificates": "c"},
            r"SSL trust store certs can be specified only for PEM, but trust store type is JKS\.",
        ),
        (
            {
                "ssl.truststore.type": "PEM",
                "ssl.truststore.certificates": "c",
                "ssl.truststore.location": "ca",
            },
            r"Both SSL trust store location and separate trust certificates are specified\.",
        ),
        (
            {"ssl.truststore.type": "PEM", "ssl.truststore.location": "ca", "ssl.truststore.password": "x"},
            r"SSL trust store password cannot be specified for PEM format\.",
        ),
        ({"ssl.protocol": "bogus"}, "bogus SSLContext not available"),
        (
            {"ssl.client.auth": "REQUIRED"},
            "Invalid value REQUIRED for configuration ssl.client.auth: String must be one of: required, "
            "requested, none",
        ),
    ],
)
def test_kafkas_keystore_and_truststore_checks(pki, extra, message):
    configs = {k: v for k, v in _tls_configs(pki, **extra).items() if v is not None}
    with pytest.raises(InvalidConfigError, match=message):
        server_ssl_context(KafkaConfig.from_props(configs))


def test_ssl_protocol_names_the_jdk_knows_are_accepted(pki):
    for protocol in ("TLSv1.2", "TLS", "tlsv1.3"):
        server_ssl_context(KafkaConfig.from_props(_tls_configs(pki, **{"ssl.protocol": protocol})))


@pytest.mark.parametrize(
    "suites, version, cipher",
    [
        # Kafka's form: IANA names; TLS 1.2 suites only, so TLS 1.3 is not negotiated
        ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256"),
        (
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, TLS_AES_256_GCM_SHA384",
            "TLSv1.3",
            "TLS_AES_256_GCM_SHA384",
        ),
        # TLS 1.3 suites only: TLS 1.2 is not negotiated (below)
        ("TLS_AES_128_GCM_SHA256", "TLSv1.3", None),
        ("ECDHE-ECDSA-AES256-GCM-SHA384", "TLSv1.3", None),  # an OpenSSL name, as before
    ],
)
def test_cipher_suites_by_iana_name(pki, tmp_path, suites, version, cipher):
    configs = _tls_configs(pki, **{"ssl.cipher.suites": suites})
    with Broker(tmp_path / "data", configs=configs) as broker:
        context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        if cipher is not None and version == "TLSv1.3":
            context.minimum_version = ssl.TLSVersion.TLSv1_3
            # a client offering only the one suite: the server must have it
            context.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")
        with (
            socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT_S) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            assert tls.version() == version
            if cipher is not None:
                assert tls.cipher()[0] == cipher


def test_unknown_iana_cipher_suite_is_refused(pki):
    with pytest.raises(InvalidConfigError, match="Unsupported CipherSuite: TLS_FOO_WITH_BAR"):
        server_ssl_context(
            KafkaConfig.from_props(_tls_configs(pki, **{"ssl.cipher.suites": "TLS_FOO_WITH_BAR"}))
        )


def test_only_tls13_suites_refuse_a_tls12_client(pki, tmp_path):
    configs = _tls_configs(pki, **{"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"})
    with Broker(tmp_path / "data", configs=configs) as broker:
        context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        with (
            socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT_S) as raw,
            pytest.raises(ssl.SSLError),
        ):
            context.wrap_socket(raw, server_hostname="127.0.0.1")
