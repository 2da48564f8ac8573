"""OffsetDelete (47), v0 (Kafka's ``handleOffsetDeleteRequest``, KIP-496): remove a group's committed
offsets (tombstones in ``__consumer_offsets``). GROUP_ID_NOT_FOUND for a group the coordinator does not
know; a partition of a topic that a live member of the group subscribes to keeps its offset and gets
GROUP_SUBSCRIBED_TO_TOPIC; a partition of a topic that does not exist, UNKNOWN_TOPIC_OR_PARTITION.

Authorization (KafkaApis): DELETE on the group, else GROUP_AUTHORIZATION_FAILED for the request
before anything is looked at; then READ on each topic, else TOPIC_AUTHORIZATION_FAILED for each of
its partitions, before the partition is looked for."""

from __future__ import annotations

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
    group = coordinator.groups.get(group_id)
    active = group is not None and state in ("Stable", "PreparingRebalance", "CompletingRebalance")
    if active and group is not None and group.protocol_type != "consumer":
        # Kafka's validateOffsetDelete: only a consumer group says which topics it reads
        return _refused(cls, ErrorCode.non_empty_group)
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
            elif active and group is not None and group.is_subscribed_to_topic(topic.name):
                # the topics of the generation (an unreadable subscription covers every topic)
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
