"""WriteTxnMarkers (27), v1-v2 (Kafka's ``handleWriteTxnMarkersRequest``): append COMMIT/ABORT markers
to partitions this node leads. Kafka's coordinators send it to other brokers; kafkalog's own
coordinator appends directly, so what arrives here is an operator's abort of a hanging transaction
(KIP-664: the Java and kafka-python admin ``abort_transaction``). Per partition:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH for an epoch older than the producer's, and
TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the producer's last marker.

Needs ALTER on the cluster (an operator, KIP-664) or CLUSTER_ACTION (a broker): otherwise every
partition of every marker gets CLUSTER_AUTHORIZATION_FAILED and nothing is written."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize, authorize_cluster
from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import RequestContext, build, nested_type
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.WRITE_TXN_MARKERS, 1, 2)
async def handle_write_txn_markers_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.WRITE_TXN_MARKERS, request.api_version)
    marker_cls = nested_type(cls, "WritableTxnMarkerResult")
    topic_cls = nested_type(cls, "WritableTxnMarkerTopicResult")
    partition_cls = nested_type(cls, "WritableTxnMarkerPartitionResult")
    writer = transaction_coordinator(apis).marker_writer
    # ALTER is asked quietly: a broker holding CLUSTER_ACTION only is no denial worth logging.
    allowed = authorize(
        apis, request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ) or authorize_cluster(apis, request, AclOperation.CLUSTER_ACTION)
    results = []
    for marker in body.markers:
        commit = bool(marker.transaction_result)
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                error = ErrorCode.cluster_authorization_failed
                if allowed:
                    try:
                        writer.write_marker(
                            int(marker.producer_id),
                            int(marker.producer_epoch),
                            commit,
                            int(marker.coordinator_epoch),
                            topic.name,
                            int(index),
                        )
                        error = ErrorCode.none
                    except KafkaLogError as e:
                        error = error_code_for(e)
                partitions.append(partition_cls(partition_index=index, error_code=error))
            topics.append(topic_cls(name=topic.name, partitions=tuple(partitions)))
        results.append(marker_cls(producer_id=marker.producer_id, topics=tuple(topics)))
    return build(cls, markers=tuple(results))
