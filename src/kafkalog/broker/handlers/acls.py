"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v1-v3 (Kafka's ``AclApis``).

With an authorizer (``authorizer.class.name``, ``broker/standard_authorizer.py``) they list, add and
remove its ACLs; describing needs DESCRIBE on the cluster and changing ALTER, else
CLUSTER_AUTHORIZATION_FAILED for the request (for each creation, for each filter). Without one they
answer as a Kafka broker with no authorizer does: SECURITY_DISABLED — so the admin clients get
Kafka's answer rather than a closed connection (and librdkafka, which needs the APIs listed to call
them, gets to ask).

A filter or an ACL with an UNKNOWN part (a code the enums do not know), which Kafka refuses while
parsing the request (closing the connection), is INVALID_REQUEST here, for that filter or creation
only. A creation naming ANY (or the pattern MATCH) fails the whole request as in Kafka: building the
ACL bindings throws before any is created, and every creation gets UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)
from kafkalog.broker.auth_helper import authorize_cluster, authorizer, not_authorized_message
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

# Kafka's messages, which differ between the describe and the other two.
_DESCRIBE_MESSAGE = "No Authorizer is configured on the broker"
_MESSAGE = "No Authorizer is configured."

E = TypeVar("E", bound=IntEnum)


def _code(enum: type[E], value: int) -> E:
    """Kafka's ``fromCode``: a code the enum does not know is UNKNOWN (0)."""
    try:
        return enum(int(value))
    except ValueError:
        return enum(0)


def _filter(body: Any) -> AclBindingFilter:
    return AclBindingFilter(
        _code(ResourceType, body.resource_type_filter),
        body.resource_name_filter,
        _code(PatternType, body.pattern_type_filter),
        body.principal_filter,
        body.host_filter,
        _code(AclOperation, body.operation),
        _code(AclPermissionType, body.permission_type),
    )


def _names_a_filter_value(creation: Any) -> bool:
    """ANY (or MATCH) in an ACL to create: Kafka's ``ResourcePattern``/``AccessControlEntry``
    constructors throw for them."""
    return (
        creation.resource_type == ResourceType.ANY
        or creation.resource_pattern_type in (PatternType.ANY, PatternType.MATCH)
        or creation.operation == AclOperation.ANY
        or creation.permission_type == AclPermissionType.ANY
    )


def _alter_refusal(apis: Any, request: RequestContext) -> tuple[ErrorCode, str] | None:
    """Changing ACLs needs ALTER on the cluster (checked first, as Kafka's ``AclApis`` does)."""
    if authorize_cluster(apis, request, AclOperation.ALTER):
        return None
    return ErrorCode.cluster_authorization_failed, not_authorized_message(request)


@handles(ApiKey.DESCRIBE_ACLS, 1, 3)
async def handle_describe_acls_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DESCRIBE_ACLS, request.api_version)
    auth = authorizer(apis)

    def error(code: ErrorCode, message: str) -> Any:
        return build(cls, throttle_time=ZERO_DELAY, error_code=code, error_message=message, resources=())

    if not authorize_cluster(apis, request, AclOperation.DESCRIBE):
        return error(ErrorCode.cluster_authorization_failed, not_authorized_message(request))
    if auth is None:
        return error(ErrorCode.security_disabled, _DESCRIBE_MESSAGE)
    binding_filter = _filter(body)
    problem = binding_filter.unknown_part()
    if problem is not None:
        return error(ErrorCode.invalid_request, problem)
    resource_cls = nested_type(cls, "DescribeAclsResource")
    acl_cls = nested_type(cls, "AclDescription")
    by_pattern: dict[tuple[int, str, int], list[StandardAcl]] = {}
    for acl in auth.acls(binding_filter):
        by_pattern.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    resources = tuple(
        build(
            resource_cls,
            resource_type=resource_type,
            resource_name=name,
            pattern_type=pattern_type,
            acls=tuple(
                build(
                    acl_cls,
                    principal=a.principal,
                    host=a.host,
                    operation=a.operation,
                    permission_type=a.permission_type,
                )
                for a in acls
            ),
        )
        for (resource_type, name, pattern_type), acls in by_pattern.items()
    )
    return build(
        cls, throttle_time=ZERO_DELAY, error_code=ErrorCode.none, error_message=None, resources=resources
    )


@handles(ApiKey.CREATE_ACLS, 1, 3)
async def handle_create_acls_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.CREATE_ACLS, request.api_version)
    result_cls = nested_type(cls, "AclCreationResult")
    auth = authorizer(apis)
    refusal = _alter_refusal(apis, request)
    if refusal is not None or auth is None:
        code, message = refusal or (ErrorCode.security_disabled, _MESSAGE)
        result = build(result_cls, error_code=code, error_message=message)
        return build(cls, throttle_time=ZERO_DELAY, results=tuple(result for _ in body.creations))
    if any(_names_a_filter_value(c) for c in body.creations):
        result = build(result_cls, error_code=ErrorCode.unknown_server_error, error_message=None)
        return build(cls, throttle_time=ZERO_DELAY, results=tuple(result for _ in body.creations))
    acls = [
        StandardAcl(
            _code(ResourceType, c.resource_type),
            c.resource_name,
            _code(PatternType, c.resource_pattern_type),
            c.principal,
            c.host,
            _code(AclOperation, c.operation),
            _code(AclPermissionType, c.permission_type),
        )
        for c in body.creations
    ]
    results = tuple(
        build(result_cls, error_code=r.error, error_message=r.message) for r in auth.create_acls(acls)
    )
    return build(cls, throttle_time=ZERO_DELAY, results=results)


@handles(ApiKey.DELETE_ACLS, 1, 3)
async def handle_delete_acls_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DELETE_ACLS, request.api_version)
    result_cls = nested_type(cls, "DeleteAclsFilterResult")
    matching_cls = nested_type(cls, "DeleteAclsMatchingAcl")
    auth = authorizer(apis)
    refusal = _alter_refusal(apis, request)
    if refusal is not None or auth is None:
        code, message = refusal or (ErrorCode.security_disabled, _MESSAGE)
        result = build(result_cls, error_code=code, error_message=message, matching_acls=())
        return build(cls, throttle_time=ZERO_DELAY, filter_results=tuple(result for _ in body.filters))
    results = tuple(
        build(
            result_cls,
            error_code=r.error,
            error_message=r.message,
            matching_acls=tuple(
                build(
                    matching_cls,
                    error_code=ErrorCode.none,
                    error_message=None,
                    resource_type=a.resource_type,
                    resource_name=a.resource_name,
                    pattern_type=a.pattern_type,
                    principal=a.principal,
                    host=a.host,
                    operation=a.operation,
                    permission_type=a.permission_type,
                )
                for a in r.acls
            ),
        )
        for r in auth.delete_acls(_filter(f) for f in body.filters)
    )
    return build(cls, throttle_time=ZERO_DELAY, filter_results=results)
