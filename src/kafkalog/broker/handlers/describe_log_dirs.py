"""DescribeLogDirs (35), v1-v4 (Kafka's ``handleDescribeLogDirsRequest`` and
``ReplicaManager.describeLogDirs``): the data directory — kafkalog's one log dir — with the size of
each partition's segments and, from v4, the total and usable bytes of its volume. This is how
``kafka-log-dirs.sh`` and the admin clients see where a broker keeps its data and how much.

A request naming no topics (null) describes every partition; otherwise only the named partitions
this broker has, and a topic none of whose named partitions is here is left out, as Kafka does.
The offset lag is Kafka's ``max(high watermark - log end offset, 0)``: 0 for a leader, which is
every log here; no log is ever a "future" one (no replica is moving between directories).

Needs DESCRIBE on the cluster: otherwise no log dir is described and, from v3, the response's error
is CLUSTER_AUTHORIZATION_FAILED (Kafka's ``handleDescribeLogDirsRequest``)."""

from __future__ import annotations

import os
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.auth_helper import authorize_cluster
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


def log_dir_path(apis: Any) -> str:
    """The data directory as Kafka names a log dir: its absolute path (symlinks not resolved)."""
    return os.path.abspath(apis.log_manager.data_dir)


def _volume_bytes(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding ``path``: Java's ``FileStore.getTotalSpace``
    and ``getUsableSpace`` (the blocks an unprivileged user may still take)."""
    stats = os.statvfs(path)
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


@handles(ApiKey.DESCRIBE_LOG_DIRS, 1, 4)
async def handle_describe_log_dirs_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DESCRIBE_LOG_DIRS, request.api_version)
    result_cls = nested_type(cls, "DescribeLogDirsResult")
    topic_cls = nested_type(cls, "DescribeLogDirsTopic")
    partition_cls = nested_type(cls, "DescribeLogDirsPartition")
    if not authorize_cluster(apis, request, AclOperation.DESCRIBE):
        return build(
            cls, throttle_time=ZERO_DELAY, error_code=ErrorCode.cluster_authorization_failed, results=()
        )
    wanted = None if body.topics is None else {(t.topic, int(p)) for t in body.topics for p in t.partitions}
    path = log_dir_path(apis)
    by_topic: dict[str, list[Any]] = {}
    for log in apis.log_manager.logs():
        if wanted is not None and (log.topic, log.partition) not in wanted:
            continue
        by_topic.setdefault(log.topic, []).append(
            build(
                partition_cls,
                partition_index=log.partition,
                partition_size=log.size_in_bytes,
                offset_lag=max(log.high_watermark - log.log_end_offset, 0),
                is_future_key=False,
            )
        )
    try:
        total, usable = _volume_bytes(path)
    except OSError:  # the directory went away under us: Kafka's answer for an offline log dir
        result = build(result_cls, error_code=ErrorCode.kafka_storage_error, log_dir=path, topics=())
    else:
        topics = tuple(
            build(topic_cls, name=topic, partitions=tuple(sorted(parts, key=lambda p: p.partition_index)))
            for topic, parts in sorted(by_topic.items())
        )
        result = build(
            result_cls,
            error_code=ErrorCode.none,
            log_dir=path,
            topics=topics,
            total_bytes=total,
            usable_bytes=usable,
        )
    return build(cls, throttle_time=ZERO_DELAY, error_code=ErrorCode.none, results=(result,))
