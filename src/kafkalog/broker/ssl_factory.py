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
file. ``ssl.enabled.protocols`` bounds the TLS versions (TLSv1.2 and TLSv1.3 by default);
``ssl.cipher.suites``, when set, is handed to OpenSSL as a cipher list. Each of these may be given
for one listener, prefixed ``listener.name.<name>.``.
"""

from __future__ import annotations

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

__all__ = ["server_ssl_context", "ssl_principal", "ssl_principal_mapper", "x500_name"]

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


def _load_keystore(context: ssl.SSLContext, config: KafkaConfig) -> None:
    kind = config.get_str("ssl.keystore.type").upper()
    location = _optional(config, "ssl.keystore.location")
    key_password = _optional(config, "ssl.key.password")
    if location is None and _optional(config, "ssl.keystore.key") is None:
        raise InvalidConfigError(
            "An SSL listener needs the broker's key and certificates: ssl.keystore.type=PEM with "
            "ssl.keystore.location (or ssl.keystore.key and ssl.keystore.certificate.chain), or "
            "ssl.keystore.type=PKCS12 with ssl.keystore.location and ssl.keystore.password"
        )
    try:
        if kind == "PEM":
            inline_key = _optional(config, "ssl.keystore.key")
            inline_chain = _optional(config, "ssl.keystore.certificate.chain")
            if location is not None:
                context.load_cert_chain(location, password=key_password)
            elif inline_key is not None and inline_chain is not None:
                with _private_file(
                    (inline_chain.strip() + "\n" + inline_key.strip() + "\n").encode()
                ) as path:
                    context.load_cert_chain(path, password=key_password)
            else:
                raise InvalidConfigError(
                    "An SSL listener needs the broker's key and certificates: ssl.keystore.location, or "
                    "ssl.keystore.key and ssl.keystore.certificate.chain (ssl.keystore.type=PEM)"
                )
        elif kind == "PKCS12":
            if location is None:
                raise InvalidConfigError(
                    "An SSL listener with ssl.keystore.type=PKCS12 needs ssl.keystore.location"
                )
            key, cert, chain = _pkcs12_as_pem(
                location, _optional(config, "ssl.keystore.password"), "keystore"
            )
            with _private_file(cert + b"".join(chain) + key) as path:
                context.load_cert_chain(path)
        else:
            raise InvalidConfigError(
                f"ssl.keystore.type {kind} cannot be read by kafkalog: use PEM or PKCS12 (a JKS keystore "
                "converts with keytool -importkeystore -deststoretype PKCS12)"
            )
    except (OSError, ssl.SSLError) as e:
        raise InvalidConfigError(f"Cannot load the SSL keystore: {e}") from e


def _load_truststore(context: ssl.SSLContext, config: KafkaConfig) -> bool:
    """Load the CAs client certificates are checked against; False when none is configured."""
    kind = config.get_str("ssl.truststore.type").upper()
    location = _optional(config, "ssl.truststore.location")
    inline = _optional(config, "ssl.truststore.certificates")
    try:
        if kind == "PKCS12" and location is not None:
            _, cert, chain = _pkcs12_as_pem(
                location, _optional(config, "ssl.truststore.password"), "truststore"
            )
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


def server_ssl_context(config: KafkaConfig, listener_name: str | None = None) -> ssl.SSLContext:
    """The TLS context of an SSL listener; InvalidConfigError says what is missing or unreadable.
    A config given for the listener by name (``listener.name.<name>.ssl.keystore.location``) wins
    over the plain one, as in Kafka."""
    if listener_name is not None:
        config = config.listener_config(listener_name)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [v.strip() for v in config.get_str("ssl.enabled.protocols").split(",") if v.strip()]
    unknown = [v for v in versions if v not in _VERSIONS]
    if unknown or not versions:
        raise InvalidConfigError(
            f"ssl.enabled.protocols {versions}: kafkalog serves {', '.join(_VERSIONS)} (and at least one)"
        )
    context.minimum_version = min(_VERSIONS[v] for v in versions)
    context.maximum_version = max(_VERSIONS[v] for v in versions)
    ciphers = _optional(config, "ssl.cipher.suites")
    if ciphers is not None:
        try:
            context.set_ciphers(ciphers.replace(" ", ""))
        except ssl.SSLError as e:
            raise InvalidConfigError(
                f"ssl.cipher.suites {ciphers!r} names no cipher OpenSSL knows: {e}"
            ) from e
    _load_keystore(context, config)
    client_auth = config.get_str("ssl.client.auth").lower()
    if client_auth not in _CLIENT_AUTH:
        raise InvalidConfigError(f"ssl.client.auth {client_auth!r}: expected none, requested or required")
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
