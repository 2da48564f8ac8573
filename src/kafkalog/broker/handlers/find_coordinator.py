"""FindCoordinator (10), v0-v6: this node coordinates every group (key type 0) and every transactional
id (key type 1; ``__transaction_state`` is created first, as Kafka's lookup creates it). From v4 a
request carries a batch of keys and gets one answer per key."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _lookup(apis: Any, request: RequestContext, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port) for one key."""
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
    return ErrorCode.invalid_request, f"Invalid coordinator type {key_type}", -1, "", -1


@handles(ApiKey.FIND_COORDINATOR, 0, 6)
async def handle_find_coordinator_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.FIND_COORDINATOR, request.api_version)
    key_type = int(getattr(body, "key_type", GROUP_KEY_TYPE))
    error, message, node_id, host, port = _lookup(apis, request, key_type)
    if request.api_version >= 4:
        coordinator_cls = nested_type(cls, "Coordinator")
        coordinators = tuple(
            coordinator_cls(
                key=key, node_id=node_id, host=host, port=port, error_code=error, error_message=message
            )
            for key in body.coordinator_keys
        )
        return build(cls, throttle_time=ZERO_DELAY, coordinators=coordinators)
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        error_code=error,
        error_message=message,
        node_id=node_id,
        host=host,
        port=port,
    )
