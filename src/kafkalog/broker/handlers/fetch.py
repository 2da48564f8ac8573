"""Fetch (1), v4-v18 (Kafka's ``handleFetchRequest``) for consumers: whole batches from each
requested offset, through ``ReplicaManager.fetch_messages`` (long-poll on ``max_wait_ms`` /
``min_bytes``), framed by ``kafkalog.protocol.fetch_response`` with the records as file regions.

Sessions (KIP-227) are not kept: a full fetch (session id 0) is answered with session id 0, which
every client takes as "sessionless"; an incremental one (a non-zero session id) gets
FETCH_SESSION_ID_NOT_FOUND so that the client starts over with a full fetch. Topics are named by id
from v13 (UNKNOWN_TOPIC_ID when unknown). Follower fetches (replica id ≥ 0) are not served.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.handlers import handles
from kafkalog.broker.replica_manager import (
    FetchParams,
    FetchPartitionData,
    FetchPartitionInfo,
    TopicPartition,
)
from kafkalog.broker.request import RequestContext, millis
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.fetch_response import FetchPartitionResult, FetchTopicResult, encode_fetch_response
from kafkalog.storage.log import FetchIsolation

_READ_COMMITTED = 1


def _replica_id(body: Any) -> int:
    if hasattr(body, "replica_id"):
        return int(body.replica_id)
    state = getattr(body, "replica_state", None)
    return int(state.replica_id) if state is not None else -1


@handles(ApiKey.FETCH, 4, 18)
async def handle_fetch_request(apis: Any, request: RequestContext, body: Any) -> Any:
    version = request.api_version
    session_id = getattr(body, "session_id", 0)  # from v7
    if session_id != 0 or _replica_id(body) >= 0:
        error = ErrorCode.fetch_session_id_not_found if session_id != 0 else ErrorCode.unknown_server_error
        return encode_fetch_response(version, (), error_code=error)
    cache = apis.metadata_cache
    by_id = version >= 13
    wanted: list[tuple[TopicPartition, FetchPartitionInfo]] = []
    unknown: dict[tuple[int, int], Any] = {}  # (topic index, partition) -> the unknown topic id
    layout: list[tuple[Any, list[tuple[int, TopicPartition | None]]]] = []
    for ti, topic in enumerate(body.topics):
        if by_id:
            name = cache.topic_name(topic.topic_id)
            key: Any = topic.topic_id
        else:
            name = topic.topic
            key = name
        parts: list[tuple[int, TopicPartition | None]] = []
        for p in topic.partitions:
            if name is None:
                unknown[(ti, p.partition)] = topic.topic_id
                parts.append((p.partition, None))
                continue
            tp = TopicPartition(name, p.partition)
            wanted.append((tp, FetchPartitionInfo(p.fetch_offset, p.partition_max_bytes)))
            parts.append((p.partition, tp))
        layout.append((key, parts))
    isolation = (
        FetchIsolation.TXN_COMMITTED
        if getattr(body, "isolation_level", 0) == _READ_COMMITTED
        else FetchIsolation.HIGH_WATERMARK
    )
    params = FetchParams(
        millis(body.max_wait), body.min_bytes, getattr(body, "max_bytes", 2**31 - 1), isolation
    )
    if unknown:
        params = FetchParams(0, params.min_bytes, params.max_bytes, isolation)  # errors answer at once
    results = dict(await apis.replica_manager.fetch_messages(params, wanted))
    topics = []
    for key, parts in layout:
        partitions = []
        for index, maybe_tp in parts:
            data = (
                results[maybe_tp] if maybe_tp is not None else FetchPartitionData(ErrorCode.unknown_topic_id)
            )
            partitions.append(
                FetchPartitionResult(
                    partition_index=index,
                    error_code=data.error,
                    high_watermark=data.high_watermark,
                    last_stable_offset=data.last_stable_offset,
                    log_start_offset=data.log_start_offset,
                    aborted_transactions=data.aborted_transactions,
                    records=data.records,
                )
            )
        topics.append(
            FetchTopicResult(
                name=None if by_id else key, topic_id=key if by_id else None, partitions=partitions
            )
        )
    return encode_fetch_response(version, topics)
