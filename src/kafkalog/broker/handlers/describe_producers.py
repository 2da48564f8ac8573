"""DescribeProducers (61), v0 (KIP-664, Kafka's ``handleDescribeProducersRequest``): the producers a
partition's producer state knows — id, epoch, last sequence and timestamp, the coordinator epoch of
their last marker and where their open transaction started (-1: none). This is how an operator finds
a hanging transaction; UNKNOWN_TOPIC_OR_PARTITION for a partition the broker does not have.

Per topic, in Kafka's order: an invalid name is INVALID_TOPIC_EXCEPTION; then, with an authorizer,
the topic needs READ (not DESCRIBE: producer state is about the data), else every partition is
TOPIC_AUTHORIZATION_FAILED whether the topic exists or not."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorization_failed_message, authorize
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.errors import InvalidTopicError, UnknownTopicOrPartitionError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type
from kafkalog.storage.log_file_utils import validate_topic_name


def _topic_error(apis: Any, request: RequestContext, name: str) -> tuple[ErrorCode, str] | None:
    """What fails every partition of the topic (Kafka's ``checkValidTopic``, then READ), if anything."""
    try:
        validate_topic_name(name)
    except InvalidTopicError as e:
        return ErrorCode.invalid_topic_exception, str(e)
    if not authorize(apis, request, AclOperation.READ, ResourceType.TOPIC, name):
        error = ErrorCode.topic_authorization_failed
        return error, authorization_failed_message(error)
    return None


@handles(ApiKey.DESCRIBE_PRODUCERS, 0, 0)
async def handle_describe_producers_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DESCRIBE_PRODUCERS, request.api_version)
    topic_cls = nested_type(cls, "TopicResponse")
    partition_cls = nested_type(cls, "PartitionResponse")
    state_cls = nested_type(cls, "ProducerState")
    topics = []
    for topic in body.topics:
        partitions = []
        topic_error = _topic_error(apis, request, topic.name)
        for index in topic.partition_indexes:
            if topic_error is not None:
                error, message = topic_error
                partitions.append(
                    partition_cls(
                        partition_index=index, error_code=error, error_message=message, active_producers=()
                    )
                )
                continue
            try:
                producers = apis.log_manager.get_log(topic.name, int(index)).producer_state.producers
            except UnknownTopicOrPartitionError:
                # Kafka's texts: the error's own for an unknown topic, none for an unknown partition
                text = (None if apis.log_manager.has_topic(topic.name)
                        else "This server does not host this topic-partition.")
                partitions.append(
                    partition_cls(
                        partition_index=index,
                        error_code=ErrorCode.unknown_topic_or_partition,
                        error_message=text,
                        active_producers=(),
                    )
                )
                continue
            partitions.append(
                partition_cls(
                    partition_index=index,
                    error_code=ErrorCode.none,
                    error_message=None,
                    active_producers=tuple(
                        state_cls(
                            producer_id=entry.producer_id,
                            producer_epoch=entry.producer_epoch,
                            last_sequence=entry.last_seq,
                            last_timestamp=entry.last_timestamp,
                            coordinator_epoch=entry.coordinator_epoch,
                            current_txn_start_offset=(
                                -1
                                if entry.current_txn_first_offset is None
                                else entry.current_txn_first_offset
                            ),
                        )
                        for _, entry in sorted(producers.items())
                    ),
                )
            )
        topics.append(topic_cls(name=topic.name, partitions=tuple(partitions)))
    return build(cls, throttle_time=ZERO_DELAY, topics=tuple(topics))
