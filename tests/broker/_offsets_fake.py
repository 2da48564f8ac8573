"""A test-only, in-memory stand-in for OffsetCommit/OffsetFetch, used only while the real handlers
(the offsets work, ``__consumer_offsets``) are not on this branch: the group tests need clients that
commit and fetch offsets. It checks commits with ``GroupCoordinator.validate_offset_commit`` as the
real handler must. Never used when the broker registers its own handlers for these APIs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.group.coordinator_of import group_coordinator
from kafkalog.broker.handlers import HANDLERS, ApiHandler, load_handlers
from kafkalog.broker.request import ZERO_DELAY, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

_STORE = "_test_offsets"


def _store(apis: Any) -> dict[tuple[str, str, int], tuple[int, str | None]]:
    return apis.components.setdefault(_STORE, {})


async def _commit(apis: Any, request: Any, body: Any) -> Any:
    cls = response_type(ApiKey.OFFSET_COMMIT, request.api_version)
    topic_cls, part_cls = (
        nested_type(cls, "OffsetCommitResponseTopic"),
        nested_type(cls, "OffsetCommitResponsePartition"),
    )
    generation = getattr(body, "generation_id_or_member_epoch", getattr(body, "generation_id", -1))
    error = group_coordinator(apis).validate_offset_commit(
        body.group_id, body.member_id, int(generation), getattr(body, "group_instance_id", None)
    )
    store = _store(apis)
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if not error:
                store[(body.group_id, t.name, p.partition_index)] = (
                    int(p.committed_offset),
                    p.committed_metadata,
                )
            parts.append(build(part_cls, partition_index=p.partition_index, error_code=ErrorCode(error)))
        topics.append(topic_cls(name=t.name, partitions=tuple(parts)))
    return build(cls, throttle_time=ZERO_DELAY, topics=tuple(topics))


def _fetch_group(apis: Any, group_id: str, topics: Any, topic_cls: Any, part_cls: Any) -> tuple[Any, ...]:
    store = _store(apis)
    if topics is None:
        wanted: dict[str, list[int]] = {}
        for g, t, p in store:
            if g == group_id:
                wanted.setdefault(t, []).append(p)
    else:
        wanted = {t.name: list(t.partition_indexes) for t in topics}
    out = []
    for name, partitions in wanted.items():
        parts = []
        for p in partitions:
            offset, metadata = store.get((group_id, name, p), (-1, ""))
            parts.append(
                build(
                    part_cls,
                    partition_index=p,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    metadata=metadata,
                    error_code=ErrorCode.none,
                )
            )
        out.append(topic_cls(name=name, partitions=tuple(parts)))
    return tuple(out)


async def _fetch(apis: Any, request: Any, body: Any) -> Any:
    version = request.api_version
    cls = response_type(ApiKey.OFFSET_FETCH, version)
    if version >= 8:
        group_cls = nested_type(cls, "OffsetFetchResponseGroup")
        topic_cls, part_cls = (
            nested_type(cls, "OffsetFetchResponseTopics"),
            nested_type(cls, "OffsetFetchResponsePartitions"),
        )
        groups = tuple(
            group_cls(
                group_id=g.group_id,
                topics=_fetch_group(apis, g.group_id, g.topics, topic_cls, part_cls),
                error_code=ErrorCode.none,
            )
            for g in body.groups
        )
        return build(cls, throttle_time=ZERO_DELAY, groups=groups)
    topic_cls, part_cls = (
        nested_type(cls, "OffsetFetchResponseTopic"),
        nested_type(cls, "OffsetFetchResponsePartition"),
    )
    topics = _fetch_group(apis, body.group_id, body.topics, topic_cls, part_cls)
    return build(cls, throttle_time=ZERO_DELAY, topics=topics, error_code=ErrorCode.none)


@contextlib.contextmanager
def offsets_fallback() -> Iterator[bool]:
    """Register the fake handlers if the broker has none; yields whether the fake is in use."""
    load_handlers()
    added = [
        h
        for h in (
            ApiHandler(ApiKey.OFFSET_COMMIT, 2, 9, _commit),
            ApiHandler(ApiKey.OFFSET_FETCH, 1, 9, _fetch),
        )
        if h.api_key not in HANDLERS
    ]
    for handler in added:
        HANDLERS[handler.api_key] = handler
    try:
        yield bool(added)
    finally:
        for handler in added:
            if HANDLERS.get(handler.api_key) is handler:
                del HANDLERS[handler.api_key]
