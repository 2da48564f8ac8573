"""Where handlers find the ``GroupMetadataManager``: ``apis.components["group_metadata_manager"]``,
built when the broker starts from Kafka's ``offsets.*`` broker configs (registered as a component on
import, which every offsets handler does)."""

from __future__ import annotations

from typing import Any

from kafkalog.broker.group.group_metadata_manager import GroupMetadataManager
from kafkalog.broker.handlers import component, register_component
from kafkalog.records import CompressionType

__all__ = ["GROUP_METADATA_MANAGER", "group_metadata_manager"]

GROUP_METADATA_MANAGER = "group_metadata_manager"


def _build(apis: Any) -> GroupMetadataManager:
    config = apis.config
    replica_manager = apis.replica_manager
    return GroupMetadataManager(
        apis.log_manager,
        num_partitions=config.get_int("offsets.topic.num.partitions"),
        segment_bytes=config.get_int("offsets.topic.segment.bytes"),
        retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
        compression=CompressionType.for_id(config.get_int("offsets.topic.compression.codec")),
        time=apis.log_manager.time,
        on_append=lambda topic, partition: replica_manager.wake(topic, partition),
    )


register_component(GROUP_METADATA_MANAGER, _build)


def group_metadata_manager(apis: Any) -> GroupMetadataManager:
    """The broker's manager (built here if the ``KafkaApis`` was made without it, e.g. in a test)."""
    manager: GroupMetadataManager = component(apis, GROUP_METADATA_MANAGER)
    return manager
