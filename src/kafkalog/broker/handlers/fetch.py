"""Fetch (1), v4-v18 (Kafka's ``handleFetchRequest``) for consumers: whole batches from each
requested offset, through ``ReplicaManager.fetch_messages`` (long-poll on ``max_wait_ms`` /
``min_bytes``), framed by ``kafkalog.protocol.fetch_response`` with the records as file regions.

Sessions (KIP-227) are not kept: a full fetch (session id 0) is answered with session id 0, which
every client takes as "sessionless"; an incremental one (a non-zero session id) gets
FETCH_SESSION_ID_NOT_FOUND so that the client starts over with a full fetch. Topics are named by id
from v13 (UNKNOWN_TOPIC_ID when unknown). Follower fetches (replica id ≥ 0) are not served. From
v16 a partition that fails with FENCED_LEADER_EPOCH (or NOT_LEADER_OR_FOLLOWER) names its current
leader and epoch, and the response that leader's endpoint (KIP-951), as Kafka's ``handleFetchRequest``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize_cluster, authorized_names, authorizer
from kafkalog.broker.handlers import handles
from kafkalog.broker.replica_manager import (
    FetchParams,
    FetchPartitionData,
    FetchPartitionInfo,
    TopicPartition,
)
from kafkalog.broker.request import RequestContext, millis
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.fetch_response import (
    FIRST_CURRENT_LEADER,
    FetchPartitionResult,
    FetchTopicResult,
    NodeEndpoint,
    encode_fetch_response,
)
from kafkalog.storage.log import FetchIsolation

_READ_COMMITTED = 1
# KafkaApis names the partition's current leader (KIP-951) for these errors, so that the client need
# not wait for a metadata refresh.
_NAMES_THE_LEADER = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


def _replica_id(body: Any) -> int:
    if hasattr(body, "replica_id"):
        return int(body.replica_id)
    state = getattr(body, "replica_state", None)
    return int(state.replica_id) if state is not None else -1


def _every_partition(version: int, body: Any, error: ErrorCode) -> Any:
    """Every requested partition with ``error`` (Kafka's ``FetchResponse.partitionResponse``)."""
    by_id = version >= 13
    topics = [
        FetchTopicResult(
            name=None if by_id else topic.topic,
            topic_id=topic.topic_id if by_id else None,
            partitions=[
                FetchPartitionResult(p.partition, error, -1, -1, -1, None, b"") for p in topic.partitions
            ],
        )
        for topic in body.topics
    ]
    return encode_fetch_response(version, topics)


def _unreadable(
    apis: Any, request: RequestContext, wanted: Sequence[tuple[TopicPartition, FetchPartitionInfo]]
) -> dict[TopicPartition, FetchPartitionData]:
    """TOPIC_AUTHORIZATION_FAILED for the partitions of the topics the request may not READ."""
    names = (tp.topic for tp, _ in wanted)
    readable = authorized_names(apis, request, AclOperation.READ, ResourceType.TOPIC, names)
    return {
        tp: FetchPartitionData(ErrorCode.topic_authorization_failed)
        for tp, _ in wanted
        if tp.topic not in readable
    }


@handles(ApiKey.FETCH, 4, 18)
async def handle_fetch_request(apis: Any, request: RequestContext, body: Any) -> Any:
    version = request.api_version
    session_id = getattr(body, "session_id", 0)  # from v7
    if session_id != 0:
        return encode_fetch_response(version, (), error_code=ErrorCode.fetch_session_id_not_found)
    if _replica_id(body) >= 0:
        if not authorize_cluster(apis, request, AclOperation.CLUSTER_ACTION):
            return _every_partition(version, body, ErrorCode.topic_authorization_failed)
        return encode_fetch_response(version, (), error_code=ErrorCode.unknown_server_error)
    cache = apis.metadata_cache
    by_id = version >= 13
    # Kafka's FetchRequest.fetchData is a LinkedHashMap by partition: one entry per partition, where
    # it was first named, with what was named for it last.
    named: dict[tuple[Any, int], TopicPartition | None] = {}  # (topic key, partition) -> None if unknown
    infos: dict[TopicPartition, FetchPartitionInfo] = {}
    unknown = False
    for topic in body.topics:
        if by_id:
            name = cache.topic_name(topic.topic_id)
            key: Any = topic.topic_id
        else:
            name = topic.topic
            key = name
        for p in topic.partitions:
            if name is None:
                unknown = True
                named[(key, p.partition)] = None
                continue
            tp = TopicPartition(name, p.partition)
            named[(key, p.partition)] = tp
            infos[tp] = FetchPartitionInfo(p.fetch_offset, p.partition_max_bytes,
                                           getattr(p, "current_leader_epoch", -1))
    wanted = list(infos.items())
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
    results: dict[TopicPartition, FetchPartitionData] = {}
    if authorizer(apis) is not None:  # without an authorizer, this is all that authorization costs
        results = _unreadable(apis, request, wanted)
        if results:
            wanted = [(tp, info) for tp, info in wanted if tp not in results]
    results.update(await apis.replica_manager.fetch_messages(params, wanted))
    topics: list[FetchTopicResult] = []
    leads = False  # whether a partition names its current leader (KIP-951, v16+)
    partitions: list[FetchPartitionResult] = []
    for (key, index), maybe_tp in named.items():
        data = results[maybe_tp] if maybe_tp is not None else FetchPartitionData(ErrorCode.unknown_topic_id)
        current_leader = None
        if version >= FIRST_CURRENT_LEADER and maybe_tp is not None and data.error in _NAMES_THE_LEADER:
            current_leader = (apis.node_id, apis.replica_manager.leader_epoch(maybe_tp))
            leads = True
        if not topics or key != (topics[-1].topic_id if by_id else topics[-1].name):
            # consecutive partitions of a topic share its entry (FetchResponse.toMessage)
            partitions = []
            topics.append(FetchTopicResult(name=None if by_id else key, topic_id=key if by_id else None,
                                           partitions=partitions))
        partitions.append(
            FetchPartitionResult(
                partition_index=index,
                error_code=data.error,
                high_watermark=data.high_watermark,
                last_stable_offset=data.last_stable_offset,
                log_start_offset=data.log_start_offset,
                aborted_transactions=data.aborted_transactions,
                records=data.records,
                current_leader=current_leader,
            )
        )
    endpoints: tuple[NodeEndpoint, ...] = ()
    if leads:  # the leader's endpoint on the listener the request came in on, as Metadata gives it
        endpoint = apis.endpoint_for(request)
        endpoints = (NodeEndpoint(apis.node_id, endpoint.host, endpoint.port, endpoint.rack),)
    return encode_fetch_response(version, topics, node_endpoints=endpoints)
