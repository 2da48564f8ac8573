"""DeleteTopics (20), v1-v6 (Kafka's ``deleteTopics``): by name, and from v6 by topic id. The
partitions are closed and their directories removed (``ReplicaManager.delete_topic``); fetches parked
on them end at once. Unknown names get UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID.

Authorization (Kafka 4's controller, ``ControllerApis.deleteTopics``): DELETE on the cluster allows
every topic; otherwise a topic needs DELETE on it, and one the request may not even DESCRIBE is
TOPIC_AUTHORIZATION_FAILED whether it exists or not, so that a name's existence does not leak. A
known topic id is not secret, but the name behind it is only shown to whom may describe it."""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorization_failed_message, authorize
from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.group.manager_of import GROUP_METADATA_MANAGER
from kafkalog.broker.handlers import handles
from kafkalog.broker.metadata_cache import ZERO_UUID
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

log = logging.getLogger(__name__)

_UNAUTHORIZED = ErrorCode.topic_authorization_failed


class _Permissions:
    """What the request may do to topics: DELETE on the cluster covers every one (its check logs no
    denial); else DESCRIBE and DELETE are asked per topic, once each."""

    def __init__(self, apis: Any, request: RequestContext) -> None:
        self._apis, self._request = apis, request
        self._cluster = authorize(
            apis, request, AclOperation.DELETE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
        )
        self._asked: dict[tuple[AclOperation, str], bool] = {}

    def may(self, operation: AclOperation, name: str) -> bool:
        if self._cluster:
            return True
        key = (operation, name)
        if key not in self._asked:
            self._asked[key] = authorize(self._apis, self._request, operation, ResourceType.TOPIC, name)
        return self._asked[key]


def _delete(
    apis: Any, permissions: _Permissions, name: str | None, topic_id: Any
) -> tuple[str | None, Any, ErrorCode, str | None]:
    """(name, topic id, error, message) of one deletion."""
    cache = apis.metadata_cache
    by_id = topic_id is not None and topic_id != ZERO_UUID
    if name is not None and by_id:
        return name, topic_id, ErrorCode.invalid_request, "Both topic name and topic id were given"
    denied = authorization_failed_message(_UNAUTHORIZED)
    if by_id:
        name = cache.topic_name(topic_id)
        if name is None:
            return None, topic_id, ErrorCode.unknown_topic_id, f"Topic id {topic_id} does not exist"
        if not permissions.may(AclOperation.DELETE, name):
            shown = name if permissions.may(AclOperation.DESCRIBE, name) else None
            return shown, topic_id, _UNAUTHORIZED, denied
    elif name is not None and not permissions.may(AclOperation.DESCRIBE, name):
        # Refused before the name is looked up: an unknown topic and a hidden one look the same.
        return name, ZERO_UUID, _UNAUTHORIZED, denied
    if name is None or not cache.contains(name):
        return name, ZERO_UUID, ErrorCode.unknown_topic_or_partition, "This server does not host this topic."
    if not permissions.may(AclOperation.DELETE, name):
        return name, ZERO_UUID, _UNAUTHORIZED, denied
    topic_id = cache.topic_id(name)
    try:
        apis.replica_manager.delete_topic(name)
    except KafkaLogError as e:
        return name, topic_id, error_code_for(e), str(e)
    finally:
        cache.invalidate()
    return name, topic_id, ErrorCode.none, None


@handles(ApiKey.DELETE_TOPICS, 1, 6)
async def handle_delete_topics_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DELETE_TOPICS, request.api_version)
    result_cls = nested_type(cls, "DeletableTopicResult")
    wanted = (
        [(t.name, t.topic_id) for t in body.topics]
        if hasattr(body, "topics")
        else [(name, None) for name in body.topic_names]
    )
    permissions = _Permissions(apis, request)
    results = []
    for name, topic_id in wanted:
        name, found_id, error, message = _delete(apis, permissions, name, topic_id)
        if error == ErrorCode.none:
            log.info("Deleted topic %s for %s", name, request.connection_id)
            manager = apis.components.get(GROUP_METADATA_MANAGER)
            if manager is not None and name is not None:
                # Kafka's onPartitionsDeleted: the groups' offsets of a deleted topic go too
                await manager.remove_offsets_of_topic(name)
        results.append(
            build(result_cls, name=name, topic_id=found_id, error_code=error, error_message=message)
        )
    return build(cls, throttle_time=ZERO_DELAY, responses=tuple(results))
