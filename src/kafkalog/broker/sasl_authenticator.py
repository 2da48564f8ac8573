"""SASL authentication on a SASL_PLAINTEXT or SASL_SSL listener (Kafka's ``SaslServerAuthenticator``
with the PLAIN mechanism, KIP-43 and KIP-152).

Until a connection has authenticated, it may send only ApiVersions, then SaslHandshake (v1: the
mechanism), then SaslAuthenticate (the mechanism's token); anything else closes it, as Kafka's
``IllegalSaslStateException`` does, and a request over ``sasl.server.max.receive.size`` (512 KiB) is
refused before it is read. A mechanism the listener does not enable is UNSUPPORTED_SASL_MECHANISM
(with the enabled ones); wrong credentials are SASL_AUTHENTICATION_FAILED with Kafka's message; the
connection is closed after either answer.

The users are Kafka's: the listener's JAAS config for PLAIN,
``listener.name.<listener>.plain.sasl.jaas.config`` (or ``sasl.jaas.config``), e.g.
``org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`` —
each ``user_<name>="<password>"`` option is a user (Kafka's ``PlainServerCallbackHandler``).
``sasl.enabled.mechanisms`` must name PLAIN: GSSAPI (Kafka's default), SCRAM and OAUTHBEARER are
not served.
"""

from __future__ import annotations

import hmac
import re
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.config import KafkaConfig
from kafkalog.broker.request import ZERO_DELAY, build
from kafkalog.errors import InvalidConfigError, InvalidRequestError
from kafkalog.protocol.api_keys import API_KEYS, ApiKey
from kafkalog.protocol.codec import decode_request, encode_response, response_type
from kafkalog.protocol.fetch_response import Chunk
from kafkalog.protocol.headers import encode_response_header, parse_request_header, peek_api

__all__ = ["MAX_RECEIVE_SIZE", "SaslServerAuthenticator", "plain_users"]

MAX_RECEIVE_SIZE = 524288  # Kafka's sasl.server.max.receive.size: requests before authentication
PLAIN = "PLAIN"
_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def plain_users(config: KafkaConfig, listener: str) -> dict[str, str]:
    """The PLAIN users of a SASL listener from its JAAS config; InvalidConfigError if it has none or
    does not enable PLAIN."""
    scoped = config.listener_config(listener)
    enabled = [
        m.strip().upper() for m in scoped.get_str("sasl.enabled.mechanisms", "GSSAPI").split(",") if m.strip()
    ]
    if PLAIN not in enabled or len(enabled) != 1:
        raise InvalidConfigError(
            f"Listener {listener}: kafkalog serves the SASL mechanism PLAIN only; set "
            f"sasl.enabled.mechanisms=PLAIN (it is {','.join(enabled)})"
        )
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


class SaslServerAuthenticator:
    """One connection's authentication (create one per connection)."""

    def __init__(self, apis: Any, users: dict[str, str]) -> None:
        self._apis = apis
        self._users = users
        self._mechanism: str | None = None
        self.complete = False
        self.close_after_response = False

    async def handle(
        self, frame: memoryview, client: tuple[str, int], connection_id: str, listener_name: str
    ) -> list[Chunk] | None:
        """The response to one request before authentication; sets ``complete`` once the client
        has authenticated, ``close_after_response`` when the connection must end after this answer.
        Raises InvalidRequestError for a request that has no place here (the connection closes)."""
        api_key, api_version, correlation_id = peek_api(frame)
        if api_key == ApiKey.API_VERSIONS and self._mechanism is None:
            return await self._apis.handle(frame, client, connection_id, listener_name)
        spec = API_KEYS.get(api_key)
        name = spec.name if spec is not None else f"key {api_key}"
        if api_key == ApiKey.SASL_HANDSHAKE and self._mechanism is None and api_version == 1:
            _, offset = parse_request_header(frame)
            body = decode_request(api_key, api_version, frame, offset)
            cls = response_type(api_key, api_version)
            if body.mechanism != PLAIN:
                self.close_after_response = True
                response = build(cls, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=(PLAIN,))
            else:
                self._mechanism = PLAIN
                response = build(cls, error_code=ErrorCode.none, mechanisms=(PLAIN,))
            return [encode_response_header(api_key, api_version, correlation_id) + encode_response(response)]
        if api_key == ApiKey.SASL_AUTHENTICATE and self._mechanism is not None and api_version <= 2:
            _, offset = parse_request_header(frame)
            body = decode_request(api_key, api_version, frame, offset)
            failure = self._authenticate_plain(bytes(body.auth_bytes))
            cls = response_type(api_key, api_version)
            self.complete = failure is None
            self.close_after_response = failure is not None
            response = build(
                cls,
                error_code=ErrorCode.none if failure is None else ErrorCode.sasl_authentication_failed,
                error_message=failure,
                auth_bytes=b"",
                session_lifetime=timedelta(0),  # no re-authentication (KIP-368): connections.max.reauth.ms=0
                throttle_time=ZERO_DELAY,
            )
            return [encode_response_header(api_key, api_version, correlation_id) + encode_response(response)]
        raise InvalidRequestError(
            f"Unexpected Kafka request of type {name} v{api_version} during SASL handshake on {connection_id}"
        )

    def _authenticate_plain(self, token: bytes) -> str | None:
        """Kafka's ``PlainSaslServer``: None when ``[authzid] NUL username NUL password`` names a
        user with that password, else the reason."""
        parts = token.split(b"\0")
        if len(parts) != 3:
            return "Authentication failed: Invalid SASL/PLAIN response: expected 3 tokens, got " + str(
                len(parts)
            )
        try:
            authzid, username, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            return "Authentication failed: Invalid SASL/PLAIN response: not UTF-8"
        if not username:
            return "Authentication failed: username not specified"
        if not password:
            return "Authentication failed: password not specified"
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            return "Authentication failed: Invalid username or password"
        if authzid and authzid != username:
            return (
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        return None
