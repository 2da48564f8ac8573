"""ListGroups (16), v0-v5 (Kafka's ``handleListGroupsRequest``): every group this node coordinates.
v4 filters by state (case-insensitive), v5 by group type: these are all "classic" groups. A principal
with DESCRIBE on the cluster sees every group; another only the groups it may DESCRIBE (the others
are left out, silently: no error, no denial logged)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.group.coordinator_of import group_coordinator
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

CLASSIC = "classic"


@handles(ApiKey.LIST_GROUPS, 0, 5)
async def handle_list_groups_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.LIST_GROUPS, request.api_version)
    group_cls = nested_type(cls, "ListedGroup")
    states = {s.lower() for s in getattr(body, "states_filter", ())}
    types = {t.lower() for t in getattr(body, "types_filter", ())}
    everything = authorize(
        apis, request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    )
    error, groups = group_coordinator(apis).list_groups()
    if not everything:
        groups = [
            g
            for g in groups
            if authorize(apis, request, AclOperation.DESCRIBE, ResourceType.GROUP, g[0], log_denied=False)
        ]
    if types and CLASSIC not in types:
        groups = []
    listed = tuple(
        build(
            group_cls, group_id=group_id, protocol_type=protocol_type, group_state=state, group_type=CLASSIC
        )
        for group_id, protocol_type, state in groups
        if not states or state.lower() in states
    )
    return build(cls, throttle_time=ZERO_DELAY, error_code=ErrorCode(error), groups=listed)
