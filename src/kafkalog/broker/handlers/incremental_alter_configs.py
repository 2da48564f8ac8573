"""IncrementalAlterConfigs (44), v0-v1: SET / DELETE / APPEND / SUBTRACT on a topic's configs,
validated as a whole, persisted and applied to the live logs (``config_admin_manager``); SET / DELETE
on a group's configs (KIP-848's GROUP resource, ``group.group_config``), validated as a whole and
persisted; SET / DELETE on the broker's log levels (BROKER_LOGGER, ``runtime_logger_manager``), at
once and not persisted, as Kafka's. A resource named twice in one request is INVALID_REQUEST, each
time, and not altered. Needs ALTER_CONFIGS on the topic or group, or on the cluster for the BROKER
and BROKER_LOGGER resources."""

from __future__ import annotations

from typing import Any

from kafkalog.broker.config_admin_manager import alter_configs_response
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import RequestContext
from kafkalog.protocol.api_keys import ApiKey


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def handle_incremental_alter_configs_request(apis: Any, request: RequestContext, body: Any) -> Any:
    return alter_configs_response(apis, request, ApiKey.INCREMENTAL_ALTER_CONFIGS, body, incremental=True)
