"""ElectLeaders (43), v0-v2 (the KRaft controller's ``ReplicationControlManager.electLeaders``): on
one node every partition's only replica is its leader and its preferred leader, so no election is
ever needed. A named partition is ELECTION_NOT_NEEDED (or UNKNOWN_TOPIC_OR_PARTITION); a request for
all partitions (null) leaves out those that need no election, as Kafka does, so it answers every
topic with no partitions. An election type other than preferred (0) or unclean (1) fails the whole
request with INVALID_REQUEST, each named partition carrying it (``ElectLeadersRequest.getErrorResponse``).
So does the lack of ALTER on the cluster, checked first: CLUSTER_AUTHORIZATION_FAILED.
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

PREFERRED, UNCLEAN = 0, 1
_NOT_NEEDED = "Leader election not needed for topic partition."


def _elect(apis: Any, topic: str, partition: int) -> tuple[ErrorCode, str | None]:
    if not apis.log_manager.has_topic(topic):
        return ErrorCode.unknown_topic_or_partition, f"No such topic as {topic}"
    if partition not in apis.log_manager.partitions(topic):
        return ErrorCode.unknown_topic_or_partition, f"No such partition as {topic}-{partition}"
    return ErrorCode.election_not_needed, _NOT_NEEDED


@handles(ApiKey.ELECT_LEADERS, 0, 2)
async def handle_elect_leaders_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.ELECT_LEADERS, request.api_version)
    topic_cls = nested_type(cls, "ReplicaElectionResult")
    partition_cls = nested_type(cls, "PartitionResult")
    election_type = int(getattr(body, "election_type", PREFERRED))  # v0 elects the preferred leader

    def failed(error: ErrorCode, message: str) -> Any:
        """The whole request refused, every named partition carrying the error."""
        results = tuple(
            build(
                topic_cls,
                topic=t.topic,
                partition_result=tuple(
                    build(partition_cls, partition_id=p, error_code=error, error_message=message)
                    for p in t.partitions
                ),
            )
            for t in body.topic_partitions or ()
        )
        return build(cls, throttle_time=ZERO_DELAY, error_code=error, replica_election_results=results)

    if not authorize_cluster(apis, request, AclOperation.ALTER):
        return failed(ErrorCode.cluster_authorization_failed, not_authorized_message(request))
    if election_type not in (PREFERRED, UNCLEAN):
        return failed(ErrorCode.invalid_request, f"Unknown election type {election_type}")
    results = []
    if body.topic_partitions is None:
        # Every partition has its preferred leader: each topic, with nothing to report.
        results = [build(topic_cls, topic=t, partition_result=()) for t in apis.metadata_cache.topics()]
    else:
        for t in body.topic_partitions:
            partitions = []
            for p in t.partitions:
                error, message = _elect(apis, t.topic, int(p))
                partitions.append(
                    build(partition_cls, partition_id=p, error_code=error, error_message=message)
                )
            results.append(build(topic_cls, topic=t.topic, partition_result=tuple(partitions)))
    return build(
        cls, throttle_time=ZERO_DELAY, error_code=ErrorCode.none, replica_election_results=tuple(results)
    )
