"""A coordinator's internal topic (``__consumer_offsets``, ``__transaction_state``): created with the
coordinator's partition count and configs when first needed -- before its first write, or when a
client's Metadata request asks for it, as Kafka's AutoTopicCreationManager creates it -- and, once
it exists, its own partition count decides where keys go. Kafka's coordinators take the count from
the topic (``offsets.topic.num.partitions`` and ``transaction.state.log.num.partitions`` only say how
many to create): with another setting after a restart, keys would be looked for, and written, in
partitions that do not exist."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kafkalog.broker.group.offsets_topic import partition_for
from kafkalog.errors import TopicExistsError
from kafkalog.storage.log_manager import LogManager

__all__ = ["InternalTopic"]

log = logging.getLogger(__name__)


class InternalTopic:
    def __init__(
        self,
        log_manager: LogManager,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str],
        count_config: str,
    ) -> None:
        self._log_manager = log_manager
        self.name = name
        self.num_partitions = num_partitions
        self._configs = configs
        self._count_config = count_config  # named in the log line when the topic has another count
        self._settled = False

    def partition_for(self, key: str) -> int:
        """Kafka's ``Utils.abs(key.hashCode) % partitions``."""
        return partition_for(key, self.num_partitions)

    def ensure(self) -> None:
        """Create the topic unless it exists; take its partition count once it does."""
        if self._log_manager.has_topic(self.name):
            if not self._settled:  # once, not at every append
                self.adopt(len(self._log_manager.partitions(self.name)))
            return
        try:
            self._log_manager.create_topic(self.name, self.num_partitions, dict(self._configs))
            log.info("Created %s with %d partitions", self.name, self.num_partitions)
        except TopicExistsError:
            pass

    def adopt(self, existing: int) -> None:
        """Keys map to the topic's ``existing`` partitions from now on."""
        self._settled = True
        if existing != self.num_partitions:
            log.info(
                "%s has %d partitions: keys map to those (%s=%d applies when the topic is created)",
                self.name,
                existing,
                self._count_config,
                self.num_partitions,
            )
            self.num_partitions = existing
