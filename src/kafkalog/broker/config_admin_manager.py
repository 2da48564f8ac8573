"""Altering topic configs for AlterConfigs and IncrementalAlterConfigs (Kafka's
``ConfigAdminManager``): turn the request's operations into the topic's new set of overrides, validate
it as a whole through ``LogConfig``, then (unless ``validate_only``) persist and apply it with
``LogManager.alter_topic_config`` (the live logs take the new config at once). Broker configs are
static here: altering them is refused."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.config_helper import ResourceType
from kafkalog.broker.error_codes import error_code_for
from kafkalog.errors import InvalidConfigError, KafkaLogError
from kafkalog.storage.config import LogConfig, config_type

__all__ = ["AlterOp", "alter_resource_configs"]


class AlterOp:
    """Kafka's ``AlterConfigOp.OpType`` ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _as_list(text: str | None) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def incremental_overrides(
    current: dict[str, str], ops: Iterable[tuple[str, int, str | None]]
) -> dict[str, str]:
    """The overrides after applying (name, op, value) operations to ``current`` overrides."""
    result = dict(current)
    for name, op, value in ops:
        kind = config_type(name)  # InvalidConfigError for an unknown name
        if op == AlterOp.SET:
            if value is None:
                raise InvalidConfigError(f"Null value not supported for : {name}")
            result[name] = value
        elif op == AlterOp.DELETE:
            result.pop(name, None)
        elif op in (AlterOp.APPEND, AlterOp.SUBTRACT):
            if kind != "list":
                verb = "append" if op == AlterOp.APPEND else "subtract"
                raise InvalidConfigError(f"Config value {verb} is not allowed for config key: {name}")
            old = result.get(name)
            base = _as_list(old if old is not None else str(_list_default(name)))
            changes = _as_list(value)
            if op == AlterOp.APPEND:
                merged = base + [item for item in changes if item not in base]
            else:
                merged = [item for item in base if item not in changes]
            result[name] = ",".join(merged)
        else:
            raise InvalidConfigError(f"Unknown config operation {op} for {name}")
    return result


def _list_default(name: str) -> str:
    return LogConfig().to_props(include_defaults=True)[name]


def alter_resource_configs(
    apis: Any,
    resource_type: int,
    resource_name: str,
    new_overrides: dict[str, str] | None,
    ops: list[tuple[str, int, str | None]] | None,
    validate_only: bool,
) -> tuple[ErrorCode, str | None]:
    """Replace a topic's overrides with ``new_overrides`` (AlterConfigs) or apply ``ops``
    (IncrementalAlterConfigs); (error, message)."""
    if resource_type == ResourceType.BROKER:
        return (
            ErrorCode.invalid_request,
            "Broker configs are static in kafkalog: set them in server.properties",
        )
    if resource_type != ResourceType.TOPIC:
        return ErrorCode.invalid_request, f"Unsupported resource type {resource_type}"
    log_manager = apis.log_manager
    if not resource_name or not log_manager.has_topic(resource_name):
        return ErrorCode.unknown_topic_or_partition, f"The topic '{resource_name}' does not exist."
    try:
        current = log_manager.topic_config(resource_name).overridden_props()
        if new_overrides is None:
            new_overrides = incremental_overrides(current, ops or [])
        for name, value in new_overrides.items():
            if value is None:
                raise InvalidConfigError(f"Null value not supported for : {name}")
        LogConfig.from_props(new_overrides, log_manager.default_config)  # validate as a whole
        if not validate_only:
            changes: dict[str, str | None] = {name: None for name in current if name not in new_overrides}
            changes.update(new_overrides)
            log_manager.alter_topic_config(resource_name, changes)
    except KafkaLogError as e:
        return error_code_for(e), str(e)
    return ErrorCode.none, None
