"""AlterReplicaLogDirs (34), v1-v2 (Kafka's ``ReplicaManager.alterReplicaLogDirs``): move a replica
to another of the broker's log dirs. kafkalog has one log dir, so the only move it can be asked is
to where the replica already is, which Kafka answers NONE without doing anything; any other path is
LOG_DIR_NOT_FOUND (compared as Kafka compares it: the exact absolute path), checked before the
partition, and a partition this broker does not have is REPLICA_NOT_AVAILABLE. A topic name too long
for the ``<topic>-<partition>.<id>-future`` directory a move would create is INVALID_TOPIC_EXCEPTION
(KAFKA-4893), as in Kafka, whatever the destination.

Needs ALTER on the cluster: otherwise every partition named gets CLUSTER_AUTHORIZATION_FAILED, listed
as the request lists them (``AlterReplicaLogDirsRequest.getErrorResponse``)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.auth_helper import authorize_cluster
from kafkalog.broker.handlers import handles
from kafkalog.broker.handlers.describe_log_dirs import log_dir_path
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

# Kafka's future-log directory name: "<topic>-<partition>.<32 hex digits>-future".
_FUTURE_DIR_SUFFIX = len(".") + 32 + len("-future")
_MAX_DIR_NAME = 255


def _error(apis: Any, topic: str, partition: int, destination: str) -> ErrorCode:
    if len(f"{topic}-{partition}") + _FUTURE_DIR_SUFFIX > _MAX_DIR_NAME:
        return ErrorCode.invalid_topic_exception
    if destination != log_dir_path(apis):
        return ErrorCode.log_dir_not_found
    if not apis.log_manager.has_topic(topic) or partition not in apis.log_manager.partitions(topic):
        return ErrorCode.replica_not_available
    return ErrorCode.none


@handles(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2)
async def handle_alter_replica_log_dirs_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.ALTER_REPLICA_LOG_DIRS, request.api_version)
    topic_cls = nested_type(cls, "AlterReplicaLogDirTopicResult")
    partition_cls = nested_type(cls, "AlterReplicaLogDirPartitionResult")
    if not authorize_cluster(apis, request, AclOperation.ALTER):
        denied = ErrorCode.cluster_authorization_failed
        refused = tuple(
            build(
                topic_cls,
                topic_name=topic.name,
                partitions=tuple(
                    build(partition_cls, partition_index=p, error_code=denied) for p in topic.partitions
                ),
            )
            for log_dir in body.dirs
            for topic in log_dir.topics
        )
        return build(cls, throttle_time=ZERO_DELAY, results=refused)
    # Kafka reads the request as a map partition -> destination: a partition named under two
    # directories is answered once, for the last.
    destinations: dict[tuple[str, int], str] = {}
    for log_dir in body.dirs:
        for topic in log_dir.topics:
            for partition in topic.partitions:
                destinations[(topic.name, int(partition))] = log_dir.path
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), destination in destinations.items():
        by_topic.setdefault(topic, []).append(
            build(
                partition_cls,
                partition_index=partition,
                error_code=_error(apis, topic, partition, destination),
            )
        )
    results = tuple(build(topic_cls, topic_name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    return build(cls, throttle_time=ZERO_DELAY, results=results)
