"""SaslHandshake (17), v0-v1, and SaslAuthenticate (36), v0-v2, where no authentication is under way:
on a PLAINTEXT or SSL listener, or after a connection has authenticated (Kafka's
``handleSaslHandshakeRequest`` / ``handleSaslAuthenticateRequest``): ILLEGAL_SASL_STATE. The
exchange itself, on a SASL listener before authentication, is ``broker/sasl_authenticator.py``'s."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.SASL_HANDSHAKE, 0, 1)
async def handle_sasl_handshake_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.SASL_HANDSHAKE, request.api_version)
    return build(cls, error_code=ErrorCode.illegal_sasl_state, mechanisms=())


@handles(ApiKey.SASL_AUTHENTICATE, 0, 2)
async def handle_sasl_authenticate_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.SASL_AUTHENTICATE, request.api_version)
    return build(
        cls,
        error_code=ErrorCode.illegal_sasl_state,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime=timedelta(0),
        throttle_time=ZERO_DELAY,
    )
