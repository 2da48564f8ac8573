"""ListConfigResources (74), v0-v1 (Kafka's ``handleListConfigResources``; v0 was KIP-1000's
ListClientMetricsResources, v1 is KIP-1142's): the resources whose configs DescribeConfigs can be
asked about. v0 lists client-metrics subscriptions only — kafkalog has none. v1 takes a list of
resource types (empty: every type Kafka supports here), fails the whole request with
UNSUPPORTED_VERSION if it names any other type, and lists, in Kafka's order: the groups with
dynamic configs (``group.group_config``; a group is listed while it has a config set, whether it
exists or not), client-metrics subscriptions (none), this node as a broker-logger resource and as a
broker resource, then every topic (internal ones included).

Either version needs DESCRIBE_CONFIGS on the cluster, checked first: otherwise the error is
CLUSTER_AUTHORIZATION_FAILED and nothing is listed."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.auth_helper import authorize_cluster
from kafkalog.broker.group.group_config import group_config_manager
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

# Kafka's ConfigResource.Type ids.
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


@handles(ApiKey.LIST_CONFIG_RESOURCES, 0, 1)
async def handle_list_config_resources_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.LIST_CONFIG_RESOURCES, request.api_version)
    resource_cls = nested_type(cls, "ConfigResource")
    if not authorize_cluster(apis, request, AclOperation.DESCRIBE_CONFIGS):
        return build(
            cls,
            throttle_time=ZERO_DELAY,
            error_code=ErrorCode.cluster_authorization_failed,
            config_resources=(),
        )
    if request.api_version == 0:  # client-metrics subscriptions only
        return build(cls, throttle_time=ZERO_DELAY, error_code=ErrorCode.none, config_resources=())
    wanted = {int(t) for t in body.resource_types} or set(SUPPORTED)
    if not wanted <= set(SUPPORTED):
        return build(
            cls, throttle_time=ZERO_DELAY, error_code=ErrorCode.unsupported_version, config_resources=()
        )
    found: list[tuple[str, int]] = []
    node = str(apis.node_id)
    if GROUP in wanted:
        found.extend((group, GROUP) for group in group_config_manager(apis).groups())
    if BROKER_LOGGER in wanted:
        found.append((node, BROKER_LOGGER))
    if BROKER in wanted:
        found.append((node, BROKER))
    if TOPIC in wanted:
        found.extend((topic, TOPIC) for topic in apis.metadata_cache.topics())
    resources = tuple(build(resource_cls, resource_name=name, resource_type=kind) for name, kind in found)
    return build(cls, throttle_time=ZERO_DELAY, error_code=ErrorCode.none, config_resources=resources)
