"""What handlers ask the authorizer (Kafka's ``AuthHelper``): may this request's principal, from its
host, perform an operation on a resource; which of some resources may it; which operations does it
hold on one (the ``authorized_operations`` bit fields of Metadata, DescribeCluster, DescribeGroups
and DescribeTopicPartitions).

Without an authorizer (``authorizer.class.name`` unset, Kafka's default) everything is allowed, and
a client asking for its authorized operations gets every operation the resource type supports.
When not asked, the bit field keeps the schema's default, ``Integer.MIN_VALUE``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
)
from kafkalog.broker.request import RequestContext
from kafkalog.broker.standard_authorizer import StandardAuthorizer
from kafkalog.protocol.api_keys import api_spec

__all__ = [
    "AUTHORIZER",
    "NOT_REQUESTED",
    "authorize",
    "authorize_by_resource_type",
    "authorization_failed_message",
    "authorize_cluster",
    "authorized_names",
    "authorized_operations",
    "authorizer",
    "filter_authorized",
    "not_authorized_message",
]

AUTHORIZER = "authorizer"  # the broker component (None: no authorizer configured)
NOT_REQUESTED = -(2**31)

T = TypeVar("T")


def authorizer(apis: Any) -> StandardAuthorizer | None:
    found: StandardAuthorizer | None = apis.components.get(AUTHORIZER)
    return found


def authorize(
    apis: Any,
    request: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    log_denied: bool = True,
) -> bool:
    auth = authorizer(apis)
    if auth is None:
        return True
    return auth.authorize(request.principal, request.client_host, operation, resource_type, name, log_denied)


def authorize_cluster(apis: Any, request: RequestContext, operation: AclOperation) -> bool:
    return authorize(apis, request, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorize_by_resource_type(
    apis: Any, request: RequestContext, operation: AclOperation, resource_type: ResourceType
) -> bool:
    """Whether the request may ``operation`` on some resource of the type, whichever
    (``StandardAuthorizer.authorize_by_resource_type``); everything without an authorizer."""
    auth = authorizer(apis)
    if auth is None:
        return True
    return auth.authorize_by_resource_type(request.principal, request.client_host, operation, resource_type)


def filter_authorized(
    apis: Any,
    request: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    items: Iterable[T],
    name: Any = None,
) -> list[T]:
    """The items (in order) the request may ``operation``; ``name(item)`` is the resource name
    (the item itself by default)."""
    auth = authorizer(apis)
    if auth is None:
        return list(items)
    key = name if name is not None else str
    return [
        item
        for item in items
        if auth.authorize(request.principal, request.client_host, operation, resource_type, key(item))
    ]


def authorized_names(
    apis: Any,
    request: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
) -> set[str]:
    """The names the request may ``operation``, one decision per distinct name however often the
    request repeats it (Kafka's ``filterByAuthorized``)."""
    return set(filter_authorized(apis, request, operation, resource_type, dict.fromkeys(names)))


def authorized_operations(
    apis: Any, request: RequestContext, requested: bool, resource_type: ResourceType, name: str
) -> int:
    """The 32-bit field whose bit *n* says the request's principal holds the operation with code
    *n* on the resource (Kafka's ``Utils.to32BitField`` of ``AuthHelper.authorizedOperations``)."""
    if not requested:
        return NOT_REQUESTED
    supported = SUPPORTED_OPERATIONS[resource_type]
    held = [op for op in supported if authorize(apis, request, op, resource_type, name, log_denied=False)]
    return sum(1 << op for op in held)


# Kafka's default messages of the authorization errors (``Errors``): what an ``ApiError(error)`` carries.
_FAILED_MESSAGES = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
}


def authorization_failed_message(error: ErrorCode) -> str:
    """Kafka's message for TOPIC_, GROUP_, CLUSTER_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    return _FAILED_MESSAGES[error]


def not_authorized_message(request: RequestContext) -> str:
    """The message of Kafka's ``authorizeClusterOperation`` refusal, "Request ... is not authorized.",
    naming the API and principal where Kafka dumps its internal request object."""
    spec = api_spec(request.header.api_key)
    api = spec.name if spec is not None else str(request.header.api_key)
    return f"Request {api} from {request.principal} is not authorized."
