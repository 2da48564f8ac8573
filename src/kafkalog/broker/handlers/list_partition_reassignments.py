"""ListPartitionReassignments (46), v0 (``ReplicationControlManager.listPartitionReassignments``):
the reassignments in progress, for every partition (null) or the named ones. On one node none ever
is (see ``alter_partition_reassignments``), so the answer is always an empty list; Kafka, too,
passes over named topics it does not know rather than failing.

It needs DESCRIBE on the cluster: otherwise the error is CLUSTER_AUTHORIZATION_FAILED and the named
partitions come back bare, with no replicas (``ListPartitionReassignmentsRequest.getErrorResponse``)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.auth_helper import authorize_cluster, not_authorized_message
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)
async def handle_list_partition_reassignments_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.LIST_PARTITION_REASSIGNMENTS, request.api_version)
    if not authorize_cluster(apis, request, AclOperation.DESCRIBE):
        topic_cls = nested_type(cls, "OngoingTopicReassignment")
        partition_cls = nested_type(cls, "OngoingPartitionReassignment")
        named = tuple(
            build(
                topic_cls,
                name=t.name,
                partitions=tuple(
                    build(
                        partition_cls,
                        partition_index=p,
                        replicas=(),
                        adding_replicas=(),
                        removing_replicas=(),
                    )
                    for p in t.partition_indexes
                ),
            )
            for t in body.topics or ()
        )
        return build(
            cls,
            throttle_time=ZERO_DELAY,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=not_authorized_message(request),
            topics=named,
        )
    return build(cls, throttle_time=ZERO_DELAY, error_code=ErrorCode.none, error_message=None, topics=())
