"""``__consumer_offsets``: its name, its topic configs and which partition holds a group (Kafka's
``GroupCoordinator.partitionFor``: ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``,
with Java's ``String.hashCode``, so a group lands in the partition Kafka would put it in)."""

from __future__ import annotations

__all__ = ["GROUP_METADATA_TOPIC_NAME", "java_string_hash", "offsets_topic_configs", "partition_for"]

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: s[0]*31^(n-1) + … over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def offsets_topic_configs(segment_bytes: int) -> dict[str, str]:
    """The topic configs Kafka gives ``__consumer_offsets`` (its ``groupMetadataTopicConfigs``)."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(segment_bytes),
    }
