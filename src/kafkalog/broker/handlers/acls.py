"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v1-v3: what a Kafka broker with no authorizer
configured answers (``AclApis``): SECURITY_DISABLED — for the request (DescribeAcls), for each
creation (CreateAcls), for each filter (DeleteAcls). kafkalog has no authorizer, so the admin
clients get Kafka's answer instead of a closed connection (and librdkafka, which needs the APIs
listed to call them, gets to ask)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

# Kafka's messages, which differ between the describe and the other two.
_DESCRIBE_MESSAGE = "No Authorizer is configured on the broker"
_MESSAGE = "No Authorizer is configured."


@handles(ApiKey.DESCRIBE_ACLS, 1, 3)
async def handle_describe_acls_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DESCRIBE_ACLS, request.api_version)
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        error_code=ErrorCode.security_disabled,
        error_message=_DESCRIBE_MESSAGE,
        resources=(),
    )


@handles(ApiKey.CREATE_ACLS, 1, 3)
async def handle_create_acls_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.CREATE_ACLS, request.api_version)
    result_cls = nested_type(cls, "AclCreationResult")
    result = build(result_cls, error_code=ErrorCode.security_disabled, error_message=_MESSAGE)
    return build(cls, throttle_time=ZERO_DELAY, results=tuple(result for _ in body.creations))


@handles(ApiKey.DELETE_ACLS, 1, 3)
async def handle_delete_acls_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DELETE_ACLS, request.api_version)
    result_cls = nested_type(cls, "DeleteAclsFilterResult")
    result = build(
        result_cls, error_code=ErrorCode.security_disabled, error_message=_MESSAGE, matching_acls=()
    )
    return build(cls, throttle_time=ZERO_DELAY, filter_results=tuple(result for _ in body.filters))
