"""ListPartitionReassignments (46), v0 (``ReplicationControlManager.listPartitionReassignments``):
the reassignments in progress, for every partition (null) or the named ones. On one node none ever
is (see ``alter_partition_reassignments``), so the answer is always an empty list; Kafka, too,
passes over named topics it does not know rather than failing."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)
async def handle_list_partition_reassignments_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.LIST_PARTITION_REASSIGNMENTS, request.api_version)
    return build(cls, throttle_time=ZERO_DELAY, error_code=ErrorCode.none, error_message=None, topics=())
