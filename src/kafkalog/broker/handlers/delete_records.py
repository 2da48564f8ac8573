"""DeleteRecords (21), v0-v2 (Kafka's ``handleDeleteRecordsRequest``): raise each partition's log
start offset to the requested offset (-1: the high watermark) and answer the new low watermark;
an offset beyond the high watermark is OFFSET_OUT_OF_RANGE."""

from __future__ import annotations

from typing import Any

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
    offsets = {TopicPartition(t.name, p.partition_index): p.offset for t in body.topics for p in t.partitions}
    results = apis.replica_manager.delete_records(offsets)
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
