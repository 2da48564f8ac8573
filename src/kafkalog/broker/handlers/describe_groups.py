"""DescribeGroups (15), v0-v6 (Kafka's ``handleDescribeGroupsRequest``): state, protocol and members;
a Stable group's members come with their subscription and assignment. An unknown group is "Dead"
with no error before v6, GROUP_ID_NOT_FOUND from v6 (KIP-1043)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import NOT_REQUESTED, authorized_operations, filter_authorized
from kafkalog.broker.group.coordinator_of import group_coordinator
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.DESCRIBE_GROUPS, 0, 6)
async def handle_describe_groups_request(apis: Any, request: RequestContext, body: Any) -> Any:
    version = request.api_version
    cls = response_type(ApiKey.DESCRIBE_GROUPS, version)
    group_cls = nested_type(cls, "DescribedGroup")
    member_cls = nested_type(cls, "DescribedGroupMember")
    coordinator = group_coordinator(apis)
    asked = version >= 3 and body.include_authorized_operations
    # Groups the principal may not describe come first, as Kafka answers them before asking the
    # coordinator about the rest.
    allowed = filter_authorized(apis, request, AclOperation.DESCRIBE, ResourceType.GROUP, body.groups)
    described = [
        build(
            group_cls,
            error_code=ErrorCode.group_authorization_failed,
            error_message=None,
            group_id=group_id,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=(),
            authorized_operations=NOT_REQUESTED,
        )
        for group_id in body.groups
        if group_id not in allowed
    ]
    for group_id in allowed:
        error, summary = coordinator.describe_group(group_id)
        message = None
        if summary is None and error == ErrorCode.none and version >= 6:
            error, message = ErrorCode.group_id_not_found, f"Group {group_id} not found."
        members = (
            ()
            if summary is None
            else tuple(
                build(
                    member_cls,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in summary.members
            )
        )
        described.append(
            build(
                group_cls,
                error_code=ErrorCode(error),
                error_message=message,
                group_id=group_id,
                group_state=summary.state if summary is not None else "Dead",
                protocol_type=summary.protocol_type if summary is not None else "",
                protocol_data=summary.protocol if summary is not None else "",
                members=members,
                # Kafka fills the field only for groups described without an error.
                authorized_operations=authorized_operations(
                    apis, request, asked and error == ErrorCode.none, ResourceType.GROUP, group_id
                ),
            )
        )
    return build(cls, throttle_time=ZERO_DELAY, groups=tuple(described))
