"""The broker's side of a SCRAM exchange (RFC 5802; Kafka's ``ScramSaslServer`` and
``ScramMessages``), two round trips carried in SaslAuthenticate requests::

    client-first   n,[a=authzid],n=<user>,r=<client nonce>[,ext=value...]
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=<base64 gs2 header>,r=<both nonces>,p=<base64 ClientProof>
    server-final   v=<base64 ServerSignature>

The client proves it knows the password without sending it: ``ClientProof = ClientKey XOR
HMAC(StoredKey, AuthMessage)``, so ``H(ClientProof XOR HMAC(StoredKey, AuthMessage))`` must equal the
stored key; ``AuthMessage`` is client-first (without its gs2 header), server-first and client-final
(without the proof), joined by commas. Kafka's limits apply: channel binding is not supported (the
gs2 header must be ``n``), unknown extensions are ignored, and delegation tokens
(``tokenauth=true``) are not served here, so such a login fails like a wrong password.

Every failure is ``SaslAuthenticationError``. As Kafka does, its client-facing message names only
the mechanism, whatever went wrong (an unknown user, a wrong password, a malformed message), so a
client cannot probe which users exist; a client asking for another user's authorization id is told
so.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import secrets
from collections.abc import Callable

from kafkalog.broker.scram import ScramCredential, ScramMechanism
from kafkalog.errors import SaslAuthenticationError

__all__ = ["ScramSaslServer"]

# Kafka's ScramMessages patterns, over ASCII: a value is anything but ',' (and '=' for names).
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_BASE64 = r"(?:[A-Za-z0-9/+]{4})*(?:[A-Za-z0-9/+]{3}=|[A-Za-z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})"
)
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})"
)


def _username(saslname: str) -> str:
    """RFC 5802's escaping undone: ``=2C`` is ',' and ``=3D`` is '='; any other '=' is invalid."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ValueError(f"Invalid username: {saslname}")
    return name.replace("=3D", "=")


def _server_nonce() -> str:
    """130 random bits in base 36, as Kafka's ``ScramFormatter.secureRandomString`` makes them."""
    n, digits = secrets.randbits(130), []
    while n:
        n, d = divmod(n, 36)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[d])
    return "".join(reversed(digits)) or "0"


class ScramSaslServer:
    """One connection's SCRAM exchange: ``evaluate_response`` takes each client message and
    returns the broker's; ``complete`` once the client has proved its password."""

    def __init__(
        self, mechanism: ScramMechanism, credentials: Callable[[str, ScramMechanism], ScramCredential | None]
    ) -> None:
        self.mechanism = mechanism
        self._credentials = credentials
        self._state = "client-first"
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.authorization_id: str | None = None
        self.complete = False

    def _failed(self) -> SaslAuthenticationError:
        self._state = "failed"
        self._credential = None
        return SaslAuthenticationError(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            + self.mechanism.name
        )

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            text = response.decode("ascii")
        except UnicodeDecodeError:
            raise self._failed() from None
        if self._state == "client-first":
            return self._client_first(text)
        if self._state == "client-final":
            return self._client_final(text)
        raise self._failed()

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise self._failed()
        try:
            username = _username(match["saslname"])
        except ValueError:
            raise self._failed() from None
        extensions = dict(item.split("=", 1) for item in match["extensions"][1:].split(",") if item)
        credential = (
            None if extensions.get("tokenauth") == "true" else self._credentials(username, self.mechanism)
        )
        if credential is None or credential.iterations < self.mechanism.min_iterations:
            raise self._failed()
        authzid = match["authzid"] or ""
        if authzid and authzid != username:
            self._state = "failed"
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self._credential = credential
        self.authorization_id = username
        # Kafka rebuilds the bare message from what it parsed (a reserved "m=" part is not in it).
        extension_text = ",".join(f"{k}={v}" for k, v in extensions.items())
        self._client_first_bare = f"n={match['saslname']},r={match['nonce']}" + (
            "," + extension_text if extension_text else ""
        )
        self._nonce = match["nonce"] + _server_nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = "client-final"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(text)
        credential = self._credential
        if match is None or credential is None or not match["nonce"].endswith(self._nonce):
            raise self._failed()
        try:
            channel = base64.b64decode(match["channel"], validate=True)
            proof = base64.b64decode(match["proof"], validate=True)
        except binascii.Error:
            raise self._failed() from None
        without_proof = f"c={base64.b64encode(channel).decode()},r={match['nonce']}"
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._failed()
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key):
            raise self._failed()
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        self._credential = None
        self._state = "complete"
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)
