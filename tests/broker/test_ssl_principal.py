"""The principal of an SSL connection, as Kafka's ``DefaultKafkaPrincipalBuilder`` builds it: the
client certificate's subject as Java's ``X500Principal.getName()`` writes it, through
``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``) — checked with confluent-kafka
against StandardAuthorizer's ``super.users`` over real mutual TLS."""

from __future__ import annotations

import datetime
import logging
import time

import confluent_kafka as ck
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID, ObjectIdentifier

from kafkalog.broker.config import KafkaConfig
from kafkalog.broker.embedded import Broker
from kafkalog.broker.ssl_factory import ssl_principal_mapper, x500_name
from kafkalog.broker.ssl_principal_mapper import SslPrincipalMapper
from kafkalog.errors import InvalidConfigError, SslPrincipalMappingError
from tests.broker._pki import make_client_cert, make_pki

A = x509.NameAttribute
EMAIL_DN = "1.2.840.113549.1.9.1=#1611616c696365406578616d706c652e636f6d,CN=alice,O=Example"


def _der(subject: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER)


# Each expected string is what JDK 17's X500Principal.getName() prints for the certificate's subject
# (checked with Java: CertificateFactory, getSubjectX500Principal().getName()).
@pytest.mark.parametrize(
    "attributes, java",
    [
        ([A(NameOID.ORGANIZATION_NAME, "Example"), A(NameOID.COMMON_NAME, "client")], "CN=client,O=Example"),
        (
            [
                A(NameOID.ORGANIZATION_NAME, "Example"),
                A(NameOID.COMMON_NAME, "alice"),
                A(NameOID.EMAIL_ADDRESS, "alice@example.com"),
            ],
            EMAIL_DN,
        ),
        (
            [
                A(NameOID.ORGANIZATION_NAME, 'Doe, John+Co <x>; "q" a=b'),
                A(NameOID.COMMON_NAME, "  two#lead  "),
                A(NameOID.ORGANIZATIONAL_UNIT_NAME, "#hash\\back"),
            ],
            r"OU=\#hash\\back,CN=\ \ two\#lead\ \ ,O=Doe\, John\+Co \<x\>\; \"q\" a\=b",
        ),
        (
            [
                A(NameOID.COUNTRY_NAME, "US"),
                A(NameOID.STATE_OR_PROVINCE_NAME, "CA"),
                A(NameOID.SERIAL_NUMBER, "1234"),
                A(NameOID.TITLE, "eng"),
                A(NameOID.GIVEN_NAME, "Ann"),
                A(NameOID.SURNAME, "Lee"),
                A(NameOID.DOMAIN_COMPONENT, "example"),
                A(NameOID.COMMON_NAME, "ann"),
            ],
            "CN=ann,DC=example,2.5.4.4=#0c034c6565,2.5.4.42=#0c03416e6e,2.5.4.12=#0c03656e67,"
            "2.5.4.5=#130431323334,ST=CA,C=US",
        ),
        (
            [
                A(NameOID.DOMAIN_COMPONENT, "com"),
                A(NameOID.STREET_ADDRESS, "1 Main St"),
                A(NameOID.LOCALITY_NAME, "L"),
                A(NameOID.USER_ID, "u1"),
            ],
            "UID=u1,L=L,STREET=1 Main St,DC=com",
        ),
        ([A(NameOID.ORGANIZATION_NAME, "Zürich AG"), A(NameOID.COMMON_NAME, "José")], "CN=José,O=Zürich AG"),
        (
            [A(NameOID.COMMON_NAME, "bmp user", _type=_ASN1Type.BMPString)],
            r"CN=\00b\00m\00p\00 \00u\00s\00e\00r",
        ),
        # Not a string type Java writes as text: the DER value in hex, even for CN and O.
        (
            [
                A(NameOID.COMMON_NAME, "123", _type=_ASN1Type.NumericString),
                A(NameOID.ORGANIZATION_NAME, "vis", _type=_ASN1Type.VisibleString),
            ],
            "O=#1a03766973,CN=#1203313233",
        ),
        (
            [A(NameOID.COMMON_NAME, "uni", _type=_ASN1Type.UniversalString)],
            "CN=#1c0c000000750000006e00000069",
        ),
        (
            [
                A(NameOID.COMMON_NAME, "   "),
                A(NameOID.ORGANIZATIONAL_UNIT_NAME, "a\rb\r"),
                A(NameOID.ORGANIZATION_NAME, "x\0y"),
            ],
            "O=x\\00y,OU=a\rb\\\r,CN=\\ \\ \\ ",
        ),
        (
            [
                A(ObjectIdentifier("1.2.3.4.5"), "private"),
                A(ObjectIdentifier("2.999.1"), "big"),
                A(NameOID.COMMON_NAME, "ünï*_@!"),
            ],
            "CN=ünï*_@!,2.999.1=#0c03626967,1.2.3.4.5=#0c0770726976617465",
        ),
        (
            [
                A(NameOID.X500_UNIQUE_IDENTIFIER, b"\x01\x02", _type=_ASN1Type.BitString),
                A(NameOID.COMMON_NAME, "u"),
            ],
            "CN=u,2.5.4.45=#03020102",
        ),
        (
            [
                A(NameOID.COMMON_NAME, "+lead"),
                A(NameOID.ORGANIZATION_NAME, "trail+"),
                A(NameOID.ORGANIZATIONAL_UNIT_NAME, "=x="),
            ],
            r"OU=\=x\=,O=trail\+,CN=\+lead",
        ),
    ],
)
def test_subject_is_javas_x500_principal_name(attributes, java):
    assert x500_name(_der(x509.Name(attributes))) == java


def test_multi_valued_rdn_in_encoded_order():
    subject = x509.Name(
        [
            x509.RelativeDistinguishedName([A(NameOID.ORGANIZATION_NAME, "Example")]),
            x509.RelativeDistinguishedName(
                [
                    A(NameOID.COMMON_NAME, "bob"),
                    A(NameOID.USER_ID, "b42"),
                    A(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
                ]
            ),
        ]
    )
    assert x500_name(_der(subject)) == "CN=bob+OU=eng+UID=b42,O=Example"  # JDK 17's getName()


@pytest.mark.parametrize(
    "rules, dn, name",
    [
        ("DEFAULT", "CN=client,O=Example", "CN=client,O=Example"),
        ("RULE:^CN=(.*?),O=(.*)$/$1@$2/", "CN=Client,O=Example", "Client@Example"),
        ("RULE:^CN=(.*?),O=(.*)$/$1@$2/L", "CN=Client,O=Example", "client@example"),
        ("RULE:^CN=(.*?),O=(.*)$/$1@$2/U", "CN=Client,O=Example", "CLIENT@EXAMPLE"),
        # the whole DN must match; the first rule that does wins
        ("RULE:^CN=(.*?),OU=.*$/$1/,DEFAULT", "CN=client,O=Example", "CN=client,O=Example"),
        (" RULE:CN=(\\w+),.*/$1/ ,  DEFAULT ", "CN=client,O=Example", "client"),
        # a group the pattern does not have stays literal ($3), $12 with 2 groups is $1 and "2"
        ("RULE:CN=(.*?),O=(.*)/$1-$3/", "CN=a,O=b", "a-$3"),
        ("RULE:CN=(.*?),O=(.*)/$12/", "CN=a,O=b", "a2"),
        # an escaped '/' in the pattern and replacement; a group that did not take part adds nothing
        ("RULE:CN=(.*)|OU=x\\/(.*)/<$1$2\\/>/", "OU=x/y", "<y/>"),
        # String.replaceAll: every match is replaced, the empty one at the end too
        ("RULE:(.*)/[$1]/", "CN=a", "[CN=a][]"),
        ("RULE:CN=(?<who>[a-z]+),O=.*/${who}/", "CN=bob,O=Example", "bob"),
    ],
)
def test_mapping_rules(rules, dn, name):
    assert SslPrincipalMapper(rules).get_name(dn) == name


def test_no_matching_rule_and_replacements_java_rejects():
    with pytest.raises(SslPrincipalMappingError, match=r"No rules apply to CN=x, rules \[RULE:\^CN=y\$/z\]"):
        SslPrincipalMapper("RULE:^CN=y$/z/").get_name("CN=x")
    with pytest.raises(SslPrincipalMappingError, match="No rules apply"):
        SslPrincipalMapper("").get_name("CN=x")  # no rule at all: nothing maps
    with pytest.raises(SslPrincipalMappingError, match="No group 1"):  # no groups: $1 is not escaped
        SslPrincipalMapper("RULE:CN=x/$1/").get_name("CN=x")
    # Kafka's escaping puts the second backslash one place off: "$5" is then a group reference.
    with pytest.raises(SslPrincipalMappingError, match="No group 5"):
        SslPrincipalMapper("RULE:CN=(x)/$4@$5/").get_name("CN=x")


@pytest.mark.parametrize(
    "rules, message",
    [
        ("RULE:CN=(.*)/$1/Lx", r"Invalid rule: `RULE:CN=\(\.\*\)/\$1/Lx`, unmatched substring: `x`"),
        ("DEFAULT,RULE:x", r"Invalid rule: `RULE:x`, unmatched substring: `RULE:x`"),
        ("DEFAULTS", r"Invalid rule: `DEFAULTS`, unmatched substring: `S`"),
        ("RULE:CN=(.*/$1/", "pattern"),
    ],
)
def test_invalid_rules_are_a_startup_error(rules, message):
    config = KafkaConfig.from_props(
        {"listeners": "SSL://127.0.0.1:0", "listener.name.ssl.ssl.principal.mapping.rules": rules}
    )
    with pytest.raises(InvalidConfigError, match=message):
        ssl_principal_mapper(config, "SSL")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    make_client_cert(
        pki, "mixed", x509.Name([A(NameOID.ORGANIZATION_NAME, "Example"), A(NameOID.COMMON_NAME, "Client")])
    )
    make_client_cert(
        pki,
        "email",
        x509.Name(
            [
                A(NameOID.ORGANIZATION_NAME, "Example"),
                A(NameOID.COMMON_NAME, "alice"),
                A(NameOID.EMAIL_ADDRESS, "alice@example.com"),
            ]
        ),
    )
    return pki


def _tls_listeners(pki, names: list[str], **extra: str) -> dict[str, str]:
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in names),
        "listener.security.protocol.map": ",".join(f"{name}:SSL" for name in names),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki / "server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
        "ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        **extra,
    }


def _produce(pki, bootstrap: str, cert: str) -> object:
    """The delivery error of one record produced with confluent-kafka and the client certificate
    ``cert`` (None when it was written)."""
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki / "ca.pem"),
            "ssl.certificate.location": str(pki / f"{cert}.crt"),
            "ssl.key.location": str(pki / f"{cert}.key"),
            "message.timeout.ms": 4000,
            "log_level": 0,
        }
    )
    errors: list[object] = []
    producer.produce("t", b"v", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    return errors[0] if errors else "no delivery report"


def test_principal_mapping_per_listener_with_standard_authorizer(pki, tmp_path):
    """MAPPED maps the subject with its listener-prefixed rules (User:client, a super user); RAW
    keeps the default rules, so an emailAddress subject is Java's OID=#hex form (a super user too),
    and the mixed-case certificate, User:CN=Client,O=Example there, is not authorized."""
    configs = _tls_listeners(
        pki,
        ["MAPPED", "RAW"],
        **{
            "listener.name.mapped.ssl.principal.mapping.rules": "RULE:^CN=(.*?),O=(.*)$/$1/L,DEFAULT",
            "super.users": f"User:client;User:{EMAIL_DN}",
        },
    )
    with Broker(tmp_path / "data", configs=configs) as broker:
        ports = broker.server.bound_ports
        mapped, raw = f"127.0.0.1:{ports['MAPPED']}", f"127.0.0.1:{ports['RAW']}"
        assert _produce(pki, mapped, "mixed") is None
        assert _produce(pki, raw, "email") is None
        error = _produce(pki, raw, "mixed")
        assert isinstance(error, ck.KafkaError) and error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_no_matching_rule_closes_the_connection(pki, tmp_path, caplog):
    """Kafka fails building the principal at the connection's first request: an error logged, the
    connection closed without a response; the client never gets to produce."""
    configs = _tls_listeners(
        pki,
        ["SSL"],
        **{"ssl.principal.mapping.rules": "RULE:^CN=nobody,O=Example$/nobody/", "super.users": "User:nobody"},
    )
    with (
        caplog.at_level(logging.ERROR, logger="kafkalog.broker.socket_server"),
        Broker(tmp_path / "data", configs=configs) as broker,
    ):
        started = time.monotonic()
        error = _produce(pki, broker.bootstrap_servers, "mixed")
        assert isinstance(error, ck.KafkaError) and error.code() == ck.KafkaError._MSG_TIMED_OUT
        assert time.monotonic() - started < 15
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(
        "Failed to map name for 'CN=Client,O=Example' based on SSL principal mapping rules" in m
        and "No rules apply to CN=Client,O=Example" in m
        for m in messages
    ), messages
