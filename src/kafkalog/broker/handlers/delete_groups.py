"""DeleteGroups (42), v0-v2 (Kafka's ``handleDeleteGroupsRequest``): only Empty groups (and groups
that only hold offsets) may go; their metadata and offsets are tombstoned. Others: NON_EMPTY_GROUP,
unknown ones GROUP_ID_NOT_FOUND. Deleting needs DELETE on the group: the others get
GROUP_AUTHORIZATION_FAILED, after the results of those deleted (as Kafka answers)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import filter_authorized
from kafkalog.broker.group.coordinator_of import group_coordinator
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.DELETE_GROUPS, 0, 2)
async def handle_delete_groups_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DELETE_GROUPS, request.api_version)
    result_cls = nested_type(cls, "DeletableGroupResult")
    groups = list(dict.fromkeys(body.groups_names))  # each named group once, as KafkaApis does
    allowed = filter_authorized(apis, request, AclOperation.DELETE, ResourceType.GROUP, groups)
    results = await group_coordinator(apis).handle_delete_groups(allowed)
    results += [(g, int(ErrorCode.group_authorization_failed)) for g in groups if g not in allowed]
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        results=tuple(result_cls(group_id=g, error_code=ErrorCode(e)) for g, e in results),
    )
