"""Certificates for the TLS tests, made with ``cryptography``: a CA, a server and a client."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_pki(out: Path) -> Path:
    """A CA (``ca.pem``), a server certificate for 127.0.0.1 and localhost (``server.pem`` with its
    key, ``server.p12`` with password ``store-secret``) and a client certificate whose subject is
    ``O=kafkalog tests, CN=client`` (``client.crt``, ``client.key``), in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafkalog test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(name: str, server: bool):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = [x509.NameAttribute(NameOID.COMMON_NAME, name)]
        if not server:
            subject.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkalog tests"))
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(subject))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        return key, builder.sign(ca_key, hashes.SHA256())

    server_key, server_cert = leaf("kafkalog", True)
    client_key, client_cert = leaf("client", False)
    (out / "ca.pem").write_bytes(_pem(ca))
    (out / "ca.key").write_bytes(_key_pem(ca_key))
    (out / "server.pem").write_bytes(_key_pem(server_key) + _pem(server_cert))
    (out / "server.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"server", server_key, server_cert, None, serialization.BestAvailableEncryption(b"store-secret")
        )
    )
    (out / "client.key").write_bytes(_key_pem(client_key))
    (out / "client.crt").write_bytes(_pem(client_cert))
    return out


def make_client_cert(pki: Path, stem: str, subject: x509.Name) -> tuple[Path, Path]:
    """A client certificate with ``subject``, signed by the CA of ``make_pki(pki)``: its
    ``<stem>.crt`` and ``<stem>.key`` in ``pki``."""
    ca = x509.load_pem_x509_certificate((pki / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .sign(ca_key, hashes.SHA256())
    )
    (pki / f"{stem}.crt").write_bytes(_pem(cert))
    (pki / f"{stem}.key").write_bytes(_key_pem(key))
    return pki / f"{stem}.crt", pki / f"{stem}.key"
