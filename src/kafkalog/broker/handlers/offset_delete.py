"""OffsetDelete (47), v0 (Kafka's ``handleOffsetDeleteRequest``, KIP-496): remove a group's committed
offsets (tombstones in ``__consumer_offsets``). GROUP_ID_NOT_FOUND for a group the coordinator does not
know; a partition of a topic that a live member of the group subscribes to keeps its offset and gets
GROUP_SUBSCRIBED_TO_TOPIC; a partition of a topic that does not exist, UNKNOWN_TOPIC_OR_PARTITION.

Authorization (KafkaApis): DELETE on the group, else GROUP_AUTHORIZATION_FAILED for the request
before anything is looked at; then READ on each topic, else TOPIC_AUTHORIZATION_FAILED for each of
its partitions, before the partition is looked for."""

from __future__ import annotations

import struct
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.group.coordinator_of import group_coordinator
from kafkalog.broker.group.manager_of import group_metadata_manager
from kafkalog.broker.handlers import handles
from kafkalog.broker.handlers.offset_commit import commit_response_topics, readable_topics
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


def subscribed_topics(subscription: bytes) -> set[str]:
    """Topics of a ConsumerProtocol subscription (int16 version, [string] topics, …); empty when it
    is not one (another protocol type's metadata is opaque)."""
    try:
        (count,) = struct.unpack_from(">i", subscription, 2)
        pos, topics = 6, set()
        for _ in range(max(0, min(count, len(subscription)))):
            (n,) = struct.unpack_from(">h", subscription, pos)
            topics.add(subscription[pos + 2 : pos + 2 + n].decode())
            pos += 2 + n
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()


def _refused(cls: type[Any], error: ErrorCode) -> Any:
    """The answer to a request refused as a whole: a top-level error and no topics."""
    return build(cls, error_code=error, throttle_time=ZERO_DELAY, topics=())


@handles(ApiKey.OFFSET_DELETE, 0, 0)
async def handle_offset_delete_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.OFFSET_DELETE, request.api_version)
    topic_cls = nested_type(cls, "OffsetDeleteResponseTopic")
    partition_cls = nested_type(cls, "OffsetDeleteResponsePartition")
    manager = group_metadata_manager(apis)
    coordinator = group_coordinator(apis)
    group_id = body.group_id
    if not authorize(apis, request, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return _refused(cls, ErrorCode.group_authorization_failed)
    state = coordinator.group_state(group_id)
    if state is None and not manager.has_offsets(group_id):
        return _refused(cls, ErrorCode.group_id_not_found)
    subscribed: set[str] = set()
    group = coordinator.groups.get(group_id)
    if group is not None and state in ("Stable", "PreparingRebalance", "CompletingRebalance"):
        if group.protocol_type != "consumer":
            # Kafka's validateOffsetDelete: only a consumer group says which topics it reads
            return _refused(cls, ErrorCode.non_empty_group)
        # The topics of the current generation's protocol; a group rebalancing out of Empty has
        # none chosen yet, and (as in Kafka, whose subscription is then the empty one of the Empty
        # generation) nothing blocks the delete.
        if group.protocol_name is not None:
            for member in group:
                subscribed |= subscribed_topics(member.metadata(group.protocol_name))
    errors: dict[tuple[str, int], int] = {}
    deletable = []
    cache = apis.metadata_cache
    readable = readable_topics(apis, request, body.topics)
    for topic in body.topics:
        partitions = cache.num_partitions(topic.name) if cache.contains(topic.name) else 0
        for p in topic.partitions:
            tp = (topic.name, int(p.partition_index))
            if topic.name not in readable:
                errors[tp] = int(ErrorCode.topic_authorization_failed)
            elif not 0 <= tp[1] < partitions:  # checked before the group is, as KafkaApis does
                errors[tp] = int(ErrorCode.unknown_topic_or_partition)
            elif topic.name in subscribed:
                errors[tp] = int(ErrorCode.group_subscribed_to_topic)
            else:
                deletable.append(tp)
    errors.update(await manager.delete_offsets(group_id, deletable))
    return build(
        cls,
        error_code=ErrorCode.none,
        throttle_time=ZERO_DELAY,
        topics=commit_response_topics(body.topics, errors, topic_cls, partition_cls),
    )
