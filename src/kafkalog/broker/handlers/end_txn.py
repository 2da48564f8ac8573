"""EndTxn (26), v0-v4: commit or abort the producer's transaction (Kafka's ``handleEndTxnRequest``).
v5 (KIP-890's epoch bump at every transaction) is not served, so clients stay on transaction
version 1. Before v2 a fenced producer is told INVALID_PRODUCER_EPOCH. Needs WRITE on the
transactional id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.END_TXN, 0, 4)
async def handle_end_txn_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.END_TXN, request.api_version)
    if not authorize(apis, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        error = int(ErrorCode.transactional_id_authorization_failed)
    else:
        error = transaction_coordinator(apis).handle_end_transaction(
            body.transactional_id, int(body.producer_id), int(body.producer_epoch), bool(body.committed)
        )
    if request.api_version < 2 and error == ErrorCode.producer_fenced:
        error = int(ErrorCode.invalid_producer_epoch)
    return build(cls, throttle_time=ZERO_DELAY, error_code=ErrorCode(error))
