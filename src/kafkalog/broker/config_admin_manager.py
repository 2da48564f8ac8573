"""Altering topic configs for AlterConfigs and IncrementalAlterConfigs (Kafka's
``ConfigAdminManager``): turn the request's operations into the topic's new set of overrides, validate
it as a whole through ``LogConfig``, then (unless ``validate_only``) persist and apply it with
``LogManager.alter_topic_config`` (the live logs take the new config at once). Broker configs are
altered by ``dynamic_broker_config``; the broker's log levels (BROKER_LOGGER) are altered by
``runtime_logger_manager``, through IncrementalAlterConfigs only, as in Kafka."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.alter_config_op import AlterOp, altered_values, topic_list_default
from kafkalog.broker.config_helper import ResourceType
from kafkalog.broker.dynamic_broker_config import alter_broker_configs
from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.request import ZERO_DELAY, build, nested_type
from kafkalog.broker.runtime_logger_manager import apply_changes_for_resource
from kafkalog.errors import InvalidRequestError, KafkaLogError
from kafkalog.protocol.codec import response_type
from kafkalog.storage.config import LogConfig, config_type

__all__ = ["alter_configs_response", "alter_resource_configs"]


def _alter_request_configs(
    apis: Any, body: Any, incremental: bool
) -> list[tuple[Any, ErrorCode, str | None]]:
    """(resource, error, message) for each resource of an AlterConfigs (``incremental`` false) or
    IncrementalAlterConfigs request. A resource named twice in one request is answered
    INVALID_REQUEST, "Each resource must appear at most once.", each time, and altered in neither."""
    keys = [(r.resource_type, r.resource_name) for r in body.resources]
    repeated = {key for key, n in Counter(keys).items() if n > 1}
    results: list[tuple[Any, ErrorCode, str | None]] = []
    for resource, key in zip(body.resources, keys, strict=True):
        if key in repeated:
            results.append((resource, ErrorCode.invalid_request, "Each resource must appear at most once."))
            continue
        configs = [
            (c.name, c.config_operation if incremental else AlterOp.SET, c.value) for c in resource.configs
        ]
        error, message = alter_resource_configs(
            apis, resource.resource_type, resource.resource_name, configs, incremental, body.validate_only
        )
        results.append((resource, error, message))
    return results


def alter_configs_response(apis: Any, api_key: int, api_version: int, body: Any, incremental: bool) -> Any:
    """The whole AlterConfigs (``incremental`` false) or IncrementalAlterConfigs response."""
    cls = response_type(api_key, api_version)
    result_cls = nested_type(cls, "AlterConfigsResourceResponse")
    results = tuple(
        build(
            result_cls,
            error_code=error,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        for resource, error, message in _alter_request_configs(apis, body, incremental)
    )
    return build(cls, throttle_time=ZERO_DELAY, responses=results)


def _preprocess(configs: list[tuple[str, int, str | None]]) -> None:
    """Kafka's ``ConfigAdminManager.preprocess`` checks of one resource's configs, whatever its type."""
    names = [name for name, _, _ in configs]
    if len(set(names)) != len(names):
        raise InvalidRequestError("Error due to duplicate config keys")
    nulls = [name for name, op, value in configs if op != AlterOp.DELETE and value is None]
    if nulls:
        raise InvalidRequestError("Null value not supported for : " + ", ".join(nulls))


def alter_resource_configs(
    apis: Any,
    resource_type: int,
    resource_name: str,
    configs: list[tuple[str, int, str | None]],
    incremental: bool,
    validate_only: bool,
) -> tuple[ErrorCode, str | None]:
    """Apply (name, op, value) ``configs`` to one resource: IncrementalAlterConfigs' operations, or
    AlterConfigs' (``incremental`` false: every op a SET, and the values given replace the topic's
    whole set of overrides); (error, message)."""
    try:
        _preprocess(configs)
        if resource_type == ResourceType.BROKER_LOGGER and incremental:
            apply_changes_for_resource(apis.node_id, resource_name, configs, validate_only)
            return ErrorCode.none, None
        if resource_type == ResourceType.BROKER:
            alter_broker_configs(apis, resource_name, configs, incremental, validate_only)
            return ErrorCode.none, None
    except KafkaLogError as e:
        return error_code_for(e), str(e)
    if resource_type != ResourceType.TOPIC:
        return ErrorCode.invalid_request, f"Unknown resource type {resource_type}"
    log_manager = apis.log_manager
    if not resource_name or not log_manager.has_topic(resource_name):
        return ErrorCode.unknown_topic_or_partition, f"The topic '{resource_name}' does not exist."
    try:
        current = log_manager.topic_config(resource_name).overridden_props()
        if incremental:
            for name, _, _ in configs:
                config_type(name)  # InvalidConfigError for an unknown name
        new_overrides = altered_values(current, configs, incremental, topic_list_default)
        LogConfig.from_props(new_overrides, log_manager.default_config)  # validate as a whole
        if not validate_only:
            changes: dict[str, str | None] = {name: None for name in current if name not in new_overrides}
            changes.update(new_overrides)
            log_manager.alter_topic_config(resource_name, changes)
    except KafkaLogError as e:
        return error_code_for(e), str(e)
    return ErrorCode.none, None
