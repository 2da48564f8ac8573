"""JoinGroup (11), v0-v9 (Kafka's ``handleJoinGroupRequest``): parks until the join phase of the
rebalance ends. v0 has no rebalance timeout (the session timeout serves as both); v4+ first gets
MEMBER_ID_REQUIRED with a member id to join with; v9 lets a returning static leader skip assignment.
Joining needs READ on the group: GROUP_AUTHORIZATION_FAILED otherwise, before the coordinator looks."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.group.coordinator_of import group_coordinator
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, millis, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.JOIN_GROUP, 0, 9)
async def handle_join_group_request(apis: Any, request: RequestContext, body: Any) -> Any:
    version = request.api_version
    cls = response_type(ApiKey.JOIN_GROUP, version)
    if not authorize(apis, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return build(
            cls,
            throttle_time=ZERO_DELAY,
            error_code=ErrorCode.group_authorization_failed,
            generation_id=-1,
            protocol_type=None,
            protocol_name=None if version >= 7 else "",
            leader="",
            skip_assignment=False,
            member_id="",
            members=(),
        )
    session_timeout_ms = millis(body.session_timeout)
    rebalance_timeout = getattr(body, "rebalance_timeout", None)
    rebalance_timeout_ms = millis(rebalance_timeout) if rebalance_timeout is not None else session_timeout_ms
    result = await group_coordinator(apis).handle_join_group(
        group_id=body.group_id,
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        require_known_member_id=version >= 4,
        support_skip_assignment=version >= 9,
        client_id=request.header.client_id or "",
        client_host=f"/{request.client_host}",
        rebalance_timeout_ms=rebalance_timeout_ms,
        session_timeout_ms=session_timeout_ms,
        protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
    )
    member_cls = nested_type(cls, "JoinGroupResponseMember")
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        error_code=ErrorCode(result.error),
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        # before v7 the name is not nullable
        protocol_name=result.protocol_name if version >= 7 or result.protocol_name is not None else "",
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            build(member_cls, member_id=m, group_instance_id=i, metadata=md) for m, i, md in result.members
        ),
    )
