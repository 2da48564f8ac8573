"""Metadata (3), v0-v13: this node as the only broker, controller and leader of every partition;
topic ids from v10; topics auto-created (``num.partitions``) when ``auto.create.topics.enable`` and
the request allow it (v4+; always before v4, as in Kafka).

With an authorizer (Kafka's ``handleTopicMetadataRequest``), a topic needs DESCRIBE: asked for all
topics, the others are left out; asked by name, a topic that may not be described is
TOPIC_AUTHORIZATION_FAILED (no id, whether it exists or not); asked by id, it keeps its id but not
its name (an id is no secret). Auto-creation needs CREATE on the cluster or on the topic, else
TOPIC_AUTHORIZATION_FAILED. The cluster's authorized operations (v8-v10) are 0 without DESCRIBE on it."""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkalog.broker.auth_helper import NOT_REQUESTED, authorize, authorize_cluster, authorized_operations
from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.group.manager_of import group_metadata_manager
from kafkalog.broker.group.offsets_topic import GROUP_METADATA_TOPIC_NAME
from kafkalog.broker.handlers import handles
from kafkalog.broker.metadata_cache import ZERO_UUID
from kafkalog.broker.replica_manager import TopicPartition
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.broker.txn.transaction_topic import TRANSACTION_STATE_TOPIC_NAME
from kafkalog.errors import InvalidTopicError, KafkaLogError, TopicExistsError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type
from kafkalog.storage.log_file_utils import INTERNAL_TOPICS, validate_topic_name

log = logging.getLogger(__name__)


def _unknown_topic_error(topic: str) -> ErrorCode:
    """A topic that does not exist, not to be created: INVALID_TOPIC_EXCEPTION when no topic could
    ever have its name (Kafka's ``Topic.validate`` in ``getTopicMetadata``)."""
    try:
        validate_topic_name(topic)
    except InvalidTopicError:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.unknown_topic_or_partition


def _maybe_create(apis: Any, topic: str) -> ErrorCode:
    try:
        # Internal topics with their coordinators' partition counts and configs, never num.partitions.
        if topic == GROUP_METADATA_TOPIC_NAME:
            group_metadata_manager(apis).ensure_topic()
            return ErrorCode.none
        if topic == TRANSACTION_STATE_TOPIC_NAME:
            transaction_coordinator(apis).state_manager.ensure_topic()
            return ErrorCode.none
        partitions = apis.config.num_partitions
        apis.log_manager.create_topic(topic, partitions)
        log.info("Auto-created topic %s with %d partition(s)", topic, partitions)
    except TopicExistsError:
        pass
    except KafkaLogError as e:
        log.info("Cannot auto-create topic %r: %s", topic, e)
        return error_code_for(e)
    return ErrorCode.none


def led_partition(partition_cls: Any, index: int, node: int, leader_epoch: int) -> Any:
    """A partition as Metadata and DescribeTopicPartitions describe it on one node: this node its
    leader (at ``leader_epoch``) and only replica, in sync; no eligible leader replicas (KIP-966)."""
    return build(
        partition_cls,
        error_code=ErrorCode.none,
        partition_index=index,
        leader_id=node,
        leader_epoch=leader_epoch,
        replica_nodes=(node,),
        isr_nodes=(node,),
        eligible_leader_replicas=(),
        last_known_elr=(),
        offline_replicas=(),
    )


def _failed_topic(
    topic_cls: Any, error: ErrorCode, name: str | None, topic_id: Any, is_internal: bool
) -> Any:
    """A topic answered with only an error: no partitions, no authorized operations."""
    return build(
        topic_cls,
        error_code=error,
        name=name,
        topic_id=topic_id or ZERO_UUID,
        is_internal=is_internal,
        partitions=(),
        topic_authorized_operations=NOT_REQUESTED,
    )


def _invalid_request_response(cls: Any, topic_cls: Any, requested: list[tuple[str | None, Any]]) -> Any:
    """Kafka's ``MetadataRequest.getErrorResponse``: every topic named ("" for null) with the error."""
    topics = tuple(
        _failed_topic(topic_cls, ErrorCode.invalid_request, name or "", topic_id, False)
        for name, topic_id in requested
    )
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        brokers=(),
        cluster_id=None,
        controller_id=-1,
        topics=topics,
        cluster_authorized_operations=NOT_REQUESTED,
        error_code=ErrorCode.none,
    )


@handles(ApiKey.METADATA, 0, 13)
async def handle_topic_metadata_request(apis: Any, request: RequestContext, body: Any) -> Any:
    version = request.api_version
    cls = response_type(ApiKey.METADATA, version)
    broker_cls = nested_type(cls, "MetadataResponseBroker")
    topic_cls = nested_type(cls, "MetadataResponseTopic")
    partition_cls = nested_type(cls, "MetadataResponsePartition")
    cache = apis.metadata_cache
    node = apis.node_id

    requested: list[tuple[str | None, Any]]  # (name, topic id) pairs
    all_topics = body.topics is None or (version == 0 and not body.topics)
    if all_topics:
        requested = [(name, None) for name in cache.topics()]
    else:
        requested = [(t.name, getattr(t, "topic_id", None)) for t in body.topics]
        if version < 12 and any(n is None or (i is not None and i != ZERO_UUID) for n, i in requested):
            # v10-v11 carry topic ids but may not use them (Kafka: INVALID_REQUEST for each topic).
            return _invalid_request_response(cls, topic_cls, requested)
        # Kafka answers a set: each topic once. Once any id is given, only the ids are looked up
        # (a name beside them is neither answered nor created).
        topic_ids = [i for _, i in requested if i is not None and i != ZERO_UUID]
        if topic_ids:
            requested = [(None, i) for i in dict.fromkeys(topic_ids)]
        else:
            requested = list(dict.fromkeys(requested))
    allow_create = apis.config.auto_create_topics_enable and getattr(body, "allow_auto_topic_creation", True)
    # Asked for from v8; the cluster's field lives in DescribeCluster from v11.
    include_topic_operations = getattr(body, "include_topic_authorized_operations", False)
    cluster_operations = NOT_REQUESTED
    if getattr(body, "include_cluster_authorized_operations", False):
        # a principal that may not describe the cluster learns none of its rights on it
        described = authorize_cluster(apis, request, AclOperation.DESCRIBE)
        cluster_operations = (
            authorized_operations(apis, request, True, ResourceType.CLUSTER, CLUSTER_NAME) if described else 0
        )
    may_create_any: bool | None = None  # CREATE on the cluster: asked once, when a creation needs it

    def may_create(topic: str) -> bool:
        nonlocal may_create_any
        if may_create_any is None:  # Kafka does not log this denial: CREATE on the topic may do
            may_create_any = authorize(
                apis, request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
            )
        return may_create_any or authorize(apis, request, AclOperation.CREATE, ResourceType.TOPIC, topic)

    topics = []
    for name, topic_id in requested:
        error = ErrorCode.none
        by_id = name is None
        if name is None:
            found = cache.topic_name(topic_id) if topic_id is not None and topic_id != ZERO_UUID else None
            if found is None:
                topics.append(_failed_topic(topic_cls, ErrorCode.unknown_topic_id, None, topic_id, False))
                continue
            name = found
        # Listing all topics, an undescribable one is simply not there: no denial worth logging.
        if not authorize(
            apis, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_denied=not all_topics
        ):
            if not all_topics:
                topics.append(
                    _failed_topic(
                        topic_cls,
                        ErrorCode.topic_authorization_failed,
                        None if by_id else name,
                        topic_id if by_id else None,
                        False,
                    )
                )
            continue
        if not cache.contains(name):
            if allow_create and not may_create(name):
                refused = ErrorCode.topic_authorization_failed
                topics.append(_failed_topic(topic_cls, refused, name, None, name in INTERNAL_TOPICS))
                continue
            error = _maybe_create(apis, name) if allow_create else _unknown_topic_error(name)
            if error == ErrorCode.none and not cache.contains(name):
                error = ErrorCode.unknown_topic_or_partition
        partitions: tuple[Any, ...] = ()
        if error == ErrorCode.none:
            epoch_of = apis.replica_manager.leader_epoch
            partitions = tuple(
                led_partition(partition_cls, p, node, epoch_of(TopicPartition(name, p)))
                for p in range(cache.num_partitions(name))
            )
        topics.append(
            build(
                topic_cls,
                error_code=error,
                name=name,
                topic_id=cache.topic_id(name) if error == ErrorCode.none else ZERO_UUID,
                is_internal=name in INTERNAL_TOPICS,
                partitions=partitions,
                topic_authorized_operations=authorized_operations(
                    apis, request, include_topic_operations, ResourceType.TOPIC, name
                ),
            )
        )
    endpoint = apis.endpoint_for(request)
    brokers = (build(broker_cls, node_id=node, host=endpoint.host, port=endpoint.port, rack=endpoint.rack),)
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        brokers=brokers,
        cluster_id=apis.cluster_id,
        controller_id=node,
        topics=tuple(topics),
        cluster_authorized_operations=cluster_operations,
        error_code=ErrorCode.none,
    )
