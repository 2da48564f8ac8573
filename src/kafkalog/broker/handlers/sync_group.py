"""SyncGroup (14), v0-v5 (Kafka's ``handleSyncGroupRequest``): the leader hands in the assignment;
every member parks until it is stored, then gets its own share. v5 checks protocol type and name,
which it must carry (INCONSISTENT_GROUP_PROTOCOL otherwise). Syncing needs READ on the group:
GROUP_AUTHORIZATION_FAILED otherwise."""

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


def _error(cls: type[Any], error: ErrorCode) -> Any:
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        error_code=error,
        protocol_type=None,
        protocol_name=None,
        assignment=b"",
    )


@handles(ApiKey.SYNC_GROUP, 0, 5)
async def handle_sync_group_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.SYNC_GROUP, request.api_version)
    # Kafka's order: the v5 mandatory fields, then authorization.
    if request.api_version >= 5 and (body.protocol_type is None or body.protocol_name is None):
        return _error(cls, ErrorCode.inconsistent_group_protocol)
    if not authorize(apis, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _error(cls, ErrorCode.group_authorization_failed)
    result = await group_coordinator(apis).handle_sync_group(
        group_id=body.group_id,
        generation_id=int(body.generation_id),
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        protocol_type=getattr(body, "protocol_type", None),
        protocol_name=getattr(body, "protocol_name", None),
        assignments=[(a.member_id, bytes(a.assignment)) for a in body.assignments],
    )
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        error_code=ErrorCode(result.error),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
