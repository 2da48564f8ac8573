"""The consumer protocol's subscription (``ConsumerProtocolSubscription``, versions 0-3), the
member metadata a consumer sends in JoinGroup for protocol type ``consumer``.

The broker treats member metadata as opaque bytes, with one exception Kafka makes too: to expire
the committed offsets of topics a stable group no longer consumes (KIP-496), it reads the topics
each member subscribes to. Only that prefix is read -- ``version int16``, ``topics [string]`` --
which every version shares; user data, owned partitions, generation and rack follow it and are
left alone.
"""

from __future__ import annotations

from kafkalog.protocol.primitives import Reader

__all__ = ["CONSUMER_PROTOCOL_TYPE", "subscription_topics"]

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
