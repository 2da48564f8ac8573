"""ListTransactions (66), v0-v2 (KIP-664, Kafka's ``TransactionStateManager.listTransactionStates``):
every transactional id the coordinator knows, filtered by state names (an unknown name is echoed in
``unknown_state_filters`` and matches nothing), producer ids, how long the transaction has been
running (v1+: longer than ``duration_filter`` ms since it started) and a regular expression the whole
id must match (v2+). Only the ids the principal may DESCRIBE are listed."""

from __future__ import annotations

import re
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.broker.txn.transaction_state import TransactionState
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.LIST_TRANSACTIONS, 0, 2)
async def handle_list_transactions_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.LIST_TRANSACTIONS, request.api_version)
    state_cls = nested_type(cls, "TransactionState")
    coordinator = transaction_coordinator(apis)
    # Kafka reads the filters as a set: an unknown name is reported once
    filters = dict.fromkeys(body.state_filters)
    unknown = tuple(name for name in filters if TransactionState.parse(name) is None)
    states = {TransactionState.parse(name) for name in body.state_filters} - {None}
    producer_ids = {int(p) for p in body.producer_id_filters}
    duration = int(getattr(body, "duration_filter", -1))
    pattern_text = getattr(body, "transactional_id_pattern", None)
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error:
        return build(
            cls,
            throttle_time=ZERO_DELAY,
            error_code=ErrorCode.invalid_regular_expression,
            unknown_state_filters=unknown,
            transaction_states=(),
        )
    now = apis.log_manager.time.milliseconds()
    found = []
    for metadata in sorted(coordinator.state_manager.states(), key=lambda m: m.transactional_id):
        if body.state_filters and metadata.state not in states:
            continue
        if producer_ids and metadata.producer_id not in producer_ids:
            continue
        if metadata.state is TransactionState.DEAD:
            continue
        if duration >= 0 and now - metadata.txn_start_timestamp <= duration:
            continue
        if pattern is not None and not pattern.fullmatch(metadata.transactional_id):
            continue
        if not authorize(
            apis, request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, metadata.transactional_id
        ):
            continue
        found.append(
            state_cls(
                transactional_id=metadata.transactional_id,
                producer_id=metadata.producer_id,
                transaction_state=metadata.state.state_name,
            )
        )
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=tuple(found),
    )
