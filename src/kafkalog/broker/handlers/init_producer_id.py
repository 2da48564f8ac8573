"""InitProducerId (22), v0-v5 (Kafka's ``handleInitProducerIdRequest``).

Without a transactional id: a fresh producer id with epoch 0 for an idempotent producer. With one:
the transaction coordinator's answer (``TransactionCoordinator.handle_init_producer_id``) — the id's
producer id and its next epoch, which fences the previous producer of that transactional id. From v3
a client recovering from an error sends the id and epoch it holds (KIP-360); one without the other
is INVALID_REQUEST. Before v4 a fenced producer is told INVALID_PRODUCER_EPOCH, as older clients do
not know PRODUCER_FENCED."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, millis
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.broker.txn.transaction_coordinator import InitProducerIdResult
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def handle_init_producer_id_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.INIT_PRODUCER_ID, request.api_version)
    if body.transactional_id is None:
        result = InitProducerIdResult(int(ErrorCode.none), apis.producer_id_manager.generate_producer_id(), 0)
    else:
        producer_id = int(getattr(body, "producer_id", -1))
        producer_epoch = int(getattr(body, "producer_epoch", -1))
        if (producer_id == -1) != (producer_epoch == -1):
            result = InitProducerIdResult(int(ErrorCode.invalid_request))
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
