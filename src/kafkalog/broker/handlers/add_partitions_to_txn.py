"""AddPartitionsToTxn (24), v0-v3: a transactional producer names the partitions it is about to write
(Kafka's ``handleAddPartitionsToTxnRequest``). Every partition must exist, or none is added: the
missing ones get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED. Otherwise every
partition gets the coordinator's one answer. v4+ (brokers verifying on a client's behalf, KIP-890)
is not served: kafkalog's Produce asks its own coordinator."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 3)
async def handle_add_partitions_to_txn_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.ADD_PARTITIONS_TO_TXN, request.api_version)
    topic_cls = nested_type(cls, "AddPartitionsToTxnTopicResult")
    partition_cls = nested_type(cls, "AddPartitionsToTxnPartitionResult")
    log_manager = apis.log_manager
    wanted = [(t.name, int(p)) for t in body.v3_and_below_topics for p in t.partitions]
    missing = {
        tp for tp in wanted if not log_manager.has_topic(tp[0]) or tp[1] not in log_manager.partitions(tp[0])
    }
    if missing:
        errors = {
            tp: ErrorCode.unknown_topic_or_partition if tp in missing else ErrorCode.operation_not_attempted
            for tp in wanted
        }
    else:
        error = transaction_coordinator(apis).handle_add_partitions_to_transaction(
            body.v3_and_below_transactional_id,
            int(body.v3_and_below_producer_id),
            int(body.v3_and_below_producer_epoch),
            set(wanted),
        )
        if request.api_version < 2 and error == ErrorCode.producer_fenced:
            error = int(ErrorCode.invalid_producer_epoch)
        errors = dict.fromkeys(wanted, ErrorCode(error))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in wanted:
        by_topic.setdefault(topic, []).append(partition)
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        results_by_topic_v3_and_below=tuple(
            topic_cls(
                name=topic,
                results_by_partition=tuple(
                    partition_cls(partition_index=p, partition_error_code=errors[(topic, p)])
                    for p in partitions
                ),
            )
            for topic, partitions in by_topic.items()
        ),
    )
