"""SASL/PLAIN on a SASL_PLAINTEXT listener (users from the listener's JAAS config, as Kafka's
PlainServerCallbackHandler reads them): kafka-python, confluent-kafka and aiokafka authenticate,
produce and consume; a wrong password is SASL_AUTHENTICATION_FAILED and the connection closes;
requests before authentication close the connection; config mistakes are one clear error."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import confluent_kafka as ck
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kio.schema.errors import ErrorCode

from kafkalog.broker.config import KafkaConfig
from kafkalog.broker.embedded import Broker
from kafkalog.broker.plain_sasl_server import plain_users
from kafkalog.broker.sasl_authenticator import sasl_server_factories
from kafkalog.errors import InvalidConfigError
from tests.broker import _raw

TIMEOUT_S = 20
RECORDS = 2000
JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
NO_USERS_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";'
CONFIGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("sasl"), configs=CONFIGS) as b:
        yield b


def _sasl_bootstrap(broker) -> str:
    return f"127.0.0.1:{broker.server.bound_ports['SASL_PLAINTEXT']}"


def test_three_clients_authenticate_produce_and_consume(broker):
    bootstrap = _sasl_bootstrap(broker)
    auth = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
    }
    producer = KafkaProducer(bootstrap_servers=bootstrap, **auth)
    for i in range(RECORDS):
        producer.send("kp", b"%d" % i, partition=0)
    producer.flush(TIMEOUT_S)
    producer.close(TIMEOUT_S)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, consumer_timeout_ms=5000, auto_offset_reset="earliest", **auth
    )
    consumer.assign([TopicPartition("kp", 0)])
    assert [r.value for r in consumer] == [b"%d" % i for i in range(RECORDS)]
    consumer.close()

    conf = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": "admin-secret",
    }
    ck_producer = ck.Producer(conf)
    for i in range(RECORDS):
        ck_producer.produce("ck", b"%d" % i, partition=0)
    assert ck_producer.flush(TIMEOUT_S) == 0
    ck_consumer = ck.Consumer({**conf, "group.id": "sasl-group", "auto.offset.reset": "earliest"})
    ck_consumer.subscribe(["ck"])  # a consumer group over SASL: FindCoordinator, JoinGroup, SyncGroup ...
    got, deadline = 0, time.monotonic() + TIMEOUT_S
    while got < RECORDS and time.monotonic() < deadline:
        got += sum(1 for m in ck_consumer.consume(500, 1.0) if not m.error())
    ck_consumer.close()
    assert got == RECORDS

    async def aio() -> int:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        kwargs = {
            "bootstrap_servers": bootstrap,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-secret",
        }
        producer = AIOKafkaProducer(**kwargs)
        await producer.start()
        try:
            for i in range(100):
                await producer.send_and_wait("aio", b"%d" % i, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(auto_offset_reset="earliest", **kwargs)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("aio", 0)])
            batches = await consumer.getmany(timeout_ms=5000)
            return sum(len(records) for records in batches.values())
        finally:
            await consumer.stop()

    assert asyncio.run(aio()) == 100


def _request(sock, api_key, version, body: bytes, correlation_id=1) -> bytes:
    _raw.send_frame(sock, _raw.header(api_key, version, correlation_id) + body)
    return _raw.recv_frame(sock)


def _handshake(sock, mechanism: str, version=1):
    cls, _ = _raw.request_class(17, version)
    return _raw.request(sock, cls(mechanism=mechanism))


def _authenticate(sock, token: bytes, version=2):
    cls, _ = _raw.request_class(36, version)
    return _raw.request(sock, cls(auth_bytes=token), correlation_id=2)


def test_the_exchange_on_the_wire(broker):
    port = broker.server.bound_ports["SASL_PLAINTEXT"]
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        handshake = _handshake(sock, "PLAIN")
        assert (handshake.error_code, handshake.mechanisms) == (ErrorCode.none, ("PLAIN",))
        ok = _authenticate(sock, b"\0alice\0alice-secret")
        assert (ok.error_code, ok.error_message, ok.session_lifetime.total_seconds()) == (
            ErrorCode.none,
            None,
            0,
        )
        # Authenticated: the broker's APIs now answer, and another handshake is out of place.
        cls, _ = _raw.request_class(3, 12)
        metadata = _raw.request(
            sock, cls(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        )
        assert [b.port for b in metadata.brokers] == [port]  # this listener's endpoint
        assert _handshake(sock, "PLAIN").error_code == ErrorCode.illegal_sasl_state
    for token, message in [
        (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
        (b"\0nobody\0x", "Authentication failed: Invalid username or password"),
        (b"\0\0x", "Authentication failed: username not specified"),
        (
            b"bob\0alice\0alice-secret",
            "Authentication failed: Client requested an authorization id that is different from username",
        ),
    ]:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
            assert _handshake(sock, "PLAIN").error_code == ErrorCode.none
            failed = _authenticate(sock, token)
            assert (failed.error_code, failed.error_message) == (
                ErrorCode.sasl_authentication_failed,
                message,
            )
            assert _raw.is_closed(sock)
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        unsupported = _handshake(sock, "SCRAM-SHA-256")
        assert (unsupported.error_code, unsupported.mechanisms) == (
            ErrorCode.unsupported_sasl_mechanism,
            ("PLAIN",),
        )
        assert _raw.is_closed(sock)
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        # ApiVersions is answered before authentication; Metadata is not: the connection closes.
        cls, _ = _raw.request_class(18, 3)
        assert _raw.request(sock, cls(client_software_name="t", client_software_version="1")).error_code == 0
        cls, _ = _raw.request_class(3, 12)
        _raw.send_frame(
            sock,
            _raw.header(3, 12, 9)
            + _raw.encode_body(
                cls(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
            ),
        )
        assert _raw.is_closed(sock)
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        # Before authentication a request may not exceed 512 KiB (sasl.server.max.receive.size).
        sock.sendall(struct.pack(">i", 524289))
        assert _raw.is_closed(sock)
    # The PLAINTEXT listener needs no authentication, and refuses an exchange out of place.
    with _raw.connect(broker.bootstrap_servers) as sock:
        assert _handshake(sock, "PLAIN").error_code == ErrorCode.illegal_sasl_state
        assert _authenticate(sock, b"\0alice\0alice-secret").error_code == ErrorCode.illegal_sasl_state


def test_handshake_v0_exchanges_bare_tokens(broker):
    """SaslHandshake v0 (KIP-152's predecessor, clients before Kafka 1.0): the tokens then travel as
    bare size-prefixed frames, answered likewise (PLAIN: an empty frame); a failed login is not
    answered, the connection closes. On PLAINTEXT v0 is ILLEGAL_SASL_STATE like v1, and ApiVersions
    lists 0-1 as Kafka does."""
    port = broker.server.bound_ports["SASL_PLAINTEXT"]
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        assert _handshake(sock, "PLAIN", version=0).error_code == ErrorCode.none
        _raw.send_frame(sock, b"\0alice\0alice-secret")
        assert _raw.recv_frame(sock) == b""
        cls, _ = _raw.request_class(3, 12)
        metadata = _raw.request(
            sock, cls(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        )
        assert [b.port for b in metadata.brokers] == [port]
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        assert _handshake(sock, "PLAIN", version=0).error_code == ErrorCode.none
        _raw.send_frame(sock, b"\0alice\0wrong")
        assert _raw.is_closed(sock)
    with _raw.connect(broker.bootstrap_servers) as sock:
        assert _handshake(sock, "PLAIN", version=0).error_code == ErrorCode.illegal_sasl_state
        cls, _ = _raw.request_class(18, 3)
        table = _raw.request(sock, cls(client_software_name="t", client_software_version="1"))
        assert (17, 0, 1) in {(k.api_key, k.min_version, k.max_version) for k in table.api_keys}


def test_api_versions_once_before_the_handshake(broker):
    """Kafka's SaslServerAuthenticator answers ApiVersions until one succeeds, then only the
    handshake: a second ApiVersions closes the connection; one refused (a bad software name) may be
    retried."""
    port = broker.server.bound_ports["SASL_PLAINTEXT"]
    cls, _ = _raw.request_class(18, 3)
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        bad = _raw.request(sock, cls(client_software_name="", client_software_version="1"))
        assert bad.error_code == ErrorCode.invalid_request
        assert _raw.request(sock, cls(client_software_name="t", client_software_version="1")).error_code == 0
        assert _handshake(sock, "PLAIN").error_code == ErrorCode.none
        assert _authenticate(sock, b"\0alice\0alice-secret").error_code == ErrorCode.none
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        assert _raw.request(sock, cls(client_software_name="t", client_software_version="1")).error_code == 0
        _raw.send_frame(sock, _raw.header(18, 3, 5) + _raw.encode_body(
            cls(client_software_name="t", client_software_version="1")))
        assert _raw.is_closed(sock)


def test_confluent_kafka_with_a_wrong_password_gets_an_authentication_error(broker):
    errors = []
    producer = ck.Producer(
        {
            "bootstrap.servers": _sasl_bootstrap(broker),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "nope",
            "error_cb": errors.append,
        }
    )
    deadline = time.monotonic() + TIMEOUT_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == ck.KafkaError._AUTHENTICATION
    assert "Invalid username or password" in errors[0].str()


@pytest.mark.parametrize(
    "configs, message",
    [
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "it is GSSAPI"),
        (
            {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"},
            "needs its PLAIN users",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            },
            "serves the SASL mechanisms PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": NO_USERS_JAAS,
            },
            "names no user",
        ),
    ],
)
def test_config_mistakes(configs, message):
    with pytest.raises(InvalidConfigError, match=message):
        sasl_server_factories(KafkaConfig.from_props(configs), "SASL_PLAINTEXT", lambda user, mechanism: None)


def test_users_from_the_jaas_config():
    config = KafkaConfig.from_props(CONFIGS)
    assert plain_users(config, "SASL_PLAINTEXT") == {"admin": "admin-secret", "alice": "alice-secret"}
