"""LeaveGroup (13), v0-v5 (Kafka's ``handleLeaveGroupRequest``): v0-v2 name one member; v3+ a batch
of members, each by member id and/or ``group.instance.id``, with an error per member. Leaving needs
READ on the group: GROUP_AUTHORIZATION_FAILED otherwise, for the request as a whole (no members)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.group.coordinator_of import group_coordinator
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.LEAVE_GROUP, 0, 5)
async def handle_leave_group_request(apis: Any, request: RequestContext, body: Any) -> Any:
    version = request.api_version
    cls = response_type(ApiKey.LEAVE_GROUP, version)
    if not authorize(apis, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return build(
            cls, throttle_time=ZERO_DELAY, error_code=ErrorCode.group_authorization_failed, members=()
        )
    if version < 3:
        leaving = [(body.member_id, None)]
    else:
        leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    error, member_errors = group_coordinator(apis).handle_leave_group(body.group_id, leaving)
    if version < 3:
        # one member: its error is the response's error
        if error == ErrorCode.none and member_errors:
            error = member_errors[0]
        return build(cls, throttle_time=ZERO_DELAY, error_code=ErrorCode(error))
    member_cls = nested_type(cls, "MemberResponse")
    members = tuple(
        build(
            member_cls, member_id=member_id, group_instance_id=instance_id, error_code=ErrorCode(member_error)
        )
        for (member_id, instance_id), member_error in zip(leaving, member_errors, strict=False)
    )
    return build(cls, throttle_time=ZERO_DELAY, error_code=ErrorCode(error), members=members)
