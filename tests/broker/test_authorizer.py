"""The authorizer's rules (Kafka's ``StandardAuthorizer``), its ACLs through the ACL APIs of the
admin clients — kept across a restart — and who a connection is: ``User:<name>`` after SASL, the
client certificate's subject after mutual TLS, ``User:ANONYMOUS`` otherwise."""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AclBinding, AdminClient
from confluent_kafka.admin import AclBindingFilter as CkFilter
from confluent_kafka.admin import AclOperation as CkOp
from confluent_kafka.admin import AclPermissionType as CkPerm
from confluent_kafka.admin import ResourcePatternType as CkPattern
from confluent_kafka.admin import ResourceType as CkType
from kafka import KafkaProducer
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpType
from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)
from kafkalog.broker.config import KafkaConfig
from kafkalog.broker.embedded import Broker
from kafkalog.broker.standard_authorizer import ACLS_FILE, StandardAuthorizer
from kafkalog.errors import InvalidConfigError
from tests.broker import _raw
from tests.broker._authz import (
    CONFIGS,
    TIMEOUT_S,
    acl,
    authorizing_broker,
    confluent_config,
    grant,
    kafka_python_config,
    sasl_socket,
)
from tests.broker._pki import make_pki

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
Op = AclOperation
DENY = AclPermissionType.DENY
PREFIXED = PatternType.PREFIXED


def _authorizer(tmp_path, *acls: StandardAcl, allow_everyone: bool = False) -> StandardAuthorizer:
    tmp_path.mkdir(exist_ok=True)
    auth = StandardAuthorizer(tmp_path, ["User:admin"], allow_everyone)
    assert all(r.error == ErrorCode.none for r in auth.create_acls(acls))
    return auth


def test_the_rules(tmp_path):
    auth = _authorizer(
        tmp_path,
        acl(T, "orders", "User:alice", Op.READ),
        acl(T, "pay", "User:alice", Op.WRITE, pattern=PREFIXED),
        acl(T, "payroll", "User:alice", Op.WRITE, DENY),  # DENY wins over the prefixed ALLOW
        acl(T, "*", "User:bob", Op.DESCRIBE),
        acl(T, "secret", "User:*", Op.READ, DENY),
        acl(T, "secret", "User:bob", Op.READ),
        acl(G, "g", "User:alice", Op.ALL, host="10.0.0.1"),
        acl(T, "cfg", "User:alice", Op.ALTER_CONFIGS),
    )

    def may(principal, op, resource_type, name, host="127.0.0.1"):
        return auth.authorize(principal, host, op, resource_type, name)

    assert may("User:alice", Op.READ, T, "orders")
    assert may("User:alice", Op.DESCRIBE, T, "orders")  # ALLOW READ implies DESCRIBE
    assert not may("User:alice", Op.WRITE, T, "orders")
    assert may("User:alice", Op.WRITE, T, "payments") and may("User:alice", Op.WRITE, T, "pay")
    assert not may("User:alice", Op.WRITE, T, "payroll")
    assert may("User:alice", Op.DESCRIBE, T, "payroll")  # a DENY WRITE does not deny DESCRIBE
    assert not may("User:alice", Op.WRITE, T, "pa")
    assert may("User:bob", Op.DESCRIBE, T, "anything") and not may("User:bob", Op.READ, T, "anything")
    assert not may("User:bob", Op.READ, T, "secret")  # DENY for User:* beats bob's own ALLOW
    assert may("User:alice", Op.DELETE, G, "g", host="10.0.0.1")  # ALL, from that host only
    assert not may("User:alice", Op.READ, G, "g")
    assert may("User:alice", Op.DESCRIBE_CONFIGS, T, "cfg") and not may("User:alice", Op.DESCRIBE, T, "cfg")
    assert may("User:admin", Op.ALTER, C, "kafka-cluster")  # a super user
    assert not may("User:carol", Op.DESCRIBE, T, "nothing-here")  # no ACLs at all: denied by default

    lenient = _authorizer(tmp_path / "lenient", acl(T, "owned", "User:alice", Op.READ), allow_everyone=True)
    assert lenient.authorize("User:carol", "h", Op.WRITE, T, "nobody-has-acls")
    assert not lenient.authorize("User:carol", "h", Op.READ, T, "owned")  # the topic has ACLs


def test_filters_creation_checks_and_persistence(tmp_path):
    auth = _authorizer(
        tmp_path,
        acl(T, "foo", "User:alice", Op.READ),
        acl(T, "fo", "User:alice", Op.READ, pattern=PREFIXED),
        acl(T, "*", "User:alice", Op.READ),
        acl(G, "foo", "User:bob", Op.READ),
    )

    def select(resource_type, name, pattern, principal=None):
        f = AclBindingFilter(resource_type, name, pattern, principal, None, Op.ANY, AclPermissionType.ANY)
        return {(a.resource_type, a.resource_name, a.pattern_type) for a in auth.acls(f)}

    L = PatternType.LITERAL
    assert select(T, "foo", PatternType.MATCH) == {(T, "foo", L), (T, "fo", PREFIXED), (T, "*", L)}
    assert select(T, "foo", PatternType.ANY) == {(T, "foo", L)}
    assert select(T, "fo", PREFIXED) == {(T, "fo", PREFIXED)}
    assert select(ResourceType.ANY, None, PatternType.ANY, "User:bob") == {(G, "foo", L)}

    bad = [
        (acl(ResourceType.ANY, "x", "User:a", Op.READ), "Invalid resourceType ANY"),
        (acl(T, "x", "User:a", Op.READ, pattern=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl(T, "x", "User:a", Op.ANY), "Invalid operation ANY"),
        (acl(T, "x", "User:a", Op.READ, AclPermissionType.ANY), "Invalid permissionType ANY"),
        (
            acl(C, "other", "User:a", Op.ALTER),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (acl(T, "", "User:a", Op.READ), "Invalid empty resource name"),
        (acl(T, "x", "alice", Op.READ), "no colon is present"),
    ]
    results = auth.create_acls([a for a, _ in bad])
    for (_, message), result in zip(bad, results, strict=True):
        assert result.error == ErrorCode.invalid_request and message in result.message

    reloaded = StandardAuthorizer.from_config(
        KafkaConfig.from_props({"authorizer.class.name": CONFIGS["authorizer.class.name"]}), tmp_path
    )
    assert reloaded is not None and set(reloaded.acls(_everything())) == set(auth.acls(_everything()))
    deleted = auth.delete_acls(
        [AclBindingFilter(T, "foo", PatternType.MATCH, None, None, Op.ANY, AclPermissionType.ANY)]
    )
    assert len(deleted[0].acls) == 3 and [a.resource_type for a in auth.acls(_everything())] == [G]

    (tmp_path / ACLS_FILE).write_text('{"acls": [{"resource_type": "TOPIC"}]}')
    with pytest.raises(InvalidConfigError, match=ACLS_FILE):
        StandardAuthorizer.from_config(
            KafkaConfig.from_props({"authorizer.class.name": CONFIGS["authorizer.class.name"]}), tmp_path
        )


def _everything() -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )


@pytest.mark.parametrize(
    "configs, message",
    [
        ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "StandardAuthorizer only"),
        ({"authorizer.class.name": CONFIGS["authorizer.class.name"], "super.users": "admin"}, "super.users"),
        ({"authorizer.class.name": CONFIGS["authorizer.class.name"], "super.users": "User:a; "}, None),
        ({"authorizer.class.name": CONFIGS["authorizer.class.name"], "super.users": ":a;User:"}, None),
    ],
)
def test_config_mistakes(tmp_path, configs, message):
    """super.users as Kafka's parseKafkaPrincipal reads each entry: anything with a colon is taken."""
    if message is None:
        assert StandardAuthorizer.from_config(KafkaConfig.from_props(configs), tmp_path) is not None
        return
    with pytest.raises(InvalidConfigError, match=message):
        StandardAuthorizer.from_config(KafkaConfig.from_props(configs), tmp_path)


def test_acl_apis_through_the_admin_clients(tmp_path):
    with authorizing_broker(tmp_path / "data") as broker:
        admin = AdminClient(confluent_config(broker, "admin"))
        bindings = [
            AclBinding(CkType.TOPIC, "t", CkPattern.LITERAL, "User:alice", "*", CkOp.READ, CkPerm.ALLOW),
            AclBinding(CkType.GROUP, "g-", CkPattern.PREFIXED, "User:alice", "*", CkOp.ALL, CkPerm.ALLOW),
        ]
        assert [f.result(TIMEOUT_S) for f in admin.create_acls(bindings).values()] == [None, None]
        everything = CkFilter(CkType.ANY, None, CkPattern.ANY, None, None, CkOp.ANY, CkPerm.ANY)
        assert sorted(map(str, admin.describe_acls(everything).result(TIMEOUT_S))) == sorted(
            map(str, bindings)
        )

        # kafka-python's admin sees and adds them too
        kp = KafkaAdminClient(**kafka_python_config(broker, "admin"))
        try:
            acls, error = kp.describe_acls(
                ACLFilter(
                    principal="User:alice",
                    host=None,
                    operation=ACLOperation.ANY,
                    permission_type=ACLPermissionType.ANY,
                    resource_pattern=ResourcePatternFilter(KpType.GROUP, None, ACLResourcePatternType.ANY),
                )
            )
            assert error.errno == 0
            assert [(a.resource_pattern.resource_name, a.operation) for a in acls] == [
                ("g-", ACLOperation.ALL)
            ]
            created = kp.create_acls(
                [
                    ACL(
                        "User:bob",
                        "*",
                        ACLOperation.WRITE,
                        ACLPermissionType.ALLOW,
                        ResourcePattern(KpType.TOPIC, "t"),
                    )
                ]
            )
            assert created["failed"] == [] and len(created["succeeded"]) == 1
        finally:
            kp.close()

        # alice holds no cluster ACL: describing and changing ACLs is CLUSTER_AUTHORIZATION_FAILED
        with sasl_socket(broker, "alice") as sock:
            cls, _ = _raw.request_class(29, 3)
            described = _raw.request(
                sock,
                cls(
                    resource_type_filter=1,
                    resource_name_filter=None,
                    pattern_type_filter=1,
                    principal_filter=None,
                    host_filter=None,
                    operation=1,
                    permission_type=1,
                ),
                correlation_id=3,
            )
            assert (
                described.error_code == ErrorCode.cluster_authorization_failed and described.resources == ()
            )
        alice = AdminClient(confluent_config(broker, "alice"))
        with pytest.raises(ck.KafkaException) as denied:
            alice.create_acls(bindings[:1])[bindings[0]].result(TIMEOUT_S)
        assert denied.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED

        # A creation naming ANY or MATCH fails the whole request (Kafka's bindings throw before any is
        # created): UNKNOWN_SERVER_ERROR without a message for every creation, the valid one too.
        with sasl_socket(broker, "admin") as sock:
            cls, mod = _raw.request_class(30, 3)

            def creation(resource_type=2, pattern=3, operation=3, permission=3):
                return mod.AclCreation(resource_type=resource_type, resource_name="raw",
                                       resource_pattern_type=pattern, principal="User:carol", host="*",
                                       operation=operation, permission_type=permission)

            for odd in (creation(resource_type=1), creation(pattern=2), creation(pattern=1),
                        creation(operation=1), creation(permission=1)):
                answer = _raw.request(sock, cls(creations=(odd, creation())), correlation_id=4)
                assert [(r.error_code, r.error_message) for r in answer.results] == [
                    (ErrorCode.unknown_server_error, None)] * 2
        carol = CkFilter(CkType.ANY, None, CkPattern.ANY, "User:carol", None, CkOp.ANY, CkPerm.ANY)
        assert admin.describe_acls(carol).result(TIMEOUT_S) == []

        topic_filter = CkFilter(CkType.TOPIC, "t", CkPattern.MATCH, None, None, CkOp.ANY, CkPerm.ANY)
        removed = admin.delete_acls([topic_filter])[topic_filter].result(TIMEOUT_S)
        assert sorted(b.principal for b in removed) == ["User:alice", "User:bob"]

    with Broker(tmp_path / "data", configs=CONFIGS) as broker:  # the ACLs outlive a restart
        admin = AdminClient(confluent_config(broker, "admin"))
        everything = CkFilter(CkType.ANY, None, CkPattern.ANY, None, None, CkOp.ANY, CkPerm.ANY)
        assert [str(b) for b in admin.describe_acls(everything).result(TIMEOUT_S)] == [str(bindings[1])]


def _produce_error(**config) -> str | None:
    producer = KafkaProducer(max_block_ms=10000, retries=0, **config)
    try:
        producer.send("t", b"v", partition=0).get(TIMEOUT_S)
        return None
    except Exception as e:  # kafka-python raises its own error classes
        return type(e).__name__
    finally:
        producer.close(TIMEOUT_S)


def test_principals_of_sasl_anonymous_and_mutual_tls(tmp_path):
    pki = make_pki(tmp_path / "pki")
    configs = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki / "server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
        "ssl.client.auth": "required",
    }
    with authorizing_broker(tmp_path / "data", **configs) as broker:
        ssl_port = broker.server.bound_ports["SSL"]
        tls = {
            "bootstrap_servers": f"127.0.0.1:{ssl_port}",
            "security_protocol": "SSL",
            "ssl_cafile": str(pki / "ca.pem"),
            "ssl_certfile": str(pki / "client.crt"),
            "ssl_keyfile": str(pki / "client.key"),
        }
        plaintext = {"bootstrap_servers": broker.bootstrap_servers}
        assert _produce_error(**kafka_python_config(broker, "admin")) is None  # a super user
        for config in (kafka_python_config(broker, "alice"), plaintext, tls):
            assert _produce_error(**config) == "TopicAuthorizationFailedError"
        for principal, config in [
            ("User:alice", kafka_python_config(broker, "alice")),
            ("User:ANONYMOUS", plaintext),
            ("User:CN=client,O=kafkalog tests", tls),  # the certificate's subject, RFC 2253
        ]:
            grant(broker, acl(T, "t", principal, Op.WRITE))
            assert _produce_error(**config) is None, principal
