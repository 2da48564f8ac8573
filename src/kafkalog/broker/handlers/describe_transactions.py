"""DescribeTransactions (65), v0 (KIP-664, Kafka's ``handleDescribeTransactionsRequest``): the state,
producer id and epoch, timeout, start time and partitions of each transactional id;
TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not know, INVALID_REQUEST for an empty one.
An id the principal may not DESCRIBE gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED (the other fields
at the schema's defaults, as Kafka leaves them), and a transaction's partitions are listed only for
the topics it may DESCRIBE."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type

_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


@handles(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
async def handle_describe_transactions_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DESCRIBE_TRANSACTIONS, request.api_version)
    state_cls = nested_type(cls, "TransactionState")
    topic_cls = nested_type(cls, "TopicData")
    manager = transaction_coordinator(apis).state_manager
    states = []
    for transactional_id in body.transactional_ids:
        if not authorize(
            apis, request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            states.append(
                state_cls(
                    error_code=ErrorCode.transactional_id_authorization_failed,
                    transactional_id=transactional_id,
                    transaction_state="",
                    transaction_timeout=datetime.timedelta(0),
                    transaction_start_time=_EPOCH,
                    producer_id=0,
                    producer_epoch=0,
                    topics=(),
                )
            )
            continue
        metadata = manager.get(transactional_id) if transactional_id else None
        error = (
            ErrorCode.none
            if metadata is not None
            else ErrorCode.transactional_id_not_found
            if transactional_id
            else ErrorCode.invalid_request
        )
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(metadata.partitions if metadata is not None else ()):
            by_topic.setdefault(topic, []).append(partition)
        by_topic = {
            topic: partitions
            for topic, partitions in by_topic.items()
            if authorize(apis, request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
        }
        # an entry for an error keeps the schema's defaults (0), as Kafka's does
        start = metadata.txn_start_timestamp if metadata is not None else 0
        states.append(
            state_cls(
                error_code=error,
                transactional_id=transactional_id,
                transaction_state=metadata.state.state_name if metadata is not None else "",
                transaction_timeout=datetime.timedelta(
                    milliseconds=metadata.txn_timeout_ms if metadata else 0
                ),
                # -1 (not started) is written as -1, as Kafka does
                transaction_start_time=_EPOCH + datetime.timedelta(milliseconds=start),
                producer_id=metadata.producer_id if metadata is not None else 0,
                producer_epoch=metadata.producer_epoch if metadata is not None else 0,
                topics=tuple(topic_cls(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            )
        )
    return build(cls, throttle_time=ZERO_DELAY, transaction_states=tuple(states))
