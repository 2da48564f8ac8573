"""InitProducerId (22), v0-v5 (Kafka's ``handleInitProducerIdRequest``).

Without a transactional id: a fresh producer id with epoch 0 for an idempotent producer. With one:
the transaction coordinator's answer (``TransactionCoordinator.handle_init_producer_id``) — the id's
producer id and its next epoch, which fences the previous producer of that transactional id. From v3
a client recovering from an error sends the id and epoch it holds (KIP-360); one without the other
is INVALID_REQUEST. Before v4 a fenced producer is told INVALID_PRODUCER_EPOCH, as older clients do
not know PRODUCER_FENCED.

Authorization comes first: a transactional producer needs WRITE on its transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent one IDEMPOTENT_WRITE on the cluster or,
failing that, WRITE on some topic, whichever (CLUSTER_AUTHORIZATION_FAILED): with idempotence the
producers' default (KIP-679), being allowed to write somewhere suffices."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize, authorize_by_resource_type
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, millis
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.broker.txn.transaction_coordinator import InitProducerIdResult
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


def _denied(apis: Any, request: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    if transactional_id is not None:
        if authorize(apis, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return ErrorCode.transactional_id_authorization_failed
    # The cluster check logs no denial: the topic check may still allow.
    if authorize(
        apis, request, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ) or authorize_by_resource_type(apis, request, AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.cluster_authorization_failed


@handles(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def handle_init_producer_id_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.INIT_PRODUCER_ID, request.api_version)
    denied = _denied(apis, request, body.transactional_id)
    producer_id = int(getattr(body, "producer_id", -1))
    producer_epoch = int(getattr(body, "producer_epoch", -1))
    if denied is not None:
        result = InitProducerIdResult(int(denied))
    elif (producer_id == -1) != (producer_epoch == -1):
        # a producer id without its epoch, or the reverse: refused whether transactional or not, as
        # Kafka's handleInitProducerIdRequest refuses it
        result = InitProducerIdResult(int(ErrorCode.invalid_request))
    elif body.transactional_id is None:
        result = InitProducerIdResult(int(ErrorCode.none), apis.producer_id_manager.generate_producer_id(), 0)
    else:
        expected = None if producer_id == -1 else (producer_id, producer_epoch)
        result = transaction_coordinator(apis).handle_init_producer_id(
            body.transactional_id, millis(body.transaction_timeout), expected
        )
    error = result.error
    if request.api_version < 4 and error == ErrorCode.producer_fenced:
        error = int(ErrorCode.invalid_producer_epoch)
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        error_code=ErrorCode(error),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )
