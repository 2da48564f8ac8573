"""The TLS side of an SSL listener (Kafka's ``DefaultSslEngineFactory``, server mode): an
``ssl.SSLContext`` from Kafka's ``ssl.*`` broker configs.

Keystore (the broker's key and certificate chain), by ``ssl.keystore.type``:

* ``PEM`` (KIP-651): ``ssl.keystore.location``, a file holding the private key and the certificate
  chain (the key encrypted with ``ssl.key.password``, or not), or the same inline in
  ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``;
* ``PKCS12``: ``ssl.keystore.location`` and ``ssl.keystore.password`` (read with ``cryptography``).

Java's JKS is not readable here: convert it (``keytool -importkeystore -deststoretype PKCS12``).
Truststore (the CAs client certificates must chain to, for ``ssl.client.auth`` ``requested`` or
``required``): ``ssl.truststore.location`` / ``ssl.truststore.certificates`` in PEM, or a PKCS12
file. The combinations Kafka's ``createKeystore`` / ``createTruststore`` refuse are refused with
its messages. ``ssl.enabled.protocols`` bounds the TLS versions served, TLSv1.2 and TLSv1.3 (the
JDK's older names are accepted and, as the JDK does, never negotiated); ``ssl.cipher.suites`` takes
Kafka's IANA names (translated for OpenSSL) or OpenSSL's. Each of these may be given for one
listener, prefixed ``listener.name.<name>.``; on a SASL_SSL listener only the prefixed
``ssl.client.auth`` counts (KIP-684).
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kafkalog.broker.config import KafkaConfig
from kafkalog.broker.request import ANONYMOUS
from kafkalog.broker.ssl_principal_mapper import SslPrincipalMapper
from kafkalog.errors import InvalidConfigError, SslPrincipalMappingError
from kafkalog.storage.config_def import invalid

__all__ = ["server_ssl_context", "ssl_principal", "ssl_principal_mapper", "x500_name"]

log = logging.getLogger(__name__)

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _optional(config: KafkaConfig, name: str) -> str | None:
    value = config.values.get(name)
    return value if value else None


@contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """``data`` in a file only this user can read, for the ``ssl`` calls that take paths; removed
    at once."""
    fd, path = tempfile.mkstemp(prefix="kafkalog-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        yield path
    finally:
        os.unlink(path)


def _pkcs12_as_pem(location: str, password: str | None, what: str) -> tuple[bytes, bytes, list[bytes]]:
    """(key, certificate, CA certificates) of a PKCS12 file, as PEM."""
    try:
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
            pkcs12,
        )
    except ImportError:
        raise InvalidConfigError(
            f"{what} is PKCS12, which needs the 'cryptography' package: install it, or use PEM"
        ) from None
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(
            Path(location).read_bytes(), password.encode() if password else None
        )
    except (OSError, ValueError) as e:
        raise InvalidConfigError(f"Cannot read the PKCS12 {what} {location}: {e}") from e
    key_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) if key is not None else b""
    cert_pem = cert.public_bytes(Encoding.PEM) if cert is not None else b""
    return key_pem, cert_pem, [c.public_bytes(Encoding.PEM) for c in extra]


def _no_prompt() -> str:
    """The password callback of an encrypted key without ``ssl.key.password``: without one, OpenSSL
    would ask for the pass phrase on the terminal and wait."""
    raise _MissingKeyPassword


class _MissingKeyPassword(InvalidConfigError):
    """Raised through OpenSSL by ``_no_prompt``, caught at once by ``_load_pem_keystore``."""


def _load_pem_keystore(context: ssl.SSLContext, path: str, key_password: str | None, what: str) -> None:
    try:
        context.load_cert_chain(path, password=key_password if key_password is not None else _no_prompt)
    except _MissingKeyPassword:
        raise InvalidConfigError(
            f"{what}: Private key could not be loaded: the key is encrypted and ssl.key.password is not set"
        ) from None
    except (OSError, ssl.SSLError) as e:
        raise InvalidConfigError(f"{what}: {e}") from e


_PEM_KEYSTORE_PASSWORD = (
    "SSL key store password cannot be specified with PEM format, only key password may be specified"
)


def _load_keystore(context: ssl.SSLContext, config: KafkaConfig) -> None:
    """Kafka's ``DefaultSslEngineFactory.createKeystore`` checks, in its order and words."""
    kind = config.get_str("ssl.keystore.type").upper()
    location = _optional(config, "ssl.keystore.location")
    password = _optional(config, "ssl.keystore.password")
    key_password = _optional(config, "ssl.key.password")
    inline_key = _optional(config, "ssl.keystore.key")
    inline_chain = _optional(config, "ssl.keystore.certificate.chain")
    if inline_key is not None:
        if kind != "PEM":
            raise InvalidConfigError(
                f"SSL private key can be specified only for PEM, but key store type is {kind}."
            )
        if inline_chain is None:
            raise InvalidConfigError("SSL private key is specified, but certificate chain is not specified.")
        if location is not None:
            raise InvalidConfigError("Both SSL key store location and separate private key are specified.")
        if password is not None:
            raise InvalidConfigError(_PEM_KEYSTORE_PASSWORD + ".")
        with _private_file((inline_chain.strip() + "\n" + inline_key.strip() + "\n").encode()) as path:
            _load_pem_keystore(context, path, key_password, "Invalid PEM keystore configs")
    elif inline_chain is not None:
        raise InvalidConfigError("SSL certificate chain is specified, but private key is not specified")
    elif kind == "PEM" and location is not None:
        if password is not None:
            raise InvalidConfigError(_PEM_KEYSTORE_PASSWORD)  # Kafka's second one has no full stop
        _load_pem_keystore(context, location, key_password, f"Failed to load PEM SSL keystore {location}")
    elif location is None and password is not None:
        raise InvalidConfigError("SSL key store is not specified, but key store password is specified.")
    elif location is not None and password is None:
        raise InvalidConfigError("SSL key store is specified, but key store password is not specified.")
    elif location is not None:
        if kind != "PKCS12":
            raise InvalidConfigError(
                f"ssl.keystore.type {kind} cannot be read by kafkalog: use PEM or PKCS12 (a JKS keystore "
                "converts with keytool -importkeystore -deststoretype PKCS12)"
            )
        key, cert, chain = _pkcs12_as_pem(location, password, "keystore")
        try:
            with _private_file(cert + b"".join(chain) + key) as path:
                context.load_cert_chain(path)
        except (OSError, ssl.SSLError) as e:
            raise InvalidConfigError(f"Failed to load SSL keystore {location} of type {kind}: {e}") from e
    else:
        raise InvalidConfigError(
            "An SSL listener needs the broker's key and certificates: ssl.keystore.type=PEM with "
            "ssl.keystore.location (or ssl.keystore.key and ssl.keystore.certificate.chain), or "
            "ssl.keystore.type=PKCS12 with ssl.keystore.location and ssl.keystore.password"
        )


def _load_truststore(context: ssl.SSLContext, config: KafkaConfig) -> bool:
    """Load the CAs client certificates are checked against (Kafka's ``createTruststore`` checks);
    False when none is configured."""
    kind = config.get_str("ssl.truststore.type").upper()
    location = _optional(config, "ssl.truststore.location")
    password = _optional(config, "ssl.truststore.password")
    inline = _optional(config, "ssl.truststore.certificates")
    if inline is not None:
        if kind != "PEM":
            raise InvalidConfigError(
                f"SSL trust store certs can be specified only for PEM, but trust store type is {kind}."
            )
        if location is not None:
            raise InvalidConfigError(
                "Both SSL trust store location and separate trust certificates are specified."
            )
        if password is not None:
            raise InvalidConfigError("SSL trust store password cannot be specified for PEM format.")
    elif kind == "PEM" and location is not None and password is not None:
        raise InvalidConfigError("SSL trust store password cannot be specified for PEM format.")
    elif location is None and password is not None:
        raise InvalidConfigError("SSL trust store is not specified, but trust store password is specified.")
    try:
        if kind == "PKCS12" and location is not None:
            _, cert, chain = _pkcs12_as_pem(location, password, "truststore")
            context.load_verify_locations(cadata=(cert + b"".join(chain)).decode())
        elif location is not None:
            context.load_verify_locations(cafile=location)
        elif inline is not None:
            context.load_verify_locations(cadata=inline)
        else:
            return False
    except (OSError, ssl.SSLError, ValueError) as e:
        raise InvalidConfigError(f"Cannot load the SSL truststore: {e}") from e
    return True


# The names the JDK's SSLEngine.setEnabledProtocols accepts. TLSv1, TLSv1.1, SSLv3 and SSLv2Hello it
# accepts but never negotiates (jdk.tls.disabledAlgorithms): kafkalog serves TLSv1.2 and TLSv1.3.
_JDK_PROTOCOLS = frozenset({"SSLv2Hello", "SSLv3", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"})
# The JDK's SSLContext algorithms (ssl.protocol), compared without case as JCA does.
_JDK_SSL_CONTEXTS = frozenset(
    {"tls", "tlsv1", "tlsv1.1", "tlsv1.2", "tlsv1.3", "ssl", "sslv3", "dtls", "dtlsv1.0", "dtlsv1.2",
     "default"}
)
_CLIENT_AUTH_OPTIONS = ("required", "requested", "none")  # Kafka's order, in its error message
_SSL_CLIENT_AUTH_WARNING = (
    "Broker configuration 'ssl.client.auth' is applied only to SSL listeners. Listener-prefixed "
    "configuration can be used to enable SSL client authentication for SASL_SSL listeners."
)


def _enabled_protocols(config: KafkaConfig) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    versions = [v.strip() for v in config.get_str("ssl.enabled.protocols").split(",") if v.strip()]
    unknown = [v for v in versions if v not in _JDK_PROTOCOLS]
    if unknown:
        raise InvalidConfigError(f"ssl.enabled.protocols {versions}: Unsupported protocol {unknown[0]}")
    served = [_VERSIONS[v] for v in versions if v in _VERSIONS]
    if not served:
        raise InvalidConfigError(
            f"ssl.enabled.protocols {versions}: kafkalog serves {' and '.join(_VERSIONS)}, "
            "and neither is enabled"
        )
    return min(served), max(served)


# ssl.cipher.suites in Kafka names IANA (JSSE) suites; OpenSSL has its own names for TLS 1.2 and
# earlier ones (the suites both the JDK and OpenSSL implement, as `openssl ciphers -stdname` pairs
# them). TLS 1.3's names are the same in both, and OpenSSL cannot be told to leave one of them out
# through Python's ssl: naming any TLS 1.3 suite serves TLS 1.3 with all three.
_IANA_TO_OPENSSL = {
    "TLS_DHE_DSS_WITH_AES_128_CBC_SHA": "DHE-DSS-AES128-SHA",
    "TLS_DHE_DSS_WITH_AES_128_CBC_SHA256": "DHE-DSS-AES128-SHA256",
    "TLS_DHE_DSS_WITH_AES_128_GCM_SHA256": "DHE-DSS-AES128-GCM-SHA256",
    "TLS_DHE_DSS_WITH_AES_256_CBC_SHA": "DHE-DSS-AES256-SHA",
    "TLS_DHE_DSS_WITH_AES_256_CBC_SHA256": "DHE-DSS-AES256-SHA256",
    "TLS_DHE_DSS_WITH_AES_256_GCM_SHA384": "DHE-DSS-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
}
_TLS13_SUITES = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)


def _apply_cipher_suites(
    context: ssl.SSLContext, suites: str, versions: tuple[ssl.TLSVersion, ssl.TLSVersion]
) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """Hand ``ssl.cipher.suites`` to OpenSSL, IANA names translated (OpenSSL's own names and cipher
    strings pass as they are); the enabled TLS versions narrowed to those a named suite serves, as
    the JDK's engine then negotiates only those. Unknown IANA names fail as in the JDK."""
    names = [name.strip() for name in suites.split(",") if name.strip()]
    tls12: list[str] = []
    tls13 = iana = False
    for name in names:
        if name in _TLS13_SUITES:
            tls13 = iana = True
        elif name in _IANA_TO_OPENSSL:
            tls12.append(_IANA_TO_OPENSSL[name])
            iana = True
        elif name.startswith(("TLS_", "SSL_")):
            raise InvalidConfigError(
                f"ssl.cipher.suites {suites!r}: Unsupported CipherSuite: {name} (kafkalog serves these "
                f"IANA names: {', '.join(sorted(_IANA_TO_OPENSSL))}, {', '.join(sorted(_TLS13_SUITES))})"
            )
        else:
            tls12.append(name)  # an OpenSSL name or cipher string
    low, high = versions
    if tls12:
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError as e:
            raise InvalidConfigError(
                f"ssl.cipher.suites {suites!r} names no cipher OpenSSL knows: {e}"
            ) from e
        if iana and not tls13:  # only TLS 1.2 suites named: TLS 1.3 is not negotiated
            high = min(high, ssl.TLSVersion.TLSv1_2)
    else:
        low = max(low, ssl.TLSVersion.TLSv1_3)  # only TLS 1.3 suites named
    if low > high:
        raise InvalidConfigError(
            f"ssl.cipher.suites {suites!r} names no suite of the enabled protocols (ssl.enabled.protocols)"
        )
    return low, high


def server_ssl_context(
    config: KafkaConfig, listener_name: str | None = None, security_protocol: str = "SSL"
) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener; InvalidConfigError says what is missing or
    unreadable. A config given for the listener by name (``listener.name.<name>.ssl.keystore.location``)
    wins over the plain one, as in Kafka. On a SASL_SSL listener only the listener's own
    ``listener.name.<name>.ssl.client.auth`` asks for client certificates (KIP-684)."""
    client_auth_override = None
    if (
        listener_name is not None
        and security_protocol == "SASL_SSL"
        and f"listener.name.{listener_name.lower()}.ssl.client.auth" not in config.values
    ):
        client_auth_override = "none"
        configured = config.values.get("ssl.client.auth")
        if configured is not None and configured.lower() != "none":
            log.warning(_SSL_CLIENT_AUTH_WARNING)
    if listener_name is not None:
        config = config.listener_config(listener_name)
    client_auth = config.get_str("ssl.client.auth")
    if client_auth not in _CLIENT_AUTH_OPTIONS:  # case-sensitive, as Kafka's ValidString
        raise invalid(
            "ssl.client.auth", client_auth, "String must be one of: " + ", ".join(_CLIENT_AUTH_OPTIONS)
        )
    protocol = _optional(config, "ssl.protocol")
    if protocol is not None and protocol.lower() not in _JDK_SSL_CONTEXTS:
        raise InvalidConfigError(
            f"Invalid ssl.protocol {protocol}: java.security.NoSuchAlgorithmException: {protocol} SSLContext "
            "not available"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = _enabled_protocols(config)
    ciphers = _optional(config, "ssl.cipher.suites")
    if ciphers is not None:
        versions = _apply_cipher_suites(context, ciphers, versions)
    context.minimum_version, context.maximum_version = versions
    _load_keystore(context, config)
    if client_auth_override is not None:
        client_auth = client_auth_override
    trusted = _load_truststore(context, config)
    if client_auth != "none" and not trusted:
        raise InvalidConfigError(
            f"ssl.client.auth={client_auth} needs a truststore (ssl.truststore.location)"
        )
    context.verify_mode = _CLIENT_AUTH[client_auth]
    return context


def ssl_principal_mapper(config: KafkaConfig, listener_name: str) -> SslPrincipalMapper:
    """An SSL listener's ``ssl.principal.mapping.rules`` (``listener.name.<name>.`` first);
    InvalidConfigError for a rule Kafka's SslPrincipalMapper cannot parse."""
    return SslPrincipalMapper(config.listener_config(listener_name).values.get("ssl.principal.mapping.rules"))


# The attribute types Java's X500Principal.getName() (RFC 2253) writes by keyword; any other is
# written as its OID, and its value as '#' and the hex of its DER encoding.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# The DER string types Java writes as text (sun.security.x509.AVA.isDerString, not canonical):
# PrintableString, T61String, IA5String, GeneralString, BMPString, UTF8String.
_STRING_TAGS = frozenset({0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C})
_ESCAPED = frozenset(',=+<>#;"\\')


def _der(data: bytes, position: int) -> tuple[int, int, int]:
    """(tag, start of the content, end) of the DER element at ``position``."""
    try:
        tag = data[position]
        position += 1
        if tag & 0x1F == 0x1F:  # a high tag number: its base-128 bytes follow
            while data[position] & 0x80:
                position += 1
            position += 1
        length = data[position]
        position += 1
        if length & 0x80:
            count = length & 0x7F
            length = int.from_bytes(data[position : position + count], "big")
            position += count
    except IndexError:
        raise ValueError("truncated DER") from None
    if position + length > len(data):
        raise ValueError("truncated DER")
    return tag, position, position + length


def _children(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(tag, element start, content start, end) of each element in ``data[start:end]``."""
    while start < end:
        tag, content, element_end = _der(data, start)
        yield tag, start, content, element_end
        start = element_end


def _oid(content: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not arcs:
        raise ValueError("empty OID")
    first = arcs[0]
    head = [0, first] if first < 40 else [1, first - 40] if first < 80 else [2, first - 80]
    return ".".join(str(arc) for arc in head + arcs[1:])


def _rfc2253_value(text: str) -> str:
    """A string value as Java's AVA.toRFC2253String escapes it: each of ,=+<>#;"\\ behind a
    backslash wherever it stands, NUL as \\00, then each leading and trailing space (or CR)."""
    chars: list[str] = []
    for c in text:
        if c in _ESCAPED:
            chars.append("\\" + c)
        elif c == "\0":
            chars.append("\\00")
        else:
            chars.append(c)
    flat = "".join(chars)
    lead = len(flat) - len(flat.lstrip(" \r"))
    trail = len(flat.rstrip(" \r"))
    return "".join("\\" + c if i < lead or i >= trail else c for i, c in enumerate(flat))


def x500_name(certificate_der: bytes) -> str:
    """The subject of a DER certificate as Java's ``X500Principal.getName()`` writes it (RFC 2253,
    sun.security.x509's form, which Kafka's default principal is): the most specific RDN first;
    CN, C, L, ST, O, OU, STREET, DC and UID by keyword, other attribute types by OID with the value
    as ``#`` and the hex of its DER encoding (tag, length, content), as is any value that is not a
    string; a string's bytes read as UTF-8 whatever its type (so a BMPString's NULs show as
    ``\\00``, as in Java); the AVAs of a multi-valued RDN in their encoded order, joined by ``+``."""
    _, cert, _ = _der(certificate_der, 0)
    _, tbs, tbs_end = _der(certificate_der, cert)
    fields = list(_children(certificate_der, tbs, tbs_end))
    if fields and fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    _, _, subject, subject_end = fields[4]
    rdns: list[str] = []
    for _, _, rdn, rdn_end in _children(certificate_der, subject, subject_end):
        avas: list[str] = []
        for _, _, ava, ava_end in _children(certificate_der, rdn, rdn_end):
            (_, _, oid, oid_end), (tag, value_start, content, value_end) = list(
                _children(certificate_der, ava, ava_end)
            )[:2]
            oid_text = _oid(certificate_der[oid:oid_end])
            keyword = _RFC2253_KEYWORDS.get(oid_text)
            if keyword is not None and tag in _STRING_TAGS:
                text = certificate_der[content:value_end].decode("utf-8", "replace")
                avas.append(f"{keyword}={_rfc2253_value(text)}")
            else:
                avas.append(f"{keyword or oid_text}=#{certificate_der[value_start:value_end].hex()}")
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def ssl_principal(certificate_der: bytes | None, mapper: SslPrincipalMapper | None = None) -> str:
    """The principal of a TLS connection (Kafka's ``DefaultKafkaPrincipalBuilder``): ``User:`` and
    the client certificate's subject (:func:`x500_name`) through ``ssl.principal.mapping.rules``
    (``User:CN=client,O=Example`` with the default rules); ``User:ANONYMOUS`` without a
    certificate. SslPrincipalMappingError when no rule maps the subject."""
    if not certificate_der:
        return ANONYMOUS
    try:
        name = x500_name(certificate_der)
    except (ValueError, IndexError) as e:
        raise SslPrincipalMappingError(f"Cannot read the client certificate's subject: {e}") from e
    if mapper is None:
        return "User:" + name
    try:
        return "User:" + mapper.get_name(name)
    except SslPrincipalMappingError as e:
        raise SslPrincipalMappingError(
            f"Failed to map name for '{name}' based on SSL principal mapping rules: {e}"
        ) from e
