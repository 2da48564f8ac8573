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
from typing import Any

from kafkalog.broker.config import KafkaConfig
from kafkalog.broker.request import ANONYMOUS
from kafkalog.errors import InvalidConfigError

__all__ = ["server_ssl_context", "ssl_principal"]

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


# RFC 2253's attribute keywords, as Java's X500Principal.getName() writes a certificate's subject.
_DN_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _dn_value(value: str) -> str:
    escaped = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    return escaped[:-1] + "\\ " if escaped.endswith(" ") and len(escaped) > 1 else escaped


def ssl_principal(peercert: dict[str, Any] | None) -> str:
    """The principal of a TLS connection (Kafka's ``DefaultKafkaPrincipalBuilder`` with the default
    ``ssl.principal.mapping.rules``): ``User:`` and the client certificate's subject as an RFC 2253
    name, most specific part first (``User:CN=client,O=Example``); ``User:ANONYMOUS`` without one."""
    if not peercert or not peercert.get("subject"):
        return ANONYMOUS
    parts = []
    for rdn in reversed(peercert["subject"]):
        parts.append("+".join(f"{_DN_KEYWORDS.get(key, key)}={_dn_value(value)}" for key, value in rdn))
    return "User:" + ",".join(parts)
