"""Heartbeat (12), v0-v4 (Kafka's ``handleHeartbeatRequest``): keeps the member's session alive;
REBALANCE_IN_PROGRESS tells it to rejoin. Needs READ on the group: GROUP_AUTHORIZATION_FAILED
otherwise."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.group.coordinator_of import group_coordinator
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.HEARTBEAT, 0, 4)
async def handle_heartbeat_request(apis: Any, request: RequestContext, body: Any) -> Any:
    if not authorize(apis, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        error = int(ErrorCode.group_authorization_failed)
    else:
        error = group_coordinator(apis).handle_heartbeat(
            body.group_id, body.member_id, getattr(body, "group_instance_id", None), int(body.generation_id)
        )
    return build(
        response_type(ApiKey.HEARTBEAT, request.api_version),
        throttle_time=ZERO_DELAY,
        error_code=ErrorCode(error),
    )
