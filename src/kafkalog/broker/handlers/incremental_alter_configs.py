"""IncrementalAlterConfigs (44), v0-v1: SET / DELETE / APPEND / SUBTRACT on a topic's configs,
validated as a whole, persisted and applied to the live logs (``config_admin_manager``)."""

from __future__ import annotations

from typing import Any

from kafkalog.broker.config_admin_manager import alter_resource_configs
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def handle_incremental_alter_configs_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.INCREMENTAL_ALTER_CONFIGS, request.api_version)
    result_cls = nested_type(cls, "AlterConfigsResourceResponse")
    results = []
    for resource in body.resources:
        ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
        error, message = alter_resource_configs(
            apis, resource.resource_type, resource.resource_name, None, ops, body.validate_only
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
