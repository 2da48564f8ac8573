"""DescribeQuorum (55), v0-v2 (Kafka's ``KafkaRaftClient.handleDescribeQuorumRequest``, reached on a
broker through ``forwardToControllerOrFail``): the KRaft quorum of the metadata partition
``__cluster_metadata``-0.

A kafkalog node is a cluster of one that is its own controller (DescribeCluster says so), and it
keeps its metadata in files of the data directory, not in a Raft log. So the answer describes that
quorum as it is: this node the only voter and the leader, in epoch 1 (there has never been another
voter to hold an election against), no observers, and an empty metadata log — high watermark and
the voter's end offset 0. As in Kafka, the leader's last fetch and last caught-up times are now;
from v2 the voter carries no directory id (kafkalog has no metadata log directory) and ``nodes``
lists this node with its listeners.

Kafka answers only a request for exactly that one partition; anything else gets
UNKNOWN_TOPIC_OR_PARTITION on every partition asked about. It needs DESCRIBE on the cluster
(``ControllerApis.handleDescribeQuorum``): otherwise CLUSTER_AUTHORIZATION_FAILED for the request."""

from __future__ import annotations

import time
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.auth_helper import authorize_cluster, not_authorized_message
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

METADATA_TOPIC = "__cluster_metadata"
_LEADER_EPOCH = 1
_METADATA_LOG_END = 0  # metadata lives in files (docs/FORMAT.md §7), not in a Raft log
_NO_DIRECTORY_ID = uuid.UUID(int=0)
_UNKNOWN = "This server does not host this topic-partition."


def _asks_for_the_metadata_partition(body: Any) -> bool:
    """Kafka's ``RaftUtil.hasValidTopicPartition``: one topic, ``__cluster_metadata``, and in it one
    partition, 0."""
    topics = body.topics
    return (
        len(topics) == 1
        and topics[0].topic_name == METADATA_TOPIC
        and len(topics[0].partitions) == 1
        and topics[0].partitions[0].partition_index == 0
    )


@handles(ApiKey.DESCRIBE_QUORUM, 0, 2)
async def handle_describe_quorum_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DESCRIBE_QUORUM, request.api_version)
    topic_cls = nested_type(cls, "TopicData")
    partition_cls = nested_type(cls, "PartitionData")
    if not authorize_cluster(apis, request, AclOperation.DESCRIBE):
        return build(
            cls,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=not_authorized_message(request),
            topics=(),
            nodes=(),
        )
    if not _asks_for_the_metadata_partition(body):
        # DescribeQuorumRequest.getPartitionLevelErrorResponse: every partition asked about
        topics = tuple(
            build(
                topic_cls,
                topic_name=t.topic_name,
                partitions=tuple(
                    build(
                        partition_cls,
                        partition_index=p.partition_index,
                        error_code=ErrorCode.unknown_topic_or_partition,
                        error_message=_UNKNOWN,
                        leader_id=0,
                        leader_epoch=0,
                        high_watermark=0,
                        current_voters=(),
                        observers=(),
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        )
        return build(cls, error_code=ErrorCode.none, error_message=None, topics=topics, nodes=())
    now_ms = int(time.time() * 1000)
    node = apis.node_id
    voter = build(
        nested_type(cls, "ReplicaState"),
        replica_id=node,
        replica_directory_id=_NO_DIRECTORY_ID,
        log_end_offset=_METADATA_LOG_END,
        last_fetch_timestamp=now_ms,
        last_caught_up_timestamp=now_ms,
    )
    partition = build(
        partition_cls,
        partition_index=0,
        error_code=ErrorCode.none,
        error_message=None,
        leader_id=node,
        leader_epoch=_LEADER_EPOCH,
        high_watermark=_METADATA_LOG_END,
        current_voters=(voter,),
        observers=(),
    )
    nodes: tuple[Any, ...] = ()
    if request.api_version >= 2:  # KIP-853: the voters' endpoints
        listener_cls = nested_type(cls, "Listener")
        listeners = tuple(
            build(listener_cls, name=name, host=e.host, port=e.port)
            for name, e in sorted(apis.endpoints.items())
        )
        nodes = (build(nested_type(cls, "Node"), node_id=node, listeners=listeners),)
    return build(
        cls,
        error_code=ErrorCode.none,
        error_message=None,
        topics=(build(topic_cls, topic_name=METADATA_TOPIC, partitions=(partition,)),),
        nodes=nodes,
    )
