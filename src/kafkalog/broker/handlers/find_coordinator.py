"""FindCoordinator (10), v0-v6: this node coordinates every group (key type 0) and every transactional
id (key type 1; ``__transaction_state`` is created first, as Kafka's lookup creates it). From v4 a
request carries a batch of keys and gets one answer per key.

Authorization (Kafka's ``getCoordinator``), per key: DESCRIBE on the group, else
GROUP_AUTHORIZATION_FAILED; DESCRIBE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; checked before anything else, so a denied key creates no
internal topic."""

from __future__ import annotations

import functools
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorization_failed_message, authorize
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


_Answer = tuple[ErrorCode, str | None, int, str, int]  # (error, message, node id, host, port)

# What a key's type is authorized against: (resource type, the error when DESCRIBE is denied).
_RESOURCES = {
    GROUP_KEY_TYPE: (ResourceType.GROUP, ErrorCode.group_authorization_failed),
    TRANSACTION_KEY_TYPE: (ResourceType.TRANSACTIONAL_ID, ErrorCode.transactional_id_authorization_failed),
}


def _denied(apis: Any, request: RequestContext, key_type: int, key: str) -> ErrorCode | None:
    """The authorization error for one key, or None when it may be looked up."""
    resource = _RESOURCES.get(key_type)
    if resource is None or authorize(apis, request, AclOperation.DESCRIBE, resource[0], key):
        return None
    return resource[1]


_INVALID_REQUEST_TEXT = (
    "This most likely occurs because of a request being malformed by the client library or the message "
    "was sent to an incompatible broker. See the broker logs for more details."
)


def _lookup(apis: Any, request: RequestContext, key_type: int) -> _Answer:
    """The answer for an authorized key."""
    if key_type == GROUP_KEY_TYPE:
        endpoint = apis.endpoint_for(request)
        return ErrorCode.none, None, endpoint.node_id, endpoint.host, endpoint.port
    if key_type == TRANSACTION_KEY_TYPE:
        try:
            transaction_coordinator(apis).state_manager.ensure_topic()
        except KafkaLogError as e:
            return ErrorCode.coordinator_not_available, str(e), -1, "", -1
        endpoint = apis.endpoint_for(request)
        return ErrorCode.none, None, endpoint.node_id, endpoint.host, endpoint.port
    # Kafka's CoordinatorType.forId throws; the request's error response carries the error's stock text
    return ErrorCode.invalid_request, _INVALID_REQUEST_TEXT, -1, "", -1


@handles(ApiKey.FIND_COORDINATOR, 0, 6)
async def handle_find_coordinator_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.FIND_COORDINATOR, request.api_version)
    batched = request.api_version >= 4
    key_type = int(getattr(body, "key_type", GROUP_KEY_TYPE))

    @functools.cache
    def lookup() -> _Answer:  # once per request, and only for an authorized key
        return _lookup(apis, request, key_type)

    def answer(key: str) -> _Answer:
        denied = _denied(apis, request, key_type, key)
        if denied is None:
            return lookup()
        # Kafka sends the error's message along before v4 (v4+: none).
        return denied, None if batched else authorization_failed_message(denied), -1, "", -1

    if batched:
        coordinator_cls = nested_type(cls, "Coordinator")
        coordinators = []
        for key in body.coordinator_keys:
            error, message, node_id, host, port = answer(key)
            coordinators.append(
                coordinator_cls(
                    key=key, node_id=node_id, host=host, port=port, error_code=error, error_message=message
                )
            )
        return build(cls, throttle_time=ZERO_DELAY, coordinators=tuple(coordinators))
    error, message, node_id, host, port = answer(body.key)
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        error_code=error,
        error_message=message,
        node_id=node_id,
        host=host,
        port=port,
    )
