"""ListOffsets (2), v1-v11 (Kafka's ``handleListOffsetRequest`` → ``ReplicaManager.fetchOffset`` →
``Partition.fetchOffsetForTimestamp``): -2 earliest, -1 latest (the high watermark, or the last
stable offset for read_committed), -3 the record with the largest timestamp, -4 earliest local, -5
latest tiered and -6 earliest pending upload (offset -1: no tiered storage); a timestamp ≥ 0 looks
up the first record at or after it through the time index. A found offset at or beyond what the
isolation level may read is "not found" (-1, -1), but for -2 and -4, as in Kafka
(``Log.fetch_offset_for_timestamp`` holds that rule; the Spark source asks it too).

As Kafka's ``ReplicaManager`` answers: a special timestamp needs the version that brought it (-3 v7,
-4 v8, -5 v9, -6 v11) and any other negative one is unknown -- UNSUPPORTED_VERSION for that
partition; a partition named twice gets INVALID_REQUEST; the authorized partitions come back one
entry per partition, grouped by topic.

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
from kafkalog.storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)

_READ_COMMITTED = 1
# Kafka's ReplicaManager.timestampMinSupportedVersion: the version that brought each special timestamp.
_MIN_VERSION = {
    EARLIEST_TIMESTAMP: 1,
    LATEST_TIMESTAMP: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11,
}
_UNANSWERED = (-1, -1, -1)  # timestamp, offset and leader epoch of an error (buildErrorResponse)


def _unsupported(timestamp: int, version: int) -> bool:
    """``isListOffsetsTimestampUnsupported``."""
    return timestamp < 0 and (timestamp not in _MIN_VERSION or version < _MIN_VERSION[timestamp])


def _lookup(
    apis: Any, tp: TopicPartition, timestamp: int, isolation_level: int, current_leader_epoch: int
) -> tuple[ErrorCode, int, int, int]:
    """(error, timestamp, offset, leader epoch)."""
    try:
        partition_log = apis.replica_manager.get_log(tp, current_leader_epoch)
        fetchable = (
            partition_log.last_stable_offset
            if isolation_level == _READ_COMMITTED
            else partition_log.high_watermark
        )
        found = partition_log.fetch_offset_for_timestamp(timestamp, fetchable)
    except KafkaLogError as e:
        return error_code_for(e), -1, -1, -1
    if found is None:
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
    seen: set[tuple[str, int]] = set()
    duplicates: set[tuple[str, int]] = set()  # ListOffsetsRequest.duplicatePartitions, over all topics
    for topic in body.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            (duplicates if key in seen else seen).add(key)
    answered: dict[str, dict[int, Any]] = {}  # Kafka's statusByPartition, grouped by topic
    refused: list[Any] = []  # Kafka answers the unauthorized topics last, as they were asked
    for topic in body.topics:
        if topic.name not in describable:
            denied = ErrorCode.topic_authorization_failed
            refused.append(build(topic_cls, name=topic.name, partitions=tuple(
                build(partition_cls, partition_index=p.partition_index, error_code=denied, timestamp=-1,
                      offset=-1, leader_epoch=-1)
                for p in topic.partitions
            )))
            continue
        for p in topic.partitions:
            if (topic.name, p.partition_index) in duplicates:
                error, (timestamp, offset, epoch) = ErrorCode.invalid_request, _UNANSWERED
            elif _unsupported(p.timestamp, request.api_version):
                error, (timestamp, offset, epoch) = ErrorCode.unsupported_version, _UNANSWERED
            else:
                error, timestamp, offset, epoch = _lookup(
                    apis, TopicPartition(topic.name, p.partition_index), p.timestamp, isolation_level,
                    getattr(p, "current_leader_epoch", -1),
                )
            answered.setdefault(topic.name, {})[p.partition_index] = build(
                partition_cls,
                partition_index=p.partition_index,
                error_code=error,
                timestamp=timestamp,
                offset=offset,
                leader_epoch=epoch,
            )
    topics = [build(topic_cls, name=name, partitions=tuple(partitions.values()))
              for name, partitions in answered.items()]
    return build(cls, throttle_time=ZERO_DELAY, topics=(*topics, *refused))
