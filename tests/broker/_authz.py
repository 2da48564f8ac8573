"""Shared by the authorizer tests: a broker with ``StandardAuthorizer``, a PLAINTEXT listener (whose
clients are ``User:ANONYMOUS``) and a SASL_PLAINTEXT one with PLAIN users ``admin`` (a super user),
``alice`` and ``bob`` (password ``<name>-secret``); ACLs made through the authorizer itself; clients'
configs per user; a raw socket logged in as a user; the short names the tests write ACLs with."""

from __future__ import annotations

import datetime
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, AclPermissionType, PatternType, ResourceType, StandardAcl
from kafkalog.broker.auth_helper import authorizer
from kafkalog.broker.embedded import Broker
from kafkalog.broker.request import build, nested_type
from tests.broker import _raw

TIMEOUT_S = 20
SECOND = datetime.timedelta(seconds=1)
USERS = ("admin", "alice", "bob")
ALICE, BOB = "User:alice", "User:bob"
# Short names for the ACLs the tests grant: acl(T, "orders", ALICE, Op.READ, DENY)
T, G, C, TX = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
Op = AclOperation
DENY = AclPermissionType.DENY
PREFIXED = PatternType.PREFIXED
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{u}-secret"' for u in USERS)
    + ";"
)
CONFIGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "group.initial.rebalance.delay.ms": "0",
}


@contextmanager
def authorizing_broker(data_dir: Path, **configs: Any) -> Iterator[Broker]:
    with Broker(data_dir, configs={**CONFIGS, **configs}) as broker:
        yield broker


def sasl_bootstrap(broker: Broker) -> str:
    return f"127.0.0.1:{broker.server.bound_ports['SASL_PLAINTEXT']}"


def acl(
    resource_type: ResourceType,
    name: str,
    principal: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
    host: str = "*",
) -> StandardAcl:
    return StandardAcl(resource_type, name, pattern, principal, host, operation, permission)


def grant(broker: Broker, *acls: StandardAcl) -> None:
    """Add ACLs through the broker's authorizer (as CreateAcls would)."""
    auth = authorizer(broker.server.apis)
    assert auth is not None

    async def create() -> list[Any]:  # on the broker's loop, between requests
        return auth.create_acls(acls)

    results = broker.run_coroutine(create())
    assert all(r.error == ErrorCode.none for r in results), results


def kafka_python_config(broker: Broker, user: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": sasl_bootstrap(broker),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": f"{user}-secret",
    }


def confluent_config(broker: Broker, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": sasl_bootstrap(broker),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


@contextmanager
def sasl_socket(broker: Broker, user: str) -> Iterator[socket.socket]:
    """A raw connection to the SASL listener, logged in as ``user`` (PLAIN)."""
    port = broker.server.bound_ports["SASL_PLAINTEXT"]
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        handshake_cls, _ = _raw.request_class(17, 1)
        assert _raw.request(sock, handshake_cls(mechanism="PLAIN")).error_code == ErrorCode.none
        authenticate_cls, _ = _raw.request_class(36, 2)
        token = f"\0{user}\0{user}-secret".encode()
        assert _raw.request(sock, authenticate_cls(auth_bytes=token), correlation_id=2).error_code == 0
        yield sock


def req(api_key: int, version: int, **fields: Any) -> Any:
    """A request body of kio's class for the API and version."""
    cls, _ = _raw.request_class(api_key, version)
    return build(cls, **fields)


def nested(api_key: int, version: int, struct: str, /, **fields: Any) -> Any:
    """One of a request's nested structs."""
    cls, _ = _raw.request_class(api_key, version)
    return build(nested_type(cls, struct), **fields)


def call(broker: Broker, user: str, *requests: Any) -> list[Any]:
    """Each request's response, on one connection logged in as ``user``."""
    with sasl_socket(broker, user) as sock:
        return [_raw.request(sock, r, correlation_id=10 + i) for i, r in enumerate(requests)]


def has_topic(broker: Broker, topic: str) -> bool:
    return bool(broker.server.log_manager.has_topic(topic))


def topic_id(broker: Broker, topic: str) -> uuid.UUID:
    return uuid.UUID(bytes=broker.server.log_manager.topic_id(topic).bytes)
