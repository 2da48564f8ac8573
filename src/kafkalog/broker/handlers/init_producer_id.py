"""InitProducerId (22), v0-v5: a fresh producer id with epoch 0 for an idempotent producer (Kafka's
``TransactionCoordinator.handleInitProducerId`` with a null transactional id). Transactional ids
need a transaction coordinator: COORDINATOR_NOT_AVAILABLE until one is attached."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def handle_init_producer_id_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.INIT_PRODUCER_ID, request.api_version)
    if body.transactional_id is not None:
        return build(
            cls,
            throttle_time=ZERO_DELAY,
            error_code=ErrorCode.coordinator_not_available,
            producer_id=-1,
            producer_epoch=-1,
        )
    producer_id = apis.producer_id_manager.generate_producer_id()
    return build(
        cls, throttle_time=ZERO_DELAY, error_code=ErrorCode.none, producer_id=producer_id, producer_epoch=0
    )
