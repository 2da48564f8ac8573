"""DescribeTopicPartitions (75), v0 (KIP-966; Kafka's ``DescribeTopicPartitionsRequestHandler`` and
``KRaftMetadataCache.describeTopicResponse``): topics and their partitions, paged.

Topics go in name order, from the cursor's topic on (all topics when the request names none). A
response holds at most ``response_partition_limit`` partitions (capped by the broker's
``max.request.partition.size.limit``, 2000, and at least 1); when a topic's partitions do not all fit,
or the limit is reached before the next topic, ``next_cursor`` says where the next request starts.
A named topic that does not exist gets UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
invalid name); a cursor whose topic is not among those named, or whose partition is negative, gets
INVALID_REQUEST for every named topic. No authorizer: every topic's authorized operations are all a topic's.

A topic needs DESCRIBE (Kafka's ``DescribeTopicPartitionsRequestHandler``), decided as the pages are
filled: listing all topics, the others are skipped; asked by name, they are answered last with
TOPIC_AUTHORIZATION_FAILED and no id, whether they exist or not. A topic past the page's end is
not decided, so not answered.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import NOT_REQUESTED, authorize, authorized_operations
from kafkalog.broker.handlers import handles
from kafkalog.broker.handlers.metadata import led_partition
from kafkalog.broker.metadata_cache import ZERO_UUID
from kafkalog.broker.replica_manager import TopicPartition
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.errors import InvalidTopicError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type
from kafkalog.storage.log_file_utils import INTERNAL_TOPICS, validate_topic_name


def _missing_topic_error(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.unknown_topic_or_partition


@handles(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0)
async def handle_describe_topic_partitions_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DESCRIBE_TOPIC_PARTITIONS, request.api_version)
    topic_cls = nested_type(cls, "DescribeTopicPartitionsResponseTopic")
    partition_cls = nested_type(cls, "DescribeTopicPartitionsResponsePartition")
    cursor_cls = nested_type(cls, "Cursor")
    cache = apis.metadata_cache
    node = apis.node_id
    cursor = body.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not body.topics
    if fetch_all:
        names = {t for t in cache.topics() if t >= cursor_topic}
    else:
        names = {t.name for t in body.topics if t.name >= cursor_topic}
    # Kafka's InvalidRequestException here becomes the request's error response: every named topic
    # with INVALID_REQUEST (DescribeTopicPartitionsRequest.getErrorResponse).
    if (cursor is not None and not fetch_all and cursor.topic_name not in names) or (
        cursor is not None and cursor.partition_index < 0
    ):
        refused = tuple(
            build(
                topic_cls,
                error_code=ErrorCode.invalid_request,
                name=t.name,
                topic_id=ZERO_UUID,
                is_internal=False,
                partitions=(),
                topic_authorized_operations=NOT_REQUESTED,
            )
            for t in body.topics
        )
        return build(cls, throttle_time=ZERO_DELAY, topics=refused, next_cursor=None)
    remaining = max(
        min(apis.config.get_int("max.request.partition.size.limit"), body.response_partition_limit), 1
    )

    topics = []
    undescribable: list[Any] = []
    next_cursor = None
    for name in sorted(names):
        if not authorize(apis, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            if not fetch_all:
                undescribable.append(
                    build(
                        topic_cls,
                        error_code=ErrorCode.topic_authorization_failed,
                        name=name,
                        topic_id=ZERO_UUID,
                        is_internal=False,
                        partitions=(),
                        topic_authorized_operations=NOT_REQUESTED,
                    )
                )
            continue
        if remaining == 0:  # the previous topics filled the response: the next one starts the next
            next_cursor = build(cursor_cls, topic_name=name, partition_index=0)
            break
        if not cache.contains(name):
            if not fetch_all:
                topics.append(
                    build(
                        topic_cls,
                        error_code=_missing_topic_error(name),
                        name=name,
                        topic_id=ZERO_UUID,
                        is_internal=name in INTERNAL_TOPICS,
                        partitions=(),
                        topic_authorized_operations=authorized_operations(
                            apis, request, True, ResourceType.TOPIC, name
                        ),
                    )
                )
            continue
        count = cache.num_partitions(name)
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        upper = min(count, start + remaining)
        epoch_of = apis.replica_manager.leader_epoch
        partitions = tuple(led_partition(partition_cls, p, node, epoch_of(TopicPartition(name, p)))
                           for p in range(start, upper))
        topics.append(
            build(
                topic_cls,
                error_code=ErrorCode.none,
                name=name,
                topic_id=cache.topic_id(name),
                is_internal=name in INTERNAL_TOPICS,
                partitions=partitions,
                topic_authorized_operations=authorized_operations(
                    apis, request, True, ResourceType.TOPIC, name
                ),
            )
        )
        if upper < count:
            next_cursor = build(cursor_cls, topic_name=name, partition_index=upper)
            break
        remaining -= len(partitions)
    return build(cls, throttle_time=ZERO_DELAY, topics=(*topics, *undescribable), next_cursor=next_cursor)
