"""CreateTopics (19), v2-v7 (Kafka's ``createTopics``): one node, so replication factor -1 or 1 and
assignments naming only this node; ``num_partitions`` -1 takes ``num.partitions``. Names and configs
are checked by ``LogManager.create_topic`` (Kafka's rules, the configs through ``LogConfig``), also
for ``validate_only``. From v5 a created topic's partition count, replication factor and configs come
back; from v7 its topic id.

Authorization (Kafka 4's controller, ``ControllerApis.createTopics``): CREATE on the cluster, or on
the topic (a PREFIXED ACL lets a team create its own topics), else TOPIC_AUTHORIZATION_FAILED,
"Authorization failed.", whether the topic exists or not. A created topic's configs, partition
count and replication factor come back only with DESCRIBE_CONFIGS on it; otherwise its
``topic_config_error_code`` is TOPIC_AUTHORIZATION_FAILED. The metadata log's name,
``__cluster_metadata``, is INVALID_REQUEST whoever asks."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.config_helper import check_topic_config_for_this_broker, created_topic_configs
from kafkalog.broker.controller_limits import EXCESSIVE_BATCH_MESSAGE, exceeds_user_op_limit
from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.handlers import handles
from kafkalog.broker.metadata_cache import ZERO_UUID
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type
from kafkalog.storage.config import LogConfig
from kafkalog.storage.log_file_utils import validate_topic_name
from kafkalog.storage.log_manager import LogManager
from kafkalog.storage.partition_dirs import METADATA_TOPIC

log = logging.getLogger(__name__)


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def manual_assignment_problem(node_id: int, broker_ids: list[int], replicas: int | None) -> str | None:
    """What Kafka's ``validateManualPartitionAssignment`` says of one partition's replicas on a
    cluster of this one node (None: fine); ``replicas`` is the count the others have, if known."""
    brokers = sorted(broker_ids)
    if not brokers:
        return "The manual partition assignment includes an empty replica list."
    for i, broker in enumerate(brokers):
        if broker != node_id:
            return (f"The manual partition assignment includes broker {broker}, but no such broker is "
                    "registered.")
        if i and broker == brokers[i - 1]:
            return f"The manual partition assignment includes the broker {broker} more than once."
    if replicas is not None and len(brokers) != replicas:
        return (f"The manual partition assignment includes a partition with {len(brokers)} replica(s), but "
                f"this is not consistent with previous partitions, which have {replicas} replica(s).")
    return None


def _assigned_partitions(apis: Any, topic: Any) -> int:
    """A manual assignment's partition count, checked as Kafka's controller checks it
    (``ReplicationControlManager.createTopic`` and ``validateManualPartitionAssignment``)."""
    if topic.replication_factor != -1:
        raise _Refused(ErrorCode.invalid_request, "A manual partition assignment was specified, but "
                       "replication factor was not set to -1.")
    if topic.num_partitions != -1:
        raise _Refused(ErrorCode.invalid_request,
                       "A manual partition assignment was specified, but numPartitions was not set to -1.")
    seen: set[int] = set()
    replicas: int | None = None
    for a in topic.assignments:
        if a.partition_index in seen:
            raise _Refused(ErrorCode.invalid_replica_assignment,
                           f"Found multiple manual partition assignments for partition {a.partition_index}")
        seen.add(a.partition_index)
        message = manual_assignment_problem(apis.node_id, list(a.broker_ids), replicas)
        if message is not None:
            raise _Refused(ErrorCode.invalid_replica_assignment, message)
        replicas = len(a.broker_ids)
    if seen != set(range(len(seen))):
        raise _Refused(ErrorCode.invalid_replica_assignment,
                       "partitions should be a consecutive 0-based integer sequence")
    return len(seen)


def _partition_count(apis: Any, topic: Any) -> int:
    """How many partitions ``topic`` asks for, after the replication checks of one node (in Kafka's
    controller's order: a manual assignment, else the replication factor -- -1 is the broker's
    ``default.replication.factor`` -- and the partition count)."""
    if topic.assignments:
        return _assigned_partitions(apis, topic)
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise _Refused(ErrorCode.invalid_replication_factor,
                       "Replication factor must be larger than 0, or -1 to use the default value.")
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise _Refused(
            ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value."
        )
    replication = (apis.config.get_int("default.replication.factor") if topic.replication_factor == -1
                   else topic.replication_factor)
    if replication > 1:
        raise _Refused(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {replication} time(s): The target replication factor of "
            f"{replication} cannot be reached because only 1 broker(s) are registered.",
        )
    return int(apis.config.num_partitions) if topic.num_partitions == -1 else int(topic.num_partitions)


def _check_new_topic(apis: Any, topic: Any) -> None:
    """What Kafka's controller checks before the partitions: the name, that it is new, its configs."""
    validate_topic_name(topic.name)
    if apis.metadata_cache.contains(topic.name):
        raise _Refused(ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists.")
    check_topic_config_for_this_broker(LogConfig.from_props(_configs(topic), apis.log_manager.default_config))


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


def _authorized(apis: Any, request: RequestContext, names: set[str]) -> tuple[set[str], set[str]]:
    """(creatable, describable): the names the request may create — CREATE on the cluster or on the
    topic — and those whose configs it may see, DESCRIBE_CONFIGS on the topic (Kafka's
    ``ControllerApis.handleCreateTopics``; the cluster check and the configs check log no denial)."""
    t = ResourceType.TOPIC
    if authorize(apis, request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False):
        creatable = set(names)
    else:
        creatable = {n for n in names if authorize(apis, request, AclOperation.CREATE, t, n)}
    describable = {
        n for n in names if authorize(apis, request, AclOperation.DESCRIBE_CONFIGS, t, n, log_denied=False)
    }
    return creatable, describable


def _result(result_cls: type[Any], name: str, error: ErrorCode, message: str | None) -> Any:
    """A topic not created."""
    return build(
        result_cls,
        name=name,
        topic_id=ZERO_UUID,
        error_code=error,
        error_message=message,
        topic_config_error_code=0,
        num_partitions=-1,
        replication_factor=-1,
        configs=(),
    )


@handles(ApiKey.CREATE_TOPICS, 2, 7)
async def handle_create_topics_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.CREATE_TOPICS, request.api_version)
    result_cls = nested_type(cls, "CreatableTopicResult")
    config_cls = nested_type(cls, "CreatableTopicConfigs")
    log_manager: LogManager = apis.log_manager
    counts = Counter(t.name for t in body.topics)
    # Duplicates and the metadata log's name are answered before, and without, authorization.
    checked = {t.name for t in body.topics if counts[t.name] == 1 and t.name != METADATA_TOPIC}
    creatable, describable = _authorized(apis, request, checked)
    to_create = [t for t in body.topics if t.name in creatable]
    if exceeds_user_op_limit(_metadata_records(apis, to_create, counts)):
        # The controller fails the whole request: every topic carries the error.
        refused = tuple(
            _result(result_cls, t.name, ErrorCode.policy_violation, EXCESSIVE_BATCH_MESSAGE)
            for t in body.topics
        )
        return build(cls, throttle_time=ZERO_DELAY, topics=refused)
    results = []
    unauthorized = []  # answered after the others, as Kafka's controller appends them
    # Each name given more than once: one refusal, after the topics created (Kafka's ControllerApis).
    duplicates = [_result(result_cls, name, ErrorCode.invalid_request, "Duplicate topic name.")
                  for name, n in counts.items() if n > 1]
    for topic in body.topics:
        if counts[topic.name] > 1:
            continue
        if topic.name == METADATA_TOPIC:
            prohibited = f"Creation of internal topic {METADATA_TOPIC} is prohibited."
            results.append(_result(result_cls, topic.name, ErrorCode.invalid_request, prohibited))
            continue
        if topic.name in checked and topic.name not in creatable:
            unauthorized.append(
                _result(result_cls, topic.name, ErrorCode.topic_authorization_failed, "Authorization failed.")
            )
            continue
        error, message, partitions, config_entries = ErrorCode.none, None, -1, ()
        topic_id = ZERO_UUID
        try:
            _check_new_topic(apis, topic)
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
            if request.api_version >= 5 and topic.name in describable:
                # The created topic's configs come back from v5, to whom may describe them.
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
                    for e in created_topic_configs(config, apis.config, _configs(topic))
                )
        except _Refused as e:
            error, message, partitions = e.code, str(e), -1
        except KafkaLogError as e:
            error, message, partitions = error_code_for(e), str(e), -1
        created = error == ErrorCode.none
        # Without DESCRIBE_CONFIGS a created topic's configs, partition count and replication factor
        # are withheld, and say why.
        shown = created and topic.name in describable
        results.append(
            build(
                result_cls,
                name=topic.name,
                topic_id=topic_id,
                error_code=error,
                error_message=message,
                topic_config_error_code=ErrorCode.topic_authorization_failed if created and not shown else 0,
                num_partitions=partitions if shown else -1,
                replication_factor=1 if shown else -1,
                configs=config_entries,
            )
        )
    return build(cls, throttle_time=ZERO_DELAY, topics=(*results, *duplicates, *unauthorized))
