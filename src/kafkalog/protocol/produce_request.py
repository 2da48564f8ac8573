"""Produce request decoding, written here because it is the hot path: each partition's records stay a
``memoryview`` into the request frame, so a produced batch reaches the storage engine without a copy.

Layout (v3-v13): transactional_id nullable string, acks int16, timeout_ms int32, then topics: name
string (v3-v12) or topic_id uuid (v13+), partitions: index int32, records nullable bytes. From v9
strings, arrays and bytes are compact and every struct ends with tagged fields.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kafkalog.errors import InvalidRequestError
from kafkalog.protocol.primitives import Reader

__all__ = ["PartitionProduceData", "ProduceRequestData", "TopicProduceData", "decode_produce_request"]

FIRST_FLEXIBLE = 9
FIRST_TOPIC_ID = 13


@dataclass(frozen=True, slots=True)
class PartitionProduceData:
    index: int
    records: memoryview | None


@dataclass(frozen=True, slots=True)
class TopicProduceData:
    name: str | None  # up to v12
    topic_id: uuid.UUID | None  # v13+
    partitions: tuple[PartitionProduceData, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequestData:
    version: int
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: tuple[TopicProduceData, ...]


def decode_produce_request(frame: memoryview, offset: int, version: int) -> ProduceRequestData:
    flexible = version >= FIRST_FLEXIBLE
    r = Reader(frame, offset)
    transactional_id = r.compact_nullable_string() if flexible else r.nullable_string()
    acks = r.int16()
    timeout_ms = r.int32()
    topics: list[TopicProduceData] = []
    for _ in range(max(0, r.array_len(flexible))):
        name: str | None = None
        topic_id: uuid.UUID | None = None
        if version >= FIRST_TOPIC_ID:
            topic_id = r.uuid()
        else:
            name = r.compact_nullable_string() if flexible else r.nullable_string()
            if name is None:
                raise InvalidRequestError("Produce request with a null topic name")
        partitions: list[PartitionProduceData] = []
        for _ in range(max(0, r.array_len(flexible, 5))):
            index = r.int32()
            size = r.uvarint() - 1 if flexible else r.int32()
            if size < -1:
                raise InvalidRequestError(f"Invalid records length {size} at position {r.pos}")
            records = r.bytes_view(size) if size >= 0 else None
            if flexible:
                r.skip_tagged_fields()
            partitions.append(PartitionProduceData(index, records))
        if flexible:
            r.skip_tagged_fields()
        topics.append(TopicProduceData(name, topic_id, tuple(partitions)))
    if flexible:
        r.skip_tagged_fields()
    return ProduceRequestData(version, transactional_id, acks, timeout_ms, tuple(topics))
