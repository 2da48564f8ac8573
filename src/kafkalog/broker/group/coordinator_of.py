"""Where handlers find the group coordinator (``apis.components["group_coordinator"]``)."""

from __future__ import annotations

from typing import Any

from kafkalog.broker.group.group_coordinator import GroupConfig, GroupCoordinator

__all__ = ["GROUP_COORDINATOR", "group_coordinator"]

GROUP_COORDINATOR = "group_coordinator"


def group_coordinator(apis: Any) -> GroupCoordinator:
    """The broker's coordinator, attached on first use when ``KafkaServer`` has not done it already."""
    coordinator: GroupCoordinator | None = apis.components.get(GROUP_COORDINATOR)
    if coordinator is None:
        coordinator = GroupCoordinator(GroupConfig.from_kafka_config(apis.config), apis.components)
        apis.components[GROUP_COORDINATOR] = coordinator
    return coordinator
