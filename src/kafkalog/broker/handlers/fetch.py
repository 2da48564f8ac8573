"""Fetch (1), v4-v18 (Kafka's ``handleFetchRequest``) for consumers: whole batches from each
requested offset, through ``ReplicaManager.fetch_messages`` (long-poll on ``max_wait_ms`` /
``min_bytes``), framed by ``kafkalog.protocol.fetch_response`` with the records as file regions.

Sessions (KIP-227) are not kept, as by a Kafka broker whose session cache is full: a full fetch
(session epoch 0 or -1, whatever session id it names) is answered with session id 0, which every
client takes as "sessionless"; an incremental one (epoch > 0) gets FETCH_SESSION_ID_NOT_FOUND so that
the client starts over with a full fetch. Topics are named by id from v13 (UNKNOWN_TOPIC_ID when
unknown). A partition of an unknown topic, one the client may not read, or one that does not exist
is answered after the others and does not cut a long-poll short, as Kafka's "erroneous" partitions.
This node has no followers: a replica's fetch (replica id ≥ 0) gets NOT_LEADER_OR_FOLLOWER (or
UNKNOWN_LEADER_EPOCH) per partition. ``fetch.max.bytes`` caps a request's ``max_bytes``. A partition
whose ``last_fetched_epoch`` (v12+) shows the fetcher's log diverged gets no records but the
``diverging_epoch`` to truncate to (Kafka's ``Partition.readRecords``). From v16 a
partition that fails with FENCED_LEADER_EPOCH (or NOT_LEADER_OR_FOLLOWER) names its current leader
and epoch, and the response that leader's endpoint (KIP-951), as Kafka's ``handleFetchRequest``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize_cluster, authorized_names, authorizer
from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.handlers import handles
from kafkalog.broker.replica_manager import (
    FetchParams,
    FetchPartitionData,
    FetchPartitionInfo,
    TopicPartition,
)
from kafkalog.broker.request import RequestContext, millis
from kafkalog.errors import KafkaLogError
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


def _follower_fetch(
    apis: Any, wanted: Sequence[tuple[TopicPartition, FetchPartitionInfo]]
) -> dict[TopicPartition, FetchPartitionData]:
    """A fetch from a replica (replica id >= 0): this node has no followers, so each partition fails
    as Kafka's ``Partition.fetchRecords`` fails for a replica it does not know -- after the leader
    epoch check, UNKNOWN_LEADER_EPOCH when the request names one, else NOT_LEADER_OR_FOLLOWER."""
    results: dict[TopicPartition, FetchPartitionData] = {}
    for tp, info in wanted:
        try:
            apis.replica_manager.get_log(tp, max(info.current_leader_epoch, -1))
        except KafkaLogError as e:
            results[tp] = FetchPartitionData(error_code_for(e))
            continue
        epoch_given = info.current_leader_epoch >= 0
        results[tp] = FetchPartitionData(
            ErrorCode.unknown_leader_epoch if epoch_given else ErrorCode.not_leader_or_follower)
    return results


@handles(ApiKey.FETCH, 4, 18)
async def handle_fetch_request(apis: Any, request: RequestContext, body: Any) -> Any:
    version = request.api_version
    if getattr(body, "session_epoch", -1) not in (0, -1):  # from v7
        # An incremental fetch: no session is kept here, so whichever it names is not found, and the
        # client starts over with a full fetch (epoch 0 or -1, answered without a session).
        return encode_fetch_response(version, (), error_code=ErrorCode.fetch_session_id_not_found)
    follower = _replica_id(body) >= 0
    if follower and not authorize_cluster(apis, request, AclOperation.CLUSTER_ACTION):
        return _every_partition(version, body, ErrorCode.topic_authorization_failed)
    cache = apis.metadata_cache
    by_id = version >= 13
    # Kafka's FetchRequest.fetchData is a LinkedHashMap by partition: one entry per partition, where
    # it was first named, with what was named for it last.
    named: dict[tuple[Any, int], TopicPartition | None] = {}  # (topic key, partition) -> None if unknown
    infos: dict[TopicPartition, FetchPartitionInfo] = {}
    for topic in body.topics:
        if by_id:
            name = cache.topic_name(topic.topic_id)
            key: Any = topic.topic_id
        else:
            name = topic.topic
            key = name
        for p in topic.partitions:
            tp = None if name is None else TopicPartition(name, p.partition)
            named[(key, p.partition)] = tp
            if tp is not None:
                infos[tp] = FetchPartitionInfo(p.fetch_offset, p.partition_max_bytes,
                                               getattr(p, "current_leader_epoch", -1),
                                               getattr(p, "last_fetched_epoch", -1))
    # Kafka's "erroneous" partitions (an unknown topic id, a topic it may not read, a partition that
    # does not exist) are answered after the others and never hold a long-poll back.
    erroneous: dict[TopicPartition, FetchPartitionData] = {}
    if authorizer(apis) is not None and not follower:  # without one, this is all authorization costs
        erroneous = _unreadable(apis, request, list(infos.items()))
    for tp in infos:
        if tp not in erroneous and not cache.contains_partition(tp.topic, tp.partition):
            erroneous[tp] = FetchPartitionData(ErrorCode.unknown_topic_or_partition)
    wanted = [(tp, info) for tp, info in infos.items() if tp not in erroneous]
    isolation = (
        FetchIsolation.TXN_COMMITTED
        if getattr(body, "isolation_level", 0) == _READ_COMMITTED
        else FetchIsolation.HIGH_WATERMARK
    )
    # The broker's fetch.max.bytes caps what a request may ask for, and min_bytes with it.
    max_bytes = min(getattr(body, "max_bytes", 2**31 - 1), apis.config.get_int("fetch.max.bytes"))
    params = FetchParams(millis(body.max_wait), min(body.min_bytes, max_bytes), max_bytes, isolation)
    results = dict(erroneous)
    if follower:
        results.update(_follower_fetch(apis, wanted))
    else:
        results.update(await apis.replica_manager.fetch_messages(params, wanted))
    answered = {tp for tp, _ in wanted}
    ordered = sorted(named.items(), key=lambda item: item[1] not in answered)  # stable: request order kept
    topics: list[FetchTopicResult] = []
    leads = False  # whether a partition names its current leader (KIP-951, v16+)
    partitions: list[FetchPartitionResult] = []
    for (key, index), maybe_tp in ordered:
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
                diverging_epoch=data.diverging_epoch,
            )
        )
    endpoints: tuple[NodeEndpoint, ...] = ()
    if leads:  # the leader's endpoint on the listener the request came in on, as Metadata gives it
        endpoint = apis.endpoint_for(request)
        endpoints = (NodeEndpoint(apis.node_id, endpoint.host, endpoint.port, endpoint.rack),)
    return encode_fetch_response(version, topics, node_endpoints=endpoints)
