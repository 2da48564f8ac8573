"""OffsetFetch (9), v1-v9 (Kafka's ``handleOffsetFetchRequest``): the committed offset, leader epoch
and metadata of each asked partition, or of every partition the group committed (topics null, v2+);
-1 with no error where nothing is committed. From v8 a request asks for several groups. Offsets an open
transaction committed (TxnOffsetCommit) are not shown until it commits; with ``require_stable`` (v7+)
such a partition answers UNSTABLE_OFFSET_COMMIT instead, and the client retries (KIP-447)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.group.manager_of import group_metadata_manager
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

_NO_OFFSET = -1


def _topics(manager: Any, group_id: str, topics: Any, topic_cls: Any, partition_cls: Any,
            require_stable: bool) -> tuple[Any, ...]:
    if topics is None:  # every partition the group has an offset for
        stored = manager.get_offsets(group_id)
        wanted: dict[str, list[int]] = {}
        for topic, partition in sorted(stored):
            wanted.setdefault(topic, []).append(partition)
    else:
        wanted = {t.name: [int(p) for p in t.partition_indexes] for t in topics}
        stored = manager.get_offsets(group_id, [(t, p) for t, ps in wanted.items() for p in ps])
    out = []
    for topic, partitions in wanted.items():
        rows = []
        for partition in partitions:
            value = stored.get((topic, partition))
            unstable = require_stable and manager.has_pending_txn_offsets(group_id, (topic, partition))
            if unstable:
                value = None
            rows.append(build(
                partition_cls,
                partition_index=partition,
                committed_offset=_NO_OFFSET if value is None else value.offset,
                committed_leader_epoch=-1 if value is None else value.leader_epoch,
                metadata="" if value is None else value.metadata,
                error_code=ErrorCode.unstable_offset_commit if unstable else ErrorCode.none,
            ))
        out.append(build(topic_cls, name=topic, partitions=tuple(rows)))
    return tuple(out)


@handles(ApiKey.OFFSET_FETCH, 1, 9)
async def handle_offset_fetch_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.OFFSET_FETCH, request.api_version)
    manager = group_metadata_manager(apis)
    stable = bool(getattr(body, "require_stable", False))
    if request.api_version >= 8:
        group_cls = nested_type(cls, "OffsetFetchResponseGroup")
        topic_cls = nested_type(cls, "OffsetFetchResponseTopics")
        partition_cls = nested_type(cls, "OffsetFetchResponsePartitions")
        return build(
            cls,
            throttle_time=ZERO_DELAY,
            groups=tuple(
                group_cls(group_id=g.group_id,
                          topics=_topics(manager, g.group_id, g.topics, topic_cls, partition_cls, stable),
                          error_code=ErrorCode.none)
                for g in body.groups
            ),
        )
    topic_cls = nested_type(cls, "OffsetFetchResponseTopic")
    partition_cls = nested_type(cls, "OffsetFetchResponsePartition")
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        topics=_topics(manager, body.group_id, body.topics, topic_cls, partition_cls, stable),
        error_code=ErrorCode.none,
    )
