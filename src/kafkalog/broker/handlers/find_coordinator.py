"""FindCoordinator (10), v0-v6: COORDINATOR_NOT_AVAILABLE for every key until a group or transaction
coordinator is attached (``apis.components["group_coordinator"]`` then replaces this module)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

_MESSAGE = "The coordinator is not available."


@handles(ApiKey.FIND_COORDINATOR, 0, 6)
async def handle_find_coordinator_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.FIND_COORDINATOR, request.api_version)
    if request.api_version >= 4:
        coordinator_cls = nested_type(cls, "Coordinator")
        keys = tuple(body.coordinator_keys)
        coordinators = tuple(
            coordinator_cls(
                key=key,
                node_id=-1,
                host="",
                port=-1,
                error_code=ErrorCode.coordinator_not_available,
                error_message=_MESSAGE,
            )
            for key in keys
        )
        return build(cls, throttle_time=ZERO_DELAY, coordinators=coordinators)
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        error_code=ErrorCode.coordinator_not_available,
        error_message=_MESSAGE,
        node_id=-1,
        host="",
        port=-1,
    )
