"""CreatePartitions (37), v0-v3 (Kafka's ``createPartitions``): grow a topic to ``count``
partitions, never shrink it (INVALID_PARTITIONS); assignments may only name this node.

Each topic needs ALTER on it (Kafka 4's ``ControllerApis.createPartitions``), else
TOPIC_AUTHORIZATION_FAILED with no message, whether it exists or not; the refused come first, as
Kafka's controller answers them before the topics it grew."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.controller_limits import EXCESSIVE_BATCH_MESSAGE, exceeds_user_op_limit
from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

log = logging.getLogger(__name__)


def _grow(apis: Any, topic: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
    cache = apis.metadata_cache
    if not cache.contains(topic.name):
        return ErrorCode.unknown_topic_or_partition, f"The topic '{topic.name}' does not exist."
    current = cache.num_partitions(topic.name)
    if topic.count < current:
        return ErrorCode.invalid_partitions, (
            f"Topic currently has {current} partitions, which is higher than the requested {topic.count}."
        )
    if topic.count == current:
        return ErrorCode.invalid_partitions, f"Topic already has {current} partitions."
    if topic.assignments is not None:
        if len(topic.assignments) != topic.count - current:
            return ErrorCode.invalid_replica_assignment, (
                f"Increasing the number of partitions by {topic.count - current} but "
                f"{len(topic.assignments)} assignments provided."
            )
        if any(list(a.broker_ids) != [apis.node_id] for a in topic.assignments):
            return ErrorCode.invalid_replica_assignment, (
                f"Assignments may only name the only broker, {apis.node_id}."
            )
    if validate_only:
        return ErrorCode.none, None
    try:
        apis.log_manager.add_partitions(topic.name, topic.count)
    except KafkaLogError as e:
        return error_code_for(e), str(e)
    log.info("Topic %s now has %d partitions", topic.name, topic.count)
    return ErrorCode.none, None


@handles(ApiKey.CREATE_PARTITIONS, 0, 3)
async def handle_create_partitions_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.CREATE_PARTITIONS, request.api_version)
    result_cls = nested_type(cls, "CreatePartitionsTopicResult")
    counts = Counter(t.name for t in body.topics)
    cache = apis.metadata_cache
    # Duplicates are refused before, and without, authorization.
    alterable = {
        t.name
        for t in body.topics
        if counts[t.name] == 1 and authorize(apis, request, AclOperation.ALTER, ResourceType.TOPIC, t.name)
    }
    added = sum(
        max(0, t.count - cache.num_partitions(t.name))  # one PartitionRecord per new partition
        for t in body.topics
        if t.name in alterable and cache.contains(t.name)
    )
    if exceeds_user_op_limit(added):
        refused = (
            build(
                result_cls,
                name=t.name,
                error_code=ErrorCode.policy_violation,
                error_message=EXCESSIVE_BATCH_MESSAGE,
            )
            for t in body.topics
        )
        return build(cls, throttle_time=ZERO_DELAY, results=tuple(refused))
    unauthorized = []
    results = []
    for topic in body.topics:
        error: ErrorCode
        message: str | None
        if counts[topic.name] > 1:
            error, message = ErrorCode.invalid_request, "Duplicate topic in request."
        elif topic.name not in alterable:
            unauthorized.append(
                build(
                    result_cls,
                    name=topic.name,
                    error_code=ErrorCode.topic_authorization_failed,
                    error_message=None,
                )
            )
            continue
        else:
            error, message = _grow(apis, topic, body.validate_only)
        results.append(build(result_cls, name=topic.name, error_code=error, error_message=message))
    return build(cls, throttle_time=ZERO_DELAY, results=(*unauthorized, *results))
