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
from kafkalog.broker.handlers.create_topics import manual_assignment_problem
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

log = logging.getLogger(__name__)


def _grow(apis: Any, topic: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
    # Kafka's ReplicationControlManager.createPartitions, its checks and texts
    cache = apis.metadata_cache
    if not cache.contains(topic.name):
        return ErrorCode.unknown_topic_or_partition, None
    current = cache.num_partitions(topic.name)
    if topic.count == current:
        return ErrorCode.invalid_partitions, f"Topic already has {current} partition(s)."
    if topic.count < current:
        return ErrorCode.invalid_partitions, (
            f"The topic {topic.name} currently has {current} partition(s); {topic.count} would not be an "
            "increase."
        )
    if topic.assignments is not None:
        additional = topic.count - current
        if len(topic.assignments) != additional:
            return ErrorCode.invalid_replica_assignment, (
                f"Attempted to add {additional} additional partition(s), but only {len(topic.assignments)} "
                "assignment(s) were specified."
            )
        for a in topic.assignments:
            message = manual_assignment_problem(apis.node_id, list(a.broker_ids), 1)
            if message is not None:
                return ErrorCode.invalid_replica_assignment, message
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
    # Kafka's ControllerApis order: a name given twice (one refusal each), then the unauthorized, then
    # the others.
    duplicates = [build(result_cls, name=name, error_code=ErrorCode.invalid_request,
                        error_message="Duplicate topic name.") for name, n in counts.items() if n > 1]
    for topic in body.topics:
        error: ErrorCode
        message: str | None
        if counts[topic.name] > 1:
            continue
        if topic.name not in alterable:
            unauthorized.append(
                build(
                    result_cls,
                    name=topic.name,
                    error_code=ErrorCode.topic_authorization_failed,
                    error_message=None,
                )
            )
            continue
        error, message = _grow(apis, topic, body.validate_only)
        results.append(build(result_cls, name=topic.name, error_code=error, error_message=message))
    return build(cls, throttle_time=ZERO_DELAY, results=(*duplicates, *unauthorized, *results))
