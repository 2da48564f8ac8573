"""AlterConfigs (33), v0-v2: replace a topic's whole set of config overrides, or a group's whole set
of group configs (names left out revert to their defaults), validated as a whole, persisted and
applied (``config_admin_manager``). Needs ALTER_CONFIGS on the topic or group, or on the cluster for
the BROKER resource."""

from __future__ import annotations

from typing import Any

from kafkalog.broker.config_admin_manager import alter_configs_response
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import RequestContext
from kafkalog.protocol.api_keys import ApiKey


@handles(ApiKey.ALTER_CONFIGS, 0, 2)
async def handle_alter_configs_request(apis: Any, request: RequestContext, body: Any) -> Any:
    return alter_configs_response(apis, request, ApiKey.ALTER_CONFIGS, body, incremental=False)
