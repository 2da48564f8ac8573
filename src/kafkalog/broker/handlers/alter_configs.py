"""AlterConfigs (33), v0-v2: replace a topic's whole set of config overrides (names left out revert
to their defaults), validated as a whole, persisted and applied (``config_admin_manager``)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.config_admin_manager import AlterOp, alter_resource_configs, duplicate_resources
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.ALTER_CONFIGS, 0, 2)
async def handle_alter_configs_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.ALTER_CONFIGS, request.api_version)
    result_cls = nested_type(cls, "AlterConfigsResourceResponse")
    results = []
    repeated = duplicate_resources((r.resource_type, r.resource_name) for r in body.resources)
    for resource in body.resources:
        message: str | None
        if (resource.resource_type, resource.resource_name) in repeated:
            error, message = ErrorCode.invalid_request, "Each resource must appear at most once."
        else:
            configs = [(c.name, AlterOp.SET, c.value) for c in resource.configs]
            error, message = alter_resource_configs(
                apis, resource.resource_type, resource.resource_name, configs, False, body.validate_only
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
