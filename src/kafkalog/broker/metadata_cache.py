"""What Kafka's ``MetadataCache`` answers on one node: topics, partition counts and topic ids, read
from the ``LogManager`` (the data directory is the only metadata there is)."""

from __future__ import annotations

import uuid

from kafkalog.storage.log_manager import LogManager

__all__ = ["ZERO_UUID", "MetadataCache"]

ZERO_UUID = uuid.UUID(int=0)


class MetadataCache:
    def __init__(self, log_manager: LogManager) -> None:
        self._log_manager = log_manager
        self._topics: tuple[str, ...] = ()
        self._by_id: dict[uuid.UUID, str] = {}
        self._ids: dict[str, uuid.UUID] = {}

    def _refresh(self) -> None:
        topics = tuple(self._log_manager.topics())
        if topics != self._topics:
            ids: dict[str, uuid.UUID] = {}
            for topic in topics:
                found = self._log_manager.topic_id(topic)
                ids[topic] = uuid.UUID(bytes=found.bytes) if found is not None else ZERO_UUID
            self._ids = ids
            self._by_id = {v: k for k, v in ids.items() if v != ZERO_UUID}
            self._topics = topics

    def invalidate(self) -> None:
        """Forget the cached ids (after a topic was deleted and maybe created again by the same name)."""
        self._topics = ()
        self._ids = {}
        self._by_id = {}

    def topics(self) -> tuple[str, ...]:
        self._refresh()
        return self._topics

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id (the zero UUID for an unknown topic, as Kafka answers)."""
        self._refresh()
        return self._ids.get(topic, ZERO_UUID)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        self._refresh()
        return self._by_id.get(topic_id)

    def contains(self, topic: str) -> bool:
        return self._log_manager.has_topic(topic)

    def contains_partition(self, topic: str, partition: int) -> bool:
        """Kafka's ``metadataCache.contains(topicPartition)``: the topic exists and has the partition."""
        return self._log_manager.has_partition(topic, partition)

    def num_partitions(self, topic: str) -> int:
        return len(self._log_manager.partitions(topic))
