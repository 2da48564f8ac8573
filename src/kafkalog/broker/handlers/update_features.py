"""UpdateFeatures (57), v0-v2: Kafka's ``ControllerApis.handleUpdateFeatures`` and
``QuorumController.updateFeatures`` on a node that is its own controller; the rules are
``broker.features``'.

It needs ALTER on the cluster (otherwise CLUSTER_AUTHORIZATION_FAILED). One refused update fails
them all: the top-level error is INVALID_UPDATE_VERSION with "The update failed for all features
since the following feature had an error: ..." and no per-feature results. Otherwise v0-v1 list
every feature asked about with error NONE (its message ``Errors.NONE.message()``, "NONE", as
Kafka's controller sets it); v2 lists none (KIP-1022). v0 has no ``UpgradeType``: its default,
UPGRADE, applies (the controller reads that field, not v0's ``AllowDowngrade``)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.auth_helper import authorize_cluster, not_authorized_message
from kafkalog.broker.features import FeatureUpdate, UpgradeType, update_features
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

_FAILED_FOR_ALL = "The update failed for all features since the following feature had an error: "


@handles(ApiKey.UPDATE_FEATURES, 0, 2)
async def handle_update_features_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.UPDATE_FEATURES, request.api_version)
    if not authorize_cluster(apis, request, AclOperation.ALTER):
        return build(cls, error_code=ErrorCode.cluster_authorization_failed,
                     error_message=not_authorized_message(request), results=(), throttle_time=ZERO_DELAY)
    updates = [
        FeatureUpdate(u.feature, int(u.max_version_level),
                      UpgradeType.from_code(int(getattr(u, "upgrade_type", UpgradeType.UPGRADE))))
        for u in body.feature_updates
    ]
    refusal = update_features(updates, apis.node_id)
    if refusal is not None:
        return build(cls, error_code=ErrorCode.invalid_update_version,
                     error_message=_FAILED_FOR_ALL + refusal, results=(), throttle_time=ZERO_DELAY)
    results: tuple[Any, ...] = ()
    if request.api_version <= 1:
        result_cls = nested_type(cls, "UpdatableFeatureResult")
        results = tuple(build(result_cls, feature=u.feature, error_code=ErrorCode.none, error_message="NONE")
                        for u in updates)
    return build(cls, error_code=ErrorCode.none, error_message=None, results=results,
                 throttle_time=ZERO_DELAY)
