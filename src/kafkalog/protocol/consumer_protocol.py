"""The consumer protocol's subscription (``ConsumerProtocolSubscription``, versions 0-3), the
member metadata a consumer sends in JoinGroup for protocol type ``consumer``, and the assignment
(``ConsumerProtocolAssignment``, versions 0-3) its leader hands out in SyncGroup.

The broker treats member metadata as opaque bytes, with one exception Kafka makes too: to expire
the committed offsets of topics a stable group no longer consumes (KIP-496), it reads the topics
each member subscribes to. Only that prefix is read -- ``version int16``, ``topics [string]`` --
which every version shares; user data, owned partitions, generation and rack follow it and are
left alone. ``decode_subscription``/``decode_assignment`` read everything, for the tools that show
a group's members (``dump-log --offsets-decoder``), as Kafka's generated readers do.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalog.errors import InvalidRequestError
from kafkalog.protocol.primitives import Reader

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "ConsumerProtocolAssignment",
    "ConsumerProtocolSubscription",
    "decode_assignment",
    "decode_subscription",
    "subscription_topics",
]

HIGHEST_VERSION = 3
TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerProtocolSubscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None
    owned_partitions: TopicPartitions = ()  # v1+
    generation_id: int = -1  # v2+
    rack_id: str | None = None  # v3+


@dataclass(frozen=True, slots=True)
class ConsumerProtocolAssignment:
    version: int
    assigned_partitions: TopicPartitions
    user_data: bytes | None

CONSUMER_PROTOCOL_TYPE = "consumer"
_MIN_TOPIC_BYTES = 2  # an int16 length


def subscription_topics(metadata: bytes | memoryview) -> frozenset[str]:
    """The topics of a serialized subscription; ``InvalidRequestError`` when it is malformed."""
    reader = Reader(memoryview(metadata))
    reader.int16()  # version: every version starts with the topics
    count = reader.array_len(flexible=False, min_item_size=_MIN_TOPIC_BYTES)
    topics = set()
    for _ in range(max(count, 0)):
        topic = reader.nullable_string()
        if topic is not None:
            topics.add(topic)
    return frozenset(topics)


def _string(reader: Reader, field: str) -> str:
    text = reader.nullable_string()
    if text is None:
        raise InvalidRequestError(f"non-nullable field {field} was serialized as null")
    return text


def _user_data(reader: Reader) -> bytes | None:
    n = reader.int32()
    return None if n < 0 else bytes(reader.bytes_view(n))


def _topic_partitions(reader: Reader, field: str) -> TopicPartitions:
    count = reader.array_len(flexible=False, min_item_size=_MIN_TOPIC_BYTES + 4)
    if count < 0:
        raise InvalidRequestError(f"non-nullable field {field} was serialized as null")
    out = []
    for _ in range(count):
        topic = _string(reader, "topic")
        n = reader.array_len(flexible=False, min_item_size=4)
        if n < 0:
            raise InvalidRequestError("non-nullable field partitions was serialized as null")
        out.append((topic, tuple(reader.int32() for _ in range(n))))
    return tuple(out)


def _version(reader: Reader, what: str) -> int:
    version = reader.int16()
    if not 0 <= version <= HIGHEST_VERSION:
        raise InvalidRequestError(f"Can't read version {version} of {what}")
    return version


def decode_subscription(data: bytes | memoryview) -> ConsumerProtocolSubscription:
    """Every field of a serialized subscription; ``InvalidRequestError`` when it is malformed or of a
    version past 3 (bytes after the last field are ignored, as Kafka's reader ignores them)."""
    reader = Reader(memoryview(data))
    version = _version(reader, "ConsumerProtocolSubscription")
    count = reader.array_len(flexible=False, min_item_size=_MIN_TOPIC_BYTES)
    if count < 0:
        raise InvalidRequestError("non-nullable field topics was serialized as null")
    topics = tuple(_string(reader, "topics element") for _ in range(count))
    user_data = _user_data(reader)
    owned = _topic_partitions(reader, "ownedPartitions") if version >= 1 else ()
    generation = reader.int32() if version >= 2 else -1
    rack = reader.nullable_string() if version >= 3 else None
    return ConsumerProtocolSubscription(version, topics, user_data, owned, generation, rack)


def decode_assignment(data: bytes | memoryview) -> ConsumerProtocolAssignment:
    """Every field of a serialized assignment (same rules as ``decode_subscription``)."""
    reader = Reader(memoryview(data))
    version = _version(reader, "ConsumerProtocolAssignment")
    assigned = _topic_partitions(reader, "assignedPartitions")
    return ConsumerProtocolAssignment(version, assigned, _user_data(reader))
