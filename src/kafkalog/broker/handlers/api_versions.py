"""ApiVersions (18), v0-v4: the APIs and versions this broker serves, as registered by the handlers.

A version above ours is answered, as Kafka does, with error 35 (UNSUPPORTED_VERSION) in a v0 body
that still lists our table, so the client can retry with a version we serve.
"""

from __future__ import annotations

from typing import Any

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode

from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import encode_response, response_type


def unsupported_version_response(apis: Any) -> bytes:
    """The v0 body with error 35 and our table."""
    keys = tuple(
        ApiVersionV0(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in apis.supported_versions()
    )
    return encode_response(ApiVersionsResponseV0(error_code=ErrorCode.unsupported_version, api_keys=keys))


@handles(ApiKey.API_VERSIONS, 0, 4)
async def handle_api_versions_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.API_VERSIONS, request.api_version)
    api_version_cls = nested_type(cls, "ApiVersion")
    keys = tuple(
        api_version_cls(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in apis.supported_versions()
    )
    return build(cls, error_code=ErrorCode.none, api_keys=keys, throttle_time=ZERO_DELAY)
