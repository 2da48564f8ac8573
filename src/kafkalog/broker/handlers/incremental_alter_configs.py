"""IncrementalAlterConfigs (44), v0-v1: SET / DELETE / APPEND / SUBTRACT on a topic's configs,
validated as a whole, persisted and applied to the live logs (``config_admin_manager``); SET / DELETE
on the broker's log levels (BROKER_LOGGER, ``runtime_logger_manager``), at once and not persisted,
as Kafka's. A resource named twice in one request is INVALID_REQUEST, each time, and not altered."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.config_admin_manager import alter_resource_configs, duplicate_resources
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def handle_incremental_alter_configs_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.INCREMENTAL_ALTER_CONFIGS, request.api_version)
    result_cls = nested_type(cls, "AlterConfigsResourceResponse")
    results = []
    repeated = duplicate_resources((r.resource_type, r.resource_name) for r in body.resources)
    for resource in body.resources:
        message: str | None
        if (resource.resource_type, resource.resource_name) in repeated:
            error, message = ErrorCode.invalid_request, "Each resource must appear at most once."
        else:
            ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
            error, message = alter_resource_configs(
                apis, resource.resource_type, resource.resource_name, ops, True, body.validate_only
            )
        results.append(
            build(
                result_cls,
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return build(cls, throttle_time=ZERO_DELAY, responses=tuple(results))
