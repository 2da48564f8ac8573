"""OffsetCommit (8), v2-v9 (Kafka's ``handleOffsetCommitRequest`` → ``GroupCoordinator.handleCommitOffsets``):
the coordinator checks the member and generation (generation -1 with no member id is a standalone
commit), then the offsets are written to ``__consumer_offsets`` in one append and acknowledged only
once it succeeded. Per partition: UNKNOWN_TOPIC_OR_PARTITION for a partition the broker does not
have, OFFSET_METADATA_TOO_LARGE past ``offset.metadata.max.bytes``.

Authorization, as KafkaApis checks before the coordinator sees the request: READ on the group, else
GROUP_AUTHORIZATION_FAILED for every partition; then READ on each topic, else
TOPIC_AUTHORIZATION_FAILED for each of its partitions (before it is looked for)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize, filter_authorized
from kafkalog.broker.group.coordinator_of import group_coordinator
from kafkalog.broker.group.manager_of import group_metadata_manager
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type
from kafkalog.protocol.group_metadata_records import OffsetCommitValue

_MS = timedelta(milliseconds=1)


def every_partition(topics: Any, error: ErrorCode) -> dict[tuple[str, int], int]:
    """``error`` for each partition of a request's topics (a request refused as a whole)."""
    return {(t.name, int(p.partition_index)): int(error) for t in topics for p in t.partitions}


def readable_topics(apis: Any, request: RequestContext, topics: Any) -> set[str]:
    """The names among a request's topics the principal may READ, each asked once (OffsetCommit,
    TxnOffsetCommit and OffsetDelete refuse the partitions of the others)."""
    names = dict.fromkeys(t.name for t in topics)
    return set(filter_authorized(apis, request, AclOperation.READ, ResourceType.TOPIC, names))


def split_too_large(
    apis: Any, to_store: dict[tuple[str, int], OffsetCommitValue]
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], OffsetCommitValue]]:
    """(OFFSET_METADATA_TOO_LARGE for the commits whose metadata is longer than
    ``offset.metadata.max.bytes``, the others to store): the length counted as Java's
    ``String.length`` counts (UTF-16 units), after the group accepted the commit, as Kafka's
    ``storeOffsets`` checks it."""
    limit = apis.config.get_int("offset.metadata.max.bytes")
    errors: dict[tuple[str, int], int] = {}
    fitting: dict[tuple[str, int], OffsetCommitValue] = {}
    for tp, value in to_store.items():
        if len(value.metadata.encode("utf-16-le")) // 2 > limit:
            errors[tp] = int(ErrorCode.offset_metadata_too_large)
        else:
            fitting[tp] = value
    return errors, fitting


def commit_values(
    apis: Any, request: RequestContext, topics: Any, now: int, expire: int
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], OffsetCommitValue]]:
    """The per-partition checks of an (Txn)OffsetCommit request's topics, before the coordinator's:
    (errors of the refused partitions, the values to store for the others)."""
    log_manager = apis.log_manager
    readable = readable_topics(apis, request, topics)
    errors: dict[tuple[str, int], int] = {}
    to_store: dict[tuple[str, int], OffsetCommitValue] = {}
    for topic in topics:
        if topic.name not in readable:
            errors.update(every_partition([topic], ErrorCode.topic_authorization_failed))
            continue
        known = set(log_manager.partitions(topic.name)) if log_manager.has_topic(topic.name) else set()
        for p in topic.partitions:
            tp = (topic.name, int(p.partition_index))
            metadata = p.committed_metadata or ""
            if tp[1] not in known:
                errors[tp] = int(ErrorCode.unknown_topic_or_partition)
            else:
                epoch = int(getattr(p, "committed_leader_epoch", -1))
                to_store[tp] = OffsetCommitValue(int(p.committed_offset), epoch, metadata, now, expire)
    return errors, to_store


def commit_response_topics(
    topics: Any, errors: dict[tuple[str, int], int], topic_cls: Any, partition_cls: Any
) -> tuple[Any, ...]:
    """An (Txn)OffsetCommit or OffsetDelete response's topics: each asked partition with its error."""
    return tuple(
        topic_cls(
            name=topic.name,
            partitions=tuple(
                partition_cls(
                    partition_index=p.partition_index,
                    error_code=ErrorCode(errors[(topic.name, int(p.partition_index))]),
                )
                for p in topic.partitions
            ),
        )
        for topic in topics
    )


@handles(ApiKey.OFFSET_COMMIT, 2, 9)
async def handle_offset_commit_request(apis: Any, request: RequestContext, body: Any) -> Any:
    version = request.api_version
    cls = response_type(ApiKey.OFFSET_COMMIT, version)
    topic_cls = nested_type(cls, "OffsetCommitResponseTopic")
    partition_cls = nested_type(cls, "OffsetCommitResponsePartition")
    manager = group_metadata_manager(apis)
    log_manager = apis.log_manager
    now = log_manager.time.milliseconds()
    # v2-v4 carry a retention time; -1 means the broker's (no per-commit expiry)
    retention_time = getattr(body, "retention_time", None)
    retention = -1 if retention_time is None else retention_time // _MS
    expire = now + retention if retention >= 0 else -1

    to_store: dict[tuple[str, int], OffsetCommitValue] = {}
    if not authorize(apis, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        errors = every_partition(body.topics, ErrorCode.group_authorization_failed)
    else:
        errors, to_store = commit_values(apis, request, body.topics, now, expire)
    if to_store:
        error = group_coordinator(apis).validate_offset_commit(
            body.group_id,
            body.member_id,
            int(body.generation_id_or_member_epoch),
            getattr(body, "group_instance_id", None),
            request.api_version,
        )
        if error:
            errors.update(dict.fromkeys(to_store, error))
        else:
            oversized, fitting = split_too_large(apis, to_store)
            errors.update(oversized)
            if fitting:
                errors.update(await manager.store_offsets(body.group_id, fitting))

    return build(
        cls,
        throttle_time=ZERO_DELAY,
        topics=commit_response_topics(body.topics, errors, topic_cls, partition_cls),
    )
