"""SASL authentication on a SASL_PLAINTEXT or SASL_SSL listener (Kafka's ``SaslServerAuthenticator``,
KIP-43 and KIP-152), with the mechanisms PLAIN (``broker/plain_sasl_server.py``), SCRAM-SHA-256 and
SCRAM-SHA-512 (``broker/scram_sasl_server.py``, users in ``broker/scram_credential_store.py``).

Until a connection has authenticated, it may send only ApiVersions (until one is answered without
error), then SaslHandshake (the mechanism), then the mechanism's tokens until it is done (one for
PLAIN, two for SCRAM): after SaslHandshake v1 in SaslAuthenticate requests, after v0 (clients older
than Kafka 1.0, KIP-152) as bare size-prefixed frames, answered the same way. Anything else closes
it, as Kafka's ``IllegalSaslStateException`` does, and a request over ``sasl.server.max.receive.size``
(512 KiB) is refused before it is read. A mechanism the
listener does not enable is UNSUPPORTED_SASL_MECHANISM (with the enabled ones); a failed login is
SASL_AUTHENTICATION_FAILED with Kafka's message; the connection is closed after either answer.

``sasl.enabled.mechanisms`` (per listener: ``listener.name.<l>.sasl.enabled.mechanisms``) names the
mechanisms; GSSAPI (Kafka's default) and OAUTHBEARER are not served, so it must be set.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from kafkalog.broker.config import KafkaConfig
from kafkalog.broker.plain_sasl_server import PLAIN, PlainSaslServer, plain_users
from kafkalog.broker.request import ZERO_DELAY, build
from kafkalog.broker.scram import MECHANISMS, ScramCredential, ScramMechanism
from kafkalog.broker.scram_sasl_server import ScramSaslServer
from kafkalog.errors import InvalidConfigError, InvalidRequestError, SaslAuthenticationError
from kafkalog.protocol.api_keys import API_KEYS, ApiKey
from kafkalog.protocol.codec import decode_request, encode_response, response_type
from kafkalog.protocol.fetch_response import Chunk
from kafkalog.protocol.headers import encode_response_header, parse_request_header, peek_api

__all__ = ["MAX_RECEIVE_SIZE", "SaslServer", "SaslServerAuthenticator", "sasl_server_factories"]

MAX_RECEIVE_SIZE = 524288  # Kafka's sasl.server.max.receive.size: requests before authentication


class SaslServer(Protocol):
    complete: bool
    authorization_id: str | None

    def evaluate_response(self, response: bytes) -> bytes: ...


ServerFactories = dict[str, Callable[[], SaslServer]]  # mechanism -> a new exchange, in enabled order
CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]


def sasl_server_factories(config: KafkaConfig, listener: str, scram: CredentialLookup) -> ServerFactories:
    """The mechanisms a SASL listener enables, each with how to start an exchange; InvalidConfigError
    for a mechanism kafkalog does not serve, or PLAIN without users."""
    scoped = config.listener_config(listener)
    enabled = [m.strip() for m in scoped.get_str("sasl.enabled.mechanisms", "GSSAPI").split(",") if m.strip()]
    served = [PLAIN, *MECHANISMS]
    unknown = [m for m in enabled if m not in served]
    if unknown or not enabled:
        raise InvalidConfigError(
            f"Listener {listener}: kafkalog serves the SASL mechanisms {', '.join(served)}; set "
            f"sasl.enabled.mechanisms to some of them (it is {','.join(enabled) or 'empty'})"
        )
    factories: ServerFactories = {}
    for name in enabled:
        if name == PLAIN:
            factories[name] = partial(PlainSaslServer, plain_users(config, listener))
        else:
            factories[name] = partial(ScramSaslServer, MECHANISMS[name], scram)
    return factories


class SaslServerAuthenticator:
    """One connection's authentication (create one per connection)."""

    def __init__(self, apis: Any, servers: ServerFactories) -> None:
        self._apis = apis
        self._servers = servers
        self._server: SaslServer | None = None
        self._raw_tokens = False  # SaslHandshake v0: tokens come without a request header
        self._api_versions_answered = False
        self.complete = False
        self.close_after_response = False

    @property
    def principal(self) -> str:
        """``User:<authorization id>`` once authenticated (Kafka's SASL KafkaPrincipal)."""
        if self._server is None or not self._server.complete:
            raise RuntimeError("not authenticated")
        return f"User:{self._server.authorization_id}"

    async def handle(
        self, frame: memoryview, client: tuple[str, int], connection_id: str, listener_name: str
    ) -> list[Chunk] | None:
        """The response to one request before authentication; sets ``complete`` once the client
        has authenticated, ``close_after_response`` when the connection must end after this answer.
        Raises InvalidRequestError for a request that has no place here (the connection closes)."""
        if self._raw_tokens:
            return self._evaluate_raw_token(bytes(frame), connection_id)
        api_key, api_version, correlation_id = peek_api(frame)
        if api_key == ApiKey.API_VERSIONS and self._server is None and not self._api_versions_answered:
            chunks = await self._apis.handle(frame, client, connection_id, listener_name)
            # Only an answer without error moves on (Kafka's HANDSHAKE_REQUEST state): after error 35
            # or INVALID_REQUEST the client may try again. The body starts after the correlation id.
            answer = b"".join(c for c in chunks or () if isinstance(c, bytes))
            self._api_versions_answered = answer[4:6] == b"\0\0"
            return chunks
        spec = API_KEYS.get(api_key)
        name = spec.name if spec is not None else f"key {api_key}"
        if api_key == ApiKey.SASL_HANDSHAKE and self._server is None and api_version <= 1:
            _, offset = parse_request_header(frame)
            body = decode_request(api_key, api_version, frame, offset)
            cls = response_type(api_key, api_version)
            enabled = tuple(self._servers)
            factory = self._servers.get(body.mechanism)
            if factory is None:
                self.close_after_response = True
                response = build(cls, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled)
            else:
                self._server = factory()
                self._raw_tokens = api_version == 0
                response = build(cls, error_code=ErrorCode.none, mechanisms=enabled)
            return [encode_response_header(api_key, api_version, correlation_id) + encode_response(response)]
        if api_key == ApiKey.SASL_AUTHENTICATE and self._server is not None and api_version <= 2:
            _, offset = parse_request_header(frame)
            body = decode_request(api_key, api_version, frame, offset)
            failure: str | None = None
            challenge = b""
            try:
                challenge = self._server.evaluate_response(bytes(body.auth_bytes))
            except SaslAuthenticationError as e:
                failure = str(e)
            self.complete = failure is None and self._server.complete
            self.close_after_response = failure is not None
            cls = response_type(api_key, api_version)
            response = build(
                cls,
                error_code=ErrorCode.none if failure is None else ErrorCode.sasl_authentication_failed,
                error_message=failure,
                auth_bytes=challenge,
                session_lifetime=timedelta(0),  # no re-authentication (KIP-368): connections.max.reauth.ms=0
                throttle_time=ZERO_DELAY,
            )
            return [encode_response_header(api_key, api_version, correlation_id) + encode_response(response)]
        raise InvalidRequestError(
            f"Unexpected Kafka request of type {name} v{api_version} during SASL handshake on {connection_id}"
        )

    def _evaluate_raw_token(self, token: bytes, connection_id: str) -> list[Chunk]:
        """A token after SaslHandshake v0: the challenge goes back as a bare frame (empty when there is
        none, as Kafka sends for PLAIN); a failed login has no answer, the connection just closes."""
        assert self._server is not None
        try:
            challenge = self._server.evaluate_response(token)
        except SaslAuthenticationError as e:
            raise InvalidRequestError(f"SASL authentication failed on {connection_id}: {e}") from None
        self.complete = self._server.complete
        return [challenge]
