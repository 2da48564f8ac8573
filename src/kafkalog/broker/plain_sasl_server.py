"""The broker's side of SASL/PLAIN (RFC 4616; Kafka's ``PlainSaslServer`` and
``PlainServerCallbackHandler``): one client message, ``[authzid] NUL username NUL password``,
checked against the users of the listener's JAAS config,
``listener.name.<listener>.plain.sasl.jaas.config`` (or ``sasl.jaas.config``), e.g.
``org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`` —
each ``user_<name>="<password>"`` option is a user."""

from __future__ import annotations

import hmac
import re

from kafkalog.broker.config import KafkaConfig
from kafkalog.errors import InvalidConfigError, SaslAuthenticationError

__all__ = ["PLAIN", "PlainSaslServer", "plain_users"]

PLAIN = "PLAIN"
_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def plain_users(config: KafkaConfig, listener: str) -> dict[str, str]:
    """The PLAIN users of a SASL listener from its JAAS config; InvalidConfigError if it has none."""
    scoped = config.listener_config(listener)
    jaas = scoped.values.get("plain.sasl.jaas.config") or scoped.values.get("sasl.jaas.config")
    key = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
    if not jaas or "PlainLoginModule" not in jaas:
        raise InvalidConfigError(
            f"Listener {listener} needs its PLAIN users: set {key} to "
            "'org.apache.kafka.common.security.plain.PlainLoginModule required user_<name>=\"<password>\";'"
        )
    users = {
        name[len("user_") :]: value.replace('\\"', '"')
        for name, value in _OPTION.findall(jaas)
        if name.startswith("user_")
    }
    if not users:
        raise InvalidConfigError(f'{key} names no user: add user_<name>="<password>" options')
    return users


class PlainSaslServer:
    """One connection's PLAIN login: ``evaluate_response`` raises SaslAuthenticationError with
    Kafka's message, or returns the (empty) final answer and sets ``complete``."""

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.authorization_id: str | None = None
        self.complete = False

    def evaluate_response(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: PLAIN has one client message")
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError(
                f"Authentication failed: Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
            )
        try:
            authzid, username, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError(
                "Authentication failed: Invalid SASL/PLAIN response: not UTF-8"
            ) from None
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.authorization_id = username
        self.complete = True
        return b""
