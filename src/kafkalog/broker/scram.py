"""SCRAM credentials (RFC 5802, RFC 7677; Kafka's ``ScramMechanism``, ``ScramCredential`` and
``ScramFormatter``): what a broker keeps of a user's password, and how it is derived.

A broker never keeps the password, nor the salted password: only the salt, the iteration count and
two keys derived from ``SaltedPassword = PBKDF2-HMAC(password, salt, iterations)``::

    StoredKey = H(HMAC(SaltedPassword, "Client Key"))   proves the client knows the password
    ServerKey = HMAC(SaltedPassword, "Server Key")      proves to the client the broker knew it

Kafka's admin API (AlterUserScramCredentials) sends the salt and the salted password, never the
password, and the broker derives the two keys (``ScramControlManager.finishUpsertion``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "ScramCredential",
    "ScramMechanism",
    "client_key",
    "credential_from_password",
    "credential_from_salted_password",
    "mechanism_for_type",
    "salted_password",
]

MAX_ITERATIONS = 16384  # Kafka's ScramControlManager.MAX_ITERATIONS (and each mechanism's maximum)


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str  # the SASL mechanism name, "SCRAM-SHA-256"
    type: int  # the admin API's int8: 1 for SHA-256, 2 for SHA-512 (0 is UNKNOWN)
    hash_name: str  # hashlib's name of H
    min_iterations: int = 4096

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


def mechanism_for_type(type_: int) -> ScramMechanism | None:
    return next((m for m in MECHANISMS.values() if m.type == type_), None)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC, one block (Kafka does no SASLprep)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def client_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return mechanism.hmac(salted, b"Client Key")


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    return ScramCredential(
        salt=salt,
        stored_key=mechanism.hash(client_key(mechanism, salted)),
        server_key=mechanism.hmac(salted, b"Server Key"),
        iterations=iterations,
    )


def credential_from_password(
    mechanism: ScramMechanism, password: str, iterations: int, salt: bytes | None = None
) -> ScramCredential:
    """A new credential for ``password`` (a random salt unless one is given)."""
    salt = secrets.token_bytes(32) if salt is None else salt
    return credential_from_salted_password(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
    )
