"""OffsetFetch (9), v1-v9 (Kafka's ``handleOffsetFetchRequest``): the committed offset, leader epoch
and metadata of each asked partition, or of every partition the group committed (topics null, v2+);
-1 with no error where nothing is committed. From v8 a request asks for several groups. Offsets an open
transaction committed (TxnOffsetCommit) are not shown until it commits; with ``require_stable`` (v7+)
such a partition answers UNSTABLE_OFFSET_COMMIT instead, and the client retries (KIP-447).

Authorization (Kafka's ``handleOffsetFetchRequestFromCoordinator``), per group: DESCRIBE on the
group, else GROUP_AUTHORIZATION_FAILED for the group with no topics (before v8 the top-level error;
v1 has none, so it sees an empty answer). Offsets are shown only for topics the principal may
DESCRIBE: asked-for partitions of the others come last, -1 with TOPIC_AUTHORIZATION_FAILED; when
every partition is asked for, the others are left out."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize, filter_authorized
from kafkalog.broker.group.manager_of import group_metadata_manager
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

_NO_OFFSET = -1


def _group(
    apis: Any,
    request: RequestContext,
    group_id: str,
    topics: Any,
    topic_cls: Any,
    partition_cls: Any,
    require_stable: bool,
) -> tuple[ErrorCode, tuple[Any, ...]]:
    """One group's (error, topics)."""
    if not authorize(apis, request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, ()
    manager = group_metadata_manager(apis)
    denied: dict[str, list[int]] = {}
    if topics is None:  # every partition the group has an offset for
        stored = manager.get_offsets(group_id)
        wanted: dict[str, list[int]] = {}
        for topic, partition in sorted(stored):
            wanted.setdefault(topic, []).append(partition)
        allowed = _describable(apis, request, wanted)
        wanted = {t: ps for t, ps in wanted.items() if t in allowed}
    else:
        asked = {t.name: [int(p) for p in t.partition_indexes] for t in topics}
        allowed = _describable(apis, request, asked)
        wanted = {t: ps for t, ps in asked.items() if t in allowed}
        denied = {t: ps for t, ps in asked.items() if t not in allowed}
        stored = manager.get_offsets(group_id, [(t, p) for t, ps in wanted.items() for p in ps])
    out = []
    for topic, partitions in wanted.items():
        rows = []
        for partition in partitions:
            value = stored.get((topic, partition))
            unstable = require_stable and manager.has_pending_txn_offsets(group_id, (topic, partition))
            if unstable:
                value = None
            error = ErrorCode.unstable_offset_commit if unstable else ErrorCode.none
            rows.append(_partition(partition_cls, partition, value, error))
        out.append(build(topic_cls, name=topic, partitions=tuple(rows)))
    for topic, partitions in denied.items():
        rows = [_partition(partition_cls, p, None, ErrorCode.topic_authorization_failed) for p in partitions]
        out.append(build(topic_cls, name=topic, partitions=tuple(rows)))
    return ErrorCode.none, tuple(out)


def _partition(partition_cls: Any, partition: int, value: Any, error: ErrorCode) -> Any:
    return build(
        partition_cls,
        partition_index=partition,
        committed_offset=_NO_OFFSET if value is None else value.offset,
        committed_leader_epoch=-1 if value is None else value.leader_epoch,
        metadata="" if value is None else value.metadata,
        error_code=error,
    )


def _describable(apis: Any, request: RequestContext, topics: dict[str, list[int]]) -> set[str]:
    return set(filter_authorized(apis, request, AclOperation.DESCRIBE, ResourceType.TOPIC, topics))


@handles(ApiKey.OFFSET_FETCH, 1, 9)
async def handle_offset_fetch_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.OFFSET_FETCH, request.api_version)
    stable = bool(getattr(body, "require_stable", False))
    if request.api_version >= 8:
        group_cls = nested_type(cls, "OffsetFetchResponseGroup")
        topic_cls = nested_type(cls, "OffsetFetchResponseTopics")
        partition_cls = nested_type(cls, "OffsetFetchResponsePartitions")
        groups = []
        for g in body.groups:
            error, topics = _group(apis, request, g.group_id, g.topics, topic_cls, partition_cls, stable)
            groups.append(group_cls(group_id=g.group_id, topics=topics, error_code=error))
        return build(cls, throttle_time=ZERO_DELAY, groups=tuple(groups))
    topic_cls = nested_type(cls, "OffsetFetchResponseTopic")
    partition_cls = nested_type(cls, "OffsetFetchResponsePartition")
    error, topics = _group(apis, request, body.group_id, body.topics, topic_cls, partition_cls, stable)
    return build(cls, throttle_time=ZERO_DELAY, topics=topics, error_code=error)
