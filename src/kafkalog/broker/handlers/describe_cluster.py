"""DescribeCluster (60), v0-v2: this node as the cluster's only broker and its controller. A request
for the controller endpoints (v1+, endpoint type 2) gets MISMATCHED_ENDPOINT_TYPE, as a Kafka
broker answers it.

Anyone may describe the cluster (only Kafka's controllers ask for ALTER on it). The operations a
client asks to see (``include_cluster_authorized_operations``) are shown to a principal holding
DESCRIBE on the cluster; to any other the field is 0 (``AuthHelper.computeDescribeClusterResponse``)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkalog.broker.auth_helper import NOT_REQUESTED, authorize_cluster, authorized_operations
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

_BROKERS_ENDPOINT = 1
_CONTROLLERS_ENDPOINT = 2


@handles(ApiKey.DESCRIBE_CLUSTER, 0, 2)
async def handle_describe_cluster_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DESCRIBE_CLUSTER, request.api_version)
    broker_cls = nested_type(cls, "DescribeClusterBroker")
    endpoint_type = getattr(body, "endpoint_type", _BROKERS_ENDPOINT)
    if endpoint_type != _BROKERS_ENDPOINT:
        # Kafka's AuthHelper.computeDescribeClusterResponse: an empty answer with the error alone
        if endpoint_type == _CONTROLLERS_ENDPOINT:
            error = ErrorCode.mismatched_endpoint_type
            message = ("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                       "type CONTROLLER")
        else:
            error = ErrorCode.unsupported_endpoint_type
            message = f"Unsupported endpoint type {endpoint_type}"
        return build(
            cls,
            throttle_time=ZERO_DELAY,
            error_code=error,
            error_message=message,
            endpoint_type=_BROKERS_ENDPOINT,
            cluster_id="",
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=NOT_REQUESTED,
        )
    operations = NOT_REQUESTED
    if body.include_cluster_authorized_operations:
        operations = (
            authorized_operations(apis, request, True, ResourceType.CLUSTER, CLUSTER_NAME)
            if authorize_cluster(apis, request, AclOperation.DESCRIBE)
            else 0
        )
    e = apis.endpoint_for(request)
    brokers = (
        build(broker_cls, broker_id=e.node_id, host=e.host, port=e.port, rack=e.rack, is_fenced=False),
    )
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=endpoint_type,
        cluster_id=apis.cluster_id,
        controller_id=apis.node_id,
        brokers=brokers,
        cluster_authorized_operations=operations,
    )
