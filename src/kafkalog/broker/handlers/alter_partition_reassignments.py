"""AlterPartitionReassignments (45), v0-v1 (the KRaft controller's
``ReplicationControlManager.alterPartitionReassignments``), on a cluster of one node: the only
valid target of any partition is ``[this node]``, where it already is, so a valid request changes
nothing and answers NONE. Per partition, with Kafka's messages:

* a topic or partition this broker does not have: UNKNOWN_TOPIC_OR_PARTITION;
* a cancellation (null replicas): NO_REASSIGNMENT_IN_PROGRESS, since none ever is;
* with ``allow_replication_factor_change`` false (v1, KIP-860), a target of another size than the
  current replica set: INVALID_REPLICATION_FACTOR;
* an empty target, a broker id that is not registered (any but this node's), or a broker named
  twice: INVALID_REPLICA_ASSIGNMENT.

It needs ALTER on the cluster, checked first: otherwise the response's error and every partition's
are CLUSTER_AUTHORIZATION_FAILED (``AlterPartitionReassignmentsRequest.getErrorResponse``).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.auth_helper import authorize_cluster, not_authorized_message
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

_REPLICATION_FACTOR = 1  # every partition's replica set is this node alone
_MANUAL = "The manual partition assignment"


def _validate(
    apis: Any, topic: str, partition: int, replicas: Any, allow_rf_change: bool
) -> tuple[ErrorCode, str | None]:
    if not apis.log_manager.has_topic(topic):
        return ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {topic}."
    if partition not in apis.log_manager.partitions(topic):
        return ErrorCode.unknown_topic_or_partition, f"Unable to find partition {topic}:{partition}."
    if replicas is None:
        return ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress."
    if not allow_rf_change and len(replicas) != _REPLICATION_FACTOR:
        return (
            ErrorCode.invalid_replication_factor,
            f"The replication factor is changed from {_REPLICATION_FACTOR} to {len(replicas)}",
        )
    if not replicas:
        return ErrorCode.invalid_replica_assignment, f"{_MANUAL} includes an empty replica list."
    previous = None
    for broker in sorted(int(r) for r in replicas):
        if broker != apis.node_id:
            return (
                ErrorCode.invalid_replica_assignment,
                f"{_MANUAL} includes broker {broker}, but no such broker is registered.",
            )
        if broker == previous:
            return (
                ErrorCode.invalid_replica_assignment,
                f"{_MANUAL} includes the broker {broker} more than once.",
            )
        previous = broker
    return ErrorCode.none, None


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1)
async def handle_alter_partition_reassignments_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request.api_version)
    topic_cls = nested_type(cls, "ReassignableTopicResponse")
    partition_cls = nested_type(cls, "ReassignablePartitionResponse")
    allow_rf_change = getattr(body, "allow_replication_factor_change", True)
    refused: tuple[ErrorCode, str] | None = None
    if not authorize_cluster(apis, request, AclOperation.ALTER):
        refused = ErrorCode.cluster_authorization_failed, not_authorized_message(request)
    responses = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            error, message = refused or _validate(
                apis, topic.name, int(p.partition_index), p.replicas, allow_rf_change
            )
            partitions.append(
                build(
                    partition_cls, partition_index=p.partition_index, error_code=error, error_message=message
                )
            )
        responses.append(build(topic_cls, name=topic.name, partitions=tuple(partitions)))
    error, message = refused or (ErrorCode.none, None)
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        # Kafka's error response leaves the field at its default.
        allow_replication_factor_change=allow_rf_change or refused is not None,
        error_code=error,
        error_message=message,
        responses=tuple(responses),
    )
