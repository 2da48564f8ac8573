"""OffsetForLeaderEpoch (23), v2-v4: the end offset of a leader epoch from the partition's
leader-epoch cache (Kafka's ``LeaderEpochFileCache.endOffsetFor``); consumers use it to validate a
position after a leader change (KIP-320).

With an authorizer: CLUSTER_ACTION on the cluster (a follower's right) covers every topic; without
it each topic needs DESCRIBE, the others' partitions get TOPIC_AUTHORIZATION_FAILED and come after the
authorized ones, as in Kafka's ``handleOffsetForLeaderEpochRequest``."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize, authorized_names
from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.handlers import handles
from kafkalog.broker.replica_manager import TopicPartition
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

UNDEFINED = -1


def _lookup(
    apis: Any, tp: TopicPartition, epoch: int, current_leader_epoch: int
) -> tuple[ErrorCode, int, int]:
    try:
        found = apis.replica_manager.get_log(tp, current_leader_epoch).end_offset_for_epoch(epoch)
    except KafkaLogError as e:
        return error_code_for(e), UNDEFINED, UNDEFINED
    return (ErrorCode.none, *found) if found is not None else (ErrorCode.none, UNDEFINED, UNDEFINED)


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4)
async def handle_offset_for_leader_epoch_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.OFFSET_FOR_LEADER_EPOCH, request.api_version)
    topic_cls = nested_type(cls, "OffsetForLeaderTopicResult")
    partition_cls = nested_type(cls, "EpochEndOffset")
    describable = _describable(apis, request, body.topics)
    topics: list[Any] = []
    refused: list[Any] = []  # Kafka answers the unauthorized topics last
    for topic in body.topics:
        allowed = describable is None or topic.topic in describable
        partitions = []
        for p in topic.partitions:
            if allowed:
                error, epoch, end = _lookup(apis, TopicPartition(topic.topic, p.partition), p.leader_epoch,
                                            p.current_leader_epoch)
            else:
                error, epoch, end = ErrorCode.topic_authorization_failed, UNDEFINED, UNDEFINED
            partitions.append(
                build(
                    partition_cls, error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end
                )
            )
        result = build(topic_cls, topic=topic.topic, partitions=tuple(partitions))
        (topics if allowed else refused).append(result)
    return build(cls, throttle_time=ZERO_DELAY, topics=(*topics, *refused))


def _describable(apis: Any, request: RequestContext, topics: Any) -> set[str] | None:
    """The topics the request may ask about; None: all of them. Followers ask with CLUSTER_ACTION,
    consumers (KIP-320) with DESCRIBE on the topic; a denied CLUSTER_ACTION is no news to log."""
    if authorize(
        apis, request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ):
        return None
    names = (t.topic for t in topics)
    return authorized_names(apis, request, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
