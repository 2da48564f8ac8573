"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512: the exchange checked against RFC 7677's example, Kafka's
failure messages, the credential store's AlterUserScramCredentials / DescribeUserScramCredentials
rules, and real clients logging in with users made by ``kafkalog scram-users`` and by
confluent-kafka's admin API — kept across a restart, gone once deleted."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kio.schema.errors import ErrorCode

from kafkalog.broker import scram_sasl_server
from kafkalog.broker.embedded import Broker
from kafkalog.broker.scram import MECHANISMS, credential_from_password, salted_password
from kafkalog.broker.scram_credential_store import (
    SCRAM_CREDENTIALS_FILE,
    ScramCredentialStore,
    ScramDeletion,
    ScramUpsertion,
)
from kafkalog.broker.scram_sasl_server import ScramSaslServer
from kafkalog.errors import InvalidConfigError, SaslAuthenticationError
from tests.broker import _raw

TIMEOUT_S = 20
SHA256 = MECHANISMS["SCRAM-SHA-256"]
SHA512 = MECHANISMS["SCRAM-SHA-512"]
CONFIGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
}
GENERIC_FAILURE = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism "
)


# -- the exchange ----------------------------------------------------------------------------------


def test_rfc_7677_example(monkeypatch):
    """RFC 7677 §3's SCRAM-SHA-256 conversation, byte for byte (user "user", password "pencil")."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = credential_from_password(SHA256, "pencil", 4096, salt)
    monkeypatch.setattr(scram_sasl_server, "_server_nonce", lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server = ScramSaslServer(SHA256, lambda user, m: credential if (user, m) == ("user", SHA256) else None)
    first = server.evaluate_response(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert not server.complete
    final = server.evaluate_response(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


def _client_final(mechanism, password: str, client_first_bare: str, server_first: bytes, gs2=b"n,,") -> bytes:
    """What a client sends second (RFC 5802 §3), computed here from the password."""
    fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
    salted = salted_password(mechanism, password, base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = mechanism.hmac(salted, b"Client Key")
    without_proof = f"c={base64.b64encode(gs2).decode()},r={fields['r']}"
    auth = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    signature = mechanism.hmac(mechanism.hash(client_key), auth)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize("mechanism", [SHA256, SHA512], ids=lambda m: m.name)
def test_a_login_and_the_ways_it_fails(mechanism):
    users = {"al=ice,x": credential_from_password(mechanism, "secret", 4096)}

    def server():
        return ScramSaslServer(mechanism, lambda user, m: users.get(user) if m == mechanism else None)

    # A name with ',' and '=' travels escaped (=2C, =3D); a reserved extension is not in AuthMessage.
    ok = server()
    first = ok.evaluate_response(b"n,,n=al=3Dice=2Cx,r=abc")
    ok.evaluate_response(_client_final(mechanism, "secret", "n=al=3Dice=2Cx,r=abc", first))
    assert ok.complete and ok.authorization_id == "al=ice,x"

    wrong = server()
    first = wrong.evaluate_response(b"n,,n=al=3Dice=2Cx,r=abc")
    with pytest.raises(SaslAuthenticationError) as failed:
        wrong.evaluate_response(_client_final(mechanism, "guess", "n=al=3Dice=2Cx,r=abc", first))
    assert str(failed.value) == GENERIC_FAILURE + mechanism.name
    # An unknown user, channel binding, a malformed message, a delegation token: the same answer,
    # so a client cannot tell which users exist.
    for message in [
        b"n,,n=nobody,r=abc",
        b"y,,n=al=3Dice=2Cx,r=abc",
        b"p=tls-unique,,n=al=3Dice=2Cx,r=abc",
        b"n,,n=al=ice,r=abc",
        b"n,,n=al=3Dice=2Cx,r=abc,tokenauth=true",
        b"garbage",
        "n,,n=\u00e9,r=abc".encode(),
    ]:
        with pytest.raises(SaslAuthenticationError, match=GENERIC_FAILURE + mechanism.name):
            server().evaluate_response(message)
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different from username"):
        server().evaluate_response(b"n,a=bob,n=al=3Dice=2Cx,r=abc")
    # The final message must carry the server's nonce.
    forged = server()
    first = forged.evaluate_response(b"n,,n=al=3Dice=2Cx,r=abc")
    with pytest.raises(SaslAuthenticationError):
        forged.evaluate_response(
            _client_final(mechanism, "secret", "n=al=3Dice=2Cx,r=abc", first).replace(b"r=abc", b"r=abd")
        )
    # A credential with fewer iterations than the mechanism's minimum never logs in.
    weak = ScramSaslServer(mechanism, lambda user, m: credential_from_password(mechanism, "secret", 1024))
    with pytest.raises(SaslAuthenticationError):
        weak.evaluate_response(b"n,,n=any,r=abc")


# -- the credential store (Kafka's ScramControlManager and ScramImage) --------------------------------


PASSWORD = "a-password-never-written"


def _upsert(name, mechanism=SHA256, iterations=4096, password=PASSWORD):
    salt = os.urandom(16)
    return ScramUpsertion(
        name, mechanism.type, iterations, salt, salted_password(mechanism, password, salt, 4096)
    )


def test_store_rules_persistence_and_file(tmp_path):
    store = ScramCredentialStore.load(tmp_path)
    kept = [_upsert("alice"), _upsert("bob", SHA512, 8192)]
    results = store.alter(
        [ScramDeletion("ghost", 1), ScramDeletion("", 1), ScramDeletion("x", 9)],
        [
            *kept,
            _upsert("twice"),
            _upsert("twice", SHA512),
            _upsert("few", iterations=4095),
            _upsert("many", iterations=16385),
        ],
    )
    by_user = {r.user: (r.error, r.message) for r in results}
    assert by_user == {
        "alice": (ErrorCode.none, None),
        "bob": (ErrorCode.none, None),
        "ghost": (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
        "x": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "twice": (
            ErrorCode.duplicate_resource,
            "A user credential cannot be altered twice in the same request",
        ),
        "few": (ErrorCode.unacceptable_credential, "Too few iterations"),
        "many": (ErrorCode.unacceptable_credential, "Too many iterations"),
    }
    path = tmp_path / SCRAM_CREDENTIALS_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    # neither the password nor the salted password is kept (in any spelling the file could use)
    text = path.read_text()
    assert PASSWORD not in text
    for upsertion in kept:
        salted = upsertion.salted_password
        assert salted.hex() not in text and base64.b64encode(salted).decode() not in text

    again = ScramCredentialStore.load(tmp_path)  # a restart
    assert again.credential("alice", SHA256) == store.credential("alice", SHA256) is not None
    assert again.credential("alice", SHA512) is None
    described = {r.user: (r.credentials, r.error) for r in again.describe(None)}
    assert described == {"alice": (((1, 4096),), ErrorCode.none), "bob": (((2, 8192),), ErrorCode.none)}
    described = {r.user: (r.error, r.message) for r in again.describe(["bob", "bob", "carol"])}
    assert described == {
        "bob": (
            ErrorCode.duplicate_resource,
            "Cannot describe SCRAM credentials for the same user twice in a single request: bob",
        ),
        "carol": (
            ErrorCode.resource_not_found,
            "Attempt to describe a user credential that does not exist: carol",
        ),
    }
    assert [(r.user, r.error) for r in again.alter([ScramDeletion("alice", 1)], [])] == [
        ("alice", ErrorCode.none)
    ]
    assert ScramCredentialStore.load(tmp_path).users() == ["bob"]

    path.write_text('{"users": {"bob": {"SCRAM-SHA-256": {"salt": "!!"}}}}')
    with pytest.raises(InvalidConfigError, match=SCRAM_CREDENTIALS_FILE):
        ScramCredentialStore.load(tmp_path)


# -- real clients --------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkalog.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _kafka_python_round_trip(
    bootstrap: str, mechanism: str, user: str, password: str, topic: str
) -> list[bytes]:
    auth = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    producer = KafkaProducer(bootstrap_servers=bootstrap, **auth)
    for i in range(50):
        producer.send(topic, b"%d" % i, partition=0)
    producer.flush(TIMEOUT_S)
    producer.close(TIMEOUT_S)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, consumer_timeout_ms=5000, auto_offset_reset="earliest", **auth
    )
    consumer.assign([TopicPartition(topic, 0)])
    values = [r.value for r in consumer]
    consumer.close()
    return values


def _ck_login_error(bootstrap: str, mechanism: str, user: str, password: str) -> ck.KafkaError | None:
    """None once a confluent-kafka client has logged in and read metadata, else its auth error."""
    errors: list[ck.KafkaError] = []
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "error_cb": errors.append,
        }
    )
    try:
        admin.list_topics(timeout=5)
        return None
    except ck.KafkaException:
        deadline = time.monotonic() + TIMEOUT_S
        while not errors and time.monotonic() < deadline:
            admin.poll(0.2)
        return errors[0] if errors else None


def test_clients_log_in_with_users_from_the_cli_and_the_admin_api(tmp_path):
    data = tmp_path / "data"
    made = _cli(
        "scram-users",
        "add",
        "--data-dir",
        str(data),
        "SCRAM-SHA-256=[name=alice,password=alice-secret]",
        'SCRAM-SHA-512=[name=alice,password="a,b",iterations=8192]',
    )
    assert made.returncode == 0, made.stderr
    listed = _cli("scram-users", "list", "--data-dir", str(data))
    assert listed.stdout == "alice: SCRAM-SHA-256 (iterations 4096), SCRAM-SHA-512 (iterations 8192)\n"
    assert (
        "Too few iterations"
        in _cli(
            "scram-users", "add", "--data-dir", str(data), "SCRAM-SHA-256=[name=bob,password=x,iterations=10]"
        ).stderr
    )

    with Broker(data, configs=CONFIGS) as broker:
        sasl = f"127.0.0.1:{broker.server.bound_ports['SASL_PLAINTEXT']}"
        # The broker holds the directory: the CLI refuses, the admin API is the way now.
        busy = _cli("scram-users", "add", "--data-dir", str(data), "SCRAM-SHA-256=[name=x,password=y]")
        assert busy.returncode == 1 and "lock" in busy.stderr.lower()

        assert _kafka_python_round_trip(sasl, "SCRAM-SHA-256", "alice", "alice-secret", "kp") == [
            b"%d" % i for i in range(50)
        ]

        async def aio() -> bytes:
            from aiokafka import AIOKafkaConsumer

            consumer = AIOKafkaConsumer(
                bootstrap_servers=sasl,
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="SCRAM-SHA-512",
                sasl_plain_username="alice",
                sasl_plain_password="a,b",
                auto_offset_reset="earliest",
            )
            await consumer.start()
            try:
                consumer.assign([TopicPartition("kp", 0)])
                return (await asyncio.wait_for(consumer.getone(), TIMEOUT_S)).value
            finally:
                await consumer.stop()

        assert asyncio.run(aio()) == b"0"

        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        futures = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bob-pw"
                )
            ]
        )
        assert [f.result(TIMEOUT_S) for f in futures.values()] == [None]
        described = admin.describe_user_scram_credentials().result(TIMEOUT_S)
        assert {
            user: sorted((i.mechanism, i.iterations) for i in d.scram_credential_infos)
            for user, d in described.items()
        } == {
            "alice": [(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)],
            "bob": [(ScramMechanism.SCRAM_SHA_512, 4096)],
        }
        assert _ck_login_error(sasl, "SCRAM-SHA-512", "bob", "bob-pw") is None
        wrong = _ck_login_error(sasl, "SCRAM-SHA-512", "bob", "nope")
        assert wrong is not None and wrong.code() == ck.KafkaError._AUTHENTICATION
        assert GENERIC_FAILURE + "SCRAM-SHA-512" in wrong.str()
        # bob has no SHA-256 credential: the same failure, for that mechanism.
        assert _ck_login_error(sasl, "SCRAM-SHA-256", "bob", "bob-pw") is not None

    with Broker(data, configs=CONFIGS) as broker:  # a restart keeps the users
        sasl = f"127.0.0.1:{broker.server.bound_ports['SASL_PLAINTEXT']}"
        assert _ck_login_error(sasl, "SCRAM-SHA-512", "bob", "bob-pw") is None
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        futures = admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)]
        )
        assert [f.result(TIMEOUT_S) for f in futures.values()] == [None]
        assert _ck_login_error(sasl, "SCRAM-SHA-512", "bob", "bob-pw") is not None
        missing = admin.describe_user_scram_credentials(["bob"])
        with pytest.raises(ck.KafkaException, match="does not exist"):
            missing["bob"].result(TIMEOUT_S)
    assert json.loads((data / SCRAM_CREDENTIALS_FILE).read_text())["users"].keys() == {"alice"}


def test_the_exchange_on_the_wire(tmp_path):
    with Broker(tmp_path, configs=CONFIGS) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        futures = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "u", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw"
                )
            ]
        )
        assert [f.result(TIMEOUT_S) for f in futures.values()] == [None]
        port = broker.server.bound_ports["SASL_PLAINTEXT"]
        handshake_cls, _ = _raw.request_class(17, 1)
        authenticate_cls, _ = _raw.request_class(36, 2)
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
            handshake = _raw.request(sock, handshake_cls(mechanism="SCRAM-SHA-256"))
            assert (handshake.error_code, handshake.mechanisms) == (
                ErrorCode.none,
                ("SCRAM-SHA-256", "SCRAM-SHA-512"),
            )
            first = _raw.request(sock, authenticate_cls(auth_bytes=b"n,,n=u,r=nonce"), correlation_id=2)
            assert first.error_code == ErrorCode.none and first.auth_bytes.startswith(b"r=nonce")
            final = _client_final(SHA256, "pw", "n=u,r=nonce", first.auth_bytes)
            done = _raw.request(sock, authenticate_cls(auth_bytes=final), correlation_id=3)
            assert done.error_code == ErrorCode.none and done.auth_bytes.startswith(b"v=")
            # the server's signature proves it knew the credential
            salt = base64.b64decode(dict(f.split("=", 1) for f in first.auth_bytes.decode().split(","))["s"])
            server_key = SHA256.hmac(salted_password(SHA256, "pw", salt, 4096), b"Server Key")
            auth_message = b"n=u,r=nonce," + first.auth_bytes + b"," + final.rsplit(b",p=", 1)[0]
            assert done.auth_bytes == b"v=" + base64.b64encode(SHA256.hmac(server_key, auth_message))
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
            assert (
                _raw.request(sock, handshake_cls(mechanism="PLAIN")).error_code
                == ErrorCode.unsupported_sasl_mechanism
            )
            assert _raw.is_closed(sock)
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
            _raw.request(sock, handshake_cls(mechanism="SCRAM-SHA-256"))
            failed = _raw.request(sock, authenticate_cls(auth_bytes=b"n,,n=ghost,r=x"), correlation_id=2)
            assert (failed.error_code, failed.error_message) == (
                ErrorCode.sasl_authentication_failed,
                GENERIC_FAILURE + "SCRAM-SHA-256",
            )
            assert _raw.is_closed(sock)
