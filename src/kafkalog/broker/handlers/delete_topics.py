"""DeleteTopics (20), v1-v6 (Kafka's ``deleteTopics``): by name, and from v6 by topic id. The
partitions are closed and their directories removed (``ReplicaManager.delete_topic``); fetches parked
on them end at once. Unknown names get UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID.
As Kafka's controller: with ``delete.topic.enable=false`` nothing is deleted (TOPIC_DELETION_DISABLED,
INVALID_REQUEST before v3); an entry naming neither or both of a name and an id, a name or id given
twice, and a name whose id is also given are refused before anything is looked up.

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


_UNKNOWN_NAME = "This server does not host this topic-partition."  # Kafka's default texts
_UNKNOWN_ID = "This server does not host this topic ID."
Result = tuple[str | None, Any, ErrorCode, str | None]  # name, topic id, error, message


Wanted = list[tuple[str | None, Any]]  # (name, topic id) as the request gives them


def _sorted_out(apis: Any, wanted: Wanted) -> tuple[list[Result], Wanted]:
    """Kafka's ``ControllerApis.deleteTopics`` before any lookup: an entry with neither a name nor
    an id, or with both, and every name or id given more than once, is refused (none of it is
    deleted); a name whose topic's id is also given refuses both. (refusals, what is left to do)."""
    refused: list[Result] = []
    names: dict[str, int] = {}
    ids: dict[Any, int] = {}
    for name, topic_id in wanted:
        by_id = topic_id is not None and topic_id != ZERO_UUID
        if name is None and not by_id:
            refused.append((None, ZERO_UUID, ErrorCode.invalid_request,
                            "Neither topic name nor id were specified."))
        elif name is None:
            ids[topic_id] = ids.get(topic_id, 0) + 1
        elif not by_id:
            names[name] = names.get(name, 0) + 1
        else:
            refused.append((name, topic_id, ErrorCode.invalid_request,
                            "You may not specify both topic name and topic id."))
    refused += [(n, ZERO_UUID, ErrorCode.invalid_request, "Duplicate topic name.")
                for n, k in names.items() if k > 1]
    refused += [(None, i, ErrorCode.invalid_request, "Duplicate topic id.") for i, k in ids.items() if k > 1]
    single_ids = {i for i, k in ids.items() if k == 1}
    left: Wanted = []
    for name in (n for n, k in names.items() if k == 1):
        known_id = apis.metadata_cache.topic_id(name)
        if known_id in single_ids:
            single_ids.discard(known_id)
            refused.append((name, known_id, ErrorCode.invalid_request,
                            "The provided topic name maps to an ID that was already supplied."))
        else:
            left.append((name, None))
    left += [(None, i) for i in ids if i in single_ids]
    return refused, left


def _delete(apis: Any, permissions: _Permissions, name: str | None, topic_id: Any) -> Result:
    """(name, topic id, error, message) of one deletion (a name, or an id)."""
    cache = apis.metadata_cache
    by_id = topic_id is not None and topic_id != ZERO_UUID
    denied = authorization_failed_message(_UNAUTHORIZED)
    if by_id:
        name = cache.topic_name(topic_id)
        if name is None:
            return None, topic_id, ErrorCode.unknown_topic_id, _UNKNOWN_ID
        if not permissions.may(AclOperation.DELETE, name):
            shown = name if permissions.may(AclOperation.DESCRIBE, name) else None
            return shown, topic_id, _UNAUTHORIZED, denied
    elif name is not None and not permissions.may(AclOperation.DESCRIBE, name):
        # Refused before the name is looked up: an unknown topic and a hidden one look the same.
        return name, ZERO_UUID, _UNAUTHORIZED, denied
    if name is None or not cache.contains(name):
        return name, ZERO_UUID, ErrorCode.unknown_topic_or_partition, _UNKNOWN_NAME
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
    results = []
    if not apis.config.get_bool("delete.topic.enable"):
        # Kafka refuses the whole request; v0-v2 know no TOPIC_DELETION_DISABLED
        error, message = ((ErrorCode.topic_deletion_disabled, None) if request.api_version >= 3
                          else (ErrorCode.invalid_request, "Topic deletion is disabled."))
        results = [build(result_cls, name=name, topic_id=topic_id if topic_id is not None else ZERO_UUID,
                         error_code=error, error_message=message) for name, topic_id in wanted]
        return build(cls, throttle_time=ZERO_DELAY, responses=tuple(results))
    permissions = _Permissions(apis, request)
    refused, left = _sorted_out(apis, wanted)
    for name, found_id, error, message in refused:
        results.append(build(result_cls, name=name, topic_id=found_id, error_code=error,
                             error_message=message))
    for name, topic_id in left:
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
