"""AlterConfigs (33), v0-v2: replace a topic's whole set of config overrides (names left out revert
to their defaults), validated as a whole, persisted and applied (``config_admin_manager``)."""

from __future__ import annotations

from typing import Any

from kafkalog.broker.config_admin_manager import alter_request_configs
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.ALTER_CONFIGS, 0, 2)
async def handle_alter_configs_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.ALTER_CONFIGS, request.api_version)
    result_cls = nested_type(cls, "AlterConfigsResourceResponse")
    results = tuple(
        build(
            result_cls,
            error_code=error,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        for resource, error, message in alter_request_configs(apis, body, incremental=False)
    )
    return build(cls, throttle_time=ZERO_DELAY, responses=results)
