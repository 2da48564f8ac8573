"""DeleteRecords (21), v0-v2 (Kafka's ``handleDeleteRecordsRequest``): raise each partition's log
start offset to the requested offset (-1: the high watermark) and answer the new low watermark;
an offset beyond the high watermark is OFFSET_OUT_OF_RANGE. With an authorizer each topic needs
DELETE; the others' partitions get TOPIC_AUTHORIZATION_FAILED (low watermark -1) whether they exist
or not."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorized_names
from kafkalog.broker.handlers import handles
from kafkalog.broker.replica_manager import TopicPartition
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.DELETE_RECORDS, 0, 2)
async def handle_delete_records_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DELETE_RECORDS, request.api_version)
    topic_cls = nested_type(cls, "DeleteRecordsTopicResult")
    partition_cls = nested_type(cls, "DeleteRecordsPartitionResult")
    names = (t.name for t in body.topics)
    deletable = authorized_names(apis, request, AclOperation.DELETE, ResourceType.TOPIC, names)
    offsets = {
        TopicPartition(t.name, p.partition_index): p.offset
        for t in body.topics
        if t.name in deletable
        for p in t.partitions
    }
    results = apis.replica_manager.delete_records(offsets)
    results.update(
        (TopicPartition(t.name, p.partition_index), (ErrorCode.topic_authorization_failed, -1))
        for t in body.topics
        if t.name not in deletable
        for p in t.partitions
    )
    topics = []
    for t in body.topics:
        partitions = []
        for p in t.partitions:
            error, low_watermark = results[TopicPartition(t.name, p.partition_index)]
            partitions.append(
                build(
                    partition_cls,
                    partition_index=p.partition_index,
                    low_watermark=low_watermark,
                    error_code=error,
                )
            )
        topics.append(build(topic_cls, name=t.name, partitions=tuple(partitions)))
    return build(cls, throttle_time=ZERO_DELAY, topics=tuple(topics))
