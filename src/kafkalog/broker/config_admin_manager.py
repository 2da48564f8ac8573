"""Altering topic configs for AlterConfigs and IncrementalAlterConfigs (Kafka's
``ConfigAdminManager``): turn the request's operations into the topic's new set of overrides, validate
it as a whole through ``LogConfig``, then (unless ``validate_only``) persist and apply it with
``LogManager.alter_topic_config`` (the live logs take the new config at once). Broker configs are
altered by ``dynamic_broker_config``, group configs (KIP-848's GROUP resource) by
``group.group_config``; the broker's log levels (BROKER_LOGGER) are altered by
``runtime_logger_manager``, through IncrementalAlterConfigs only, as in Kafka.

Authorization comes where Kafka 4 has it: a resource's ALTER_CONFIGS (``config_authorization_error``)
is checked after the broker's own preprocessing — duplicates, null values, and for the BROKER
resource its name and the change itself — and before the controller looks at the topic or group, so
a topic one may not alter is TOPIC_AUTHORIZATION_FAILED whether it exists or not. A log-level change is
authorized in the preprocessing, before its node id is checked, and its refusal carries no message
(Kafka's ``ApiError.fromThrowable`` drops the default one)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.alter_config_op import AlterOp, altered_values, topic_list_default
from kafkalog.broker.auth_helper import authorization_failed_message
from kafkalog.broker.config_helper import (
    ResourceType,
    check_topic_config_for_this_broker,
    config_authorization_error,
)
from kafkalog.broker.dynamic_broker_config import alter_broker_configs
from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.group.group_config import alter_group_configs
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.broker.runtime_logger_manager import apply_changes_for_resource
from kafkalog.errors import InvalidRequestError, KafkaLogError
from kafkalog.protocol.codec import response_type
from kafkalog.storage.config import LogConfig
from kafkalog.storage.log_file_utils import validate_topic_name

__all__ = ["alter_configs_response", "alter_resource_configs"]


def _alter_request_configs(
    apis: Any, request: RequestContext, body: Any, incremental: bool
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
            apis,
            request,
            resource.resource_type,
            resource.resource_name,
            configs,
            incremental,
            body.validate_only,
        )
        results.append((resource, error, message))
    return results


def alter_configs_response(
    apis: Any, request: RequestContext, api_key: int, body: Any, incremental: bool
) -> Any:
    """The whole AlterConfigs (``incremental`` false) or IncrementalAlterConfigs response."""
    cls = response_type(api_key, request.api_version)
    result_cls = nested_type(cls, "AlterConfigsResourceResponse")
    results = tuple(
        build(
            result_cls,
            error_code=error,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        for resource, error, message in _alter_request_configs(apis, request, body, incremental)
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
    request: RequestContext,
    resource_type: int,
    resource_name: str,
    configs: list[tuple[str, int, str | None]],
    incremental: bool,
    validate_only: bool,
) -> tuple[ErrorCode, str | None]:
    """Apply (name, op, value) ``configs`` to one resource: IncrementalAlterConfigs' operations, or
    AlterConfigs' (``incremental`` false: every op a SET, and the values given replace the topic's
    or group's whole set); (error, message). ``request`` must hold ALTER_CONFIGS on what guards
    the resource."""

    def denied() -> ErrorCode:
        return config_authorization_error(
            apis, request, AclOperation.ALTER_CONFIGS, resource_type, resource_name
        )

    try:
        _preprocess(configs)
        if resource_type == ResourceType.BROKER_LOGGER and incremental:
            if (error := denied()) != ErrorCode.none:
                return error, None
            apply_changes_for_resource(apis.node_id, resource_name, configs, validate_only)
            return ErrorCode.none, None
        if resource_type == ResourceType.BROKER:
            # The broker validates the change before the controller authorizes and applies it.
            alter_broker_configs(apis, resource_name, configs, incremental, validate_only=True)
            if (error := denied()) != ErrorCode.none:
                return error, authorization_failed_message(error)
            if not validate_only:
                alter_broker_configs(apis, resource_name, configs, incremental, validate_only=False)
            return ErrorCode.none, None
    except KafkaLogError as e:
        return error_code_for(e), str(e)
    unknown = ErrorCode.invalid_request, f"Unknown resource type {resource_type}"
    if resource_type not in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLIENT_METRICS):
        return unknown
    if (error := denied()) != ErrorCode.none:
        return error, authorization_failed_message(error)
    if resource_type == ResourceType.GROUP:
        try:
            alter_group_configs(apis, resource_name, configs, incremental, validate_only)
        except KafkaLogError as e:
            return error_code_for(e), str(e)
        return ErrorCode.none, None
    if resource_type != ResourceType.TOPIC:
        return unknown  # kafkalog keeps no client-metrics subscriptions
    log_manager = apis.log_manager
    # Kafka's controller: the name, the operations, the resulting configs, and only then whether the
    # topic exists (ConfigurationControlManager.validateAlterConfig).
    if not resource_name:
        return ErrorCode.invalid_request, "Default topic resources are not allowed."
    try:
        validate_topic_name(resource_name)
        exists = log_manager.has_topic(resource_name)
        current = log_manager.topic_config(resource_name).overridden_props() if exists else {}
        new_overrides = altered_values(current, configs, incremental, topic_list_default)
        # validated as a whole: an unknown name is refused where it is set (a DELETE of one that is
        # not there changes nothing, as in Kafka's controller)
        check_topic_config_for_this_broker(LogConfig.from_props(new_overrides, log_manager.default_config))
        if not exists:
            return ErrorCode.unknown_topic_or_partition, f"The topic '{resource_name}' does not exist."
        if not validate_only:
            changes: dict[str, str | None] = {name: None for name in current if name not in new_overrides}
            changes.update(new_overrides)
            log_manager.alter_topic_config(resource_name, changes)
    except KafkaLogError as e:
        return error_code_for(e), str(e)
    return ErrorCode.none, None
