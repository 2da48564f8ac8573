"""CreateTopics (19), v2-v7 (Kafka's ``createTopics``): one node, so replication factor -1 or 1 and
assignments naming only this node; ``num_partitions`` -1 takes ``num.partitions``. Names and configs
are checked by ``LogManager.create_topic`` (Kafka's rules, the configs through ``LogConfig``), also
for ``validate_only``. From v5 a created topic's partition count, replication factor and configs come
back; from v7 its topic id."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.config_helper import describe_topic_configs
from kafkalog.broker.controller_limits import EXCESSIVE_BATCH_MESSAGE, exceeds_user_op_limit
from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.handlers import handles
from kafkalog.broker.metadata_cache import ZERO_UUID
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type
from kafkalog.storage.config import LogConfig
from kafkalog.storage.log_manager import LogManager

log = logging.getLogger(__name__)


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _partition_count(apis: Any, topic: Any) -> int:
    """How many partitions ``topic`` asks for, after the replication checks of one node."""
    node = apis.node_id
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise _Refused(
                ErrorCode.invalid_request,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        indexes = sorted(a.partition_index for a in topic.assignments)
        if indexes != list(range(len(indexes))):
            raise _Refused(
                ErrorCode.invalid_replica_assignment,
                f"Partitions in the replica assignment must be 0..{len(indexes) - 1}, got {indexes}",
            )
        for a in topic.assignments:
            if list(a.broker_ids) != [node]:
                raise _Refused(
                    ErrorCode.invalid_replica_assignment,
                    f"Replica assignment {list(a.broker_ids)} of partition {a.partition_index} "
                    f"names brokers other than the only broker, {node}",
                )
        return len(indexes)
    if topic.replication_factor not in (-1, 1):
        raise _Refused(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {topic.replication_factor} time(s): The target "
            f"replication factor of {topic.replication_factor} cannot be reached because only 1 "
            "broker(s) are registered.",
        )
    if topic.num_partitions == -1:
        return int(apis.config.num_partitions)
    if topic.num_partitions < 1:
        raise _Refused(
            ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value."
        )
    return int(topic.num_partitions)


def _configs(topic: Any) -> dict[str, str]:
    configs = {}
    for c in topic.configs:
        if c.value is None:
            raise _Refused(ErrorCode.invalid_config, f"Null value not supported for topic configs: {c.name}")
        configs[c.name] = c.value
    return configs


def _metadata_records(apis: Any, topics: Any, counts: Counter[str]) -> int:
    """How many metadata records Kafka's controller would write for the topics it can create: one
    per topic, per config and per partition."""
    records = 0
    for topic in topics:
        if counts[topic.name] > 1 or apis.metadata_cache.contains(topic.name):
            continue
        try:
            records += 1 + len(topic.configs) + _partition_count(apis, topic)
        except _Refused:
            continue
    return records


@handles(ApiKey.CREATE_TOPICS, 2, 7)
async def handle_create_topics_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.CREATE_TOPICS, request.api_version)
    result_cls = nested_type(cls, "CreatableTopicResult")
    config_cls = nested_type(cls, "CreatableTopicConfigs")
    log_manager: LogManager = apis.log_manager
    counts = Counter(t.name for t in body.topics)
    if exceeds_user_op_limit(_metadata_records(apis, body.topics, counts)):
        refused = tuple(
            build(
                result_cls,
                name=t.name,
                topic_id=ZERO_UUID,
                error_code=ErrorCode.policy_violation,
                error_message=EXCESSIVE_BATCH_MESSAGE,
                topic_config_error_code=0,
                num_partitions=-1,
                replication_factor=-1,
                configs=(),
            )
            for t in body.topics
        )
        return build(cls, throttle_time=ZERO_DELAY, topics=refused)
    results = []
    for topic in body.topics:
        error, message, partitions, config_entries = ErrorCode.none, None, -1, ()
        topic_id = ZERO_UUID
        try:
            if counts[topic.name] > 1:
                raise _Refused(
                    ErrorCode.invalid_request, f"Duplicate topic name {topic.name} in the request."
                )
            partitions = _partition_count(apis, topic)
            log_manager.create_topic(
                topic.name, partitions, _configs(topic), validate_only=body.validate_only
            )
            if not body.validate_only:
                apis.metadata_cache.invalidate()
                log.info(
                    "Created topic %s with %d partition(s) for %s",
                    topic.name,
                    partitions,
                    request.connection_id,
                )
                topic_id = apis.metadata_cache.topic_id(topic.name)
            if request.api_version >= 5:  # the created topic's configs come back from v5
                config = (
                    LogConfig.from_props(_configs(topic), log_manager.default_config)
                    if body.validate_only
                    else log_manager.topic_config(topic.name)
                )
                config_entries = tuple(
                    build(
                        config_cls,
                        name=e.name,
                        value=e.value,
                        read_only=e.read_only,
                        config_source=e.source,
                        is_sensitive=e.is_sensitive,
                    )
                    for e in describe_topic_configs(config, apis.config)
                )
        except _Refused as e:
            error, message, partitions = e.code, str(e), -1
        except KafkaLogError as e:
            error, message, partitions = error_code_for(e), str(e), -1
        results.append(
            build(
                result_cls,
                name=topic.name,
                topic_id=topic_id,
                error_code=error,
                error_message=message,
                topic_config_error_code=0,
                num_partitions=partitions,
                replication_factor=1 if error == ErrorCode.none else -1,
                configs=config_entries,
            )
        )
    return build(cls, throttle_time=ZERO_DELAY, topics=tuple(results))
