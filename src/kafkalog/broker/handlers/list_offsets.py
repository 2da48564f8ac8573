"""ListOffsets (2), v1-v11 (Kafka's ``handleListOffsetRequest`` → ``Partition.fetchOffsetForTimestamp``):
-2 earliest, -1 latest (the high watermark, or the last stable offset for read_committed), -3 the
record with the largest timestamp, -4 earliest local, -5 latest tiered; a timestamp ≥ 0 looks up the
first record at or after it through the time index. A found offset at or beyond what the isolation
level may read is "not found" (-1, -1), as in Kafka.

With an authorizer each topic needs DESCRIBE; the partitions of the others get
TOPIC_AUTHORIZATION_FAILED and come after the authorized ones, as in Kafka's response."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorized_names
from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.handlers import handles
from kafkalog.broker.replica_manager import TopicPartition
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type
from kafkalog.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

_READ_COMMITTED = 1


def _lookup(
    apis: Any, tp: TopicPartition, timestamp: int, isolation_level: int
) -> tuple[ErrorCode, int, int, int]:
    """(error, timestamp, offset, leader epoch)."""
    try:
        partition_log = apis.replica_manager.get_log(tp)
        fetchable = (
            partition_log.last_stable_offset
            if isolation_level == _READ_COMMITTED
            else partition_log.high_watermark
        )
        if timestamp == LATEST_TIMESTAMP:
            epoch = partition_log.latest_epoch
            return ErrorCode.none, -1, fetchable, epoch if epoch is not None else -1
        found = partition_log.offset_for_timestamp(timestamp)
    except KafkaLogError as e:
        return error_code_for(e), -1, -1, -1
    if found is None or (timestamp != EARLIEST_TIMESTAMP and found.offset >= fetchable):
        return ErrorCode.none, -1, -1, -1
    epoch = found.leader_epoch if found.leader_epoch is not None else -1
    return ErrorCode.none, found.timestamp, found.offset, epoch


@handles(ApiKey.LIST_OFFSETS, 1, 11)
async def handle_list_offset_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.LIST_OFFSETS, request.api_version)
    topic_cls = nested_type(cls, "ListOffsetsTopicResponse")
    partition_cls = nested_type(cls, "ListOffsetsPartitionResponse")
    isolation_level = getattr(body, "isolation_level", 0)
    names = (t.name for t in body.topics)
    describable = authorized_names(apis, request, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    topics: list[Any] = []
    refused: list[Any] = []  # Kafka answers the unauthorized topics last
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            if topic.name in describable:
                error, timestamp, offset, epoch = _lookup(
                    apis, TopicPartition(topic.name, p.partition_index), p.timestamp, isolation_level
                )
            else:
                error, timestamp, offset, epoch = ErrorCode.topic_authorization_failed, -1, -1, -1
            partitions.append(
                build(
                    partition_cls,
                    partition_index=p.partition_index,
                    error_code=error,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=epoch,
                )
            )
        result = build(topic_cls, name=topic.name, partitions=tuple(partitions))
        (topics if topic.name in describable else refused).append(result)
    return build(cls, throttle_time=ZERO_DELAY, topics=(*topics, *refused))
