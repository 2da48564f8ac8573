"""IncrementalAlterConfigs (44), v0-v1: SET / DELETE / APPEND / SUBTRACT on a topic's configs,
validated as a whole, persisted and applied to the live logs (``config_admin_manager``); SET / DELETE
on the broker's log levels (BROKER_LOGGER, ``runtime_logger_manager``), at once and not persisted,
as Kafka's. A resource named twice in one request is INVALID_REQUEST, each time, and not altered."""

from __future__ import annotations

from typing import Any

from kafkalog.broker.config_admin_manager import alter_request_configs
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def handle_incremental_alter_configs_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.INCREMENTAL_ALTER_CONFIGS, request.api_version)
    result_cls = nested_type(cls, "AlterConfigsResourceResponse")
    results = tuple(
        build(
            result_cls,
            error_code=error,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        for resource, error, message in alter_request_configs(apis, body, incremental=True)
    )
    return build(cls, throttle_time=ZERO_DELAY, responses=results)
