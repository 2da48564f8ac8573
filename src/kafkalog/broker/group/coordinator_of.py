"""Where handlers find the group coordinator: ``apis.components["group_coordinator"]``, built when the
broker starts (registered as a component on import, which every group handler does)."""

from __future__ import annotations

from typing import Any

from kafkalog.broker.group.group_coordinator import GroupConfig, GroupCoordinator
from kafkalog.broker.handlers import component, register_component

__all__ = ["GROUP_COORDINATOR", "group_coordinator"]

GROUP_COORDINATOR = "group_coordinator"


def _build(apis: Any) -> GroupCoordinator:
    return GroupCoordinator(GroupConfig.from_kafka_config(apis.config), apis.components)


register_component(GROUP_COORDINATOR, _build)


def group_coordinator(apis: Any) -> GroupCoordinator:
    """The broker's coordinator (built here if the ``KafkaApis`` was made without it, e.g. in a test)."""
    coordinator: GroupCoordinator = component(apis, GROUP_COORDINATOR)
    return coordinator
