"""AddPartitionsToTxn (24), v0-v3: a transactional producer names the partitions it is about to write
(Kafka's ``handleAddPartitionsToTxnRequest``). Every partition must exist, or none is added: the
missing ones get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED. Otherwise every
partition gets the coordinator's one answer. v4+ (brokers verifying on a client's behalf, KIP-890)
is not served: kafkalog's Produce asks its own coordinator. (Kafka authorizes that batched form by
CLUSTER_ACTION on the cluster alone, as only brokers send it.)

Authorization of this client form: WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition; then WRITE on each topic, else
TOPIC_AUTHORIZATION_FAILED for its partitions, which fails the request as a missing partition does
(checked first). With an authorizer an internal topic is never writable this way, not even for a
super user, as Kafka leaves internal topics out of what it authorizes."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize, authorized_names
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type
from kafkalog.storage.log_file_utils import INTERNAL_TOPICS


def _writable_topics(apis: Any, request: RequestContext, names: list[str]) -> set[str]:
    """The topics the request may WRITE. Kafka drops internal topics before asking the authorizer,
    so they come out refused, whoever asks and with or without an authorizer: a transaction never
    writes to ``__consumer_offsets`` or ``__transaction_state`` directly."""
    names = [name for name in names if name not in INTERNAL_TOPICS]
    return authorized_names(apis, request, AclOperation.WRITE, ResourceType.TOPIC, names)


@handles(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 3)
async def handle_add_partitions_to_txn_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.ADD_PARTITIONS_TO_TXN, request.api_version)
    topic_cls = nested_type(cls, "AddPartitionsToTxnTopicResult")
    partition_cls = nested_type(cls, "AddPartitionsToTxnPartitionResult")
    log_manager = apis.log_manager
    transactional_id = body.v3_and_below_transactional_id
    wanted = [(t.name, int(p)) for t in body.v3_and_below_topics for p in t.partitions]
    refused: dict[tuple[str, int], ErrorCode] = {}
    if not authorize(apis, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        refused = dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
    else:
        writable = _writable_topics(apis, request, [t.name for t in body.v3_and_below_topics])
        for tp in wanted:
            if tp[0] not in writable:
                refused[tp] = ErrorCode.topic_authorization_failed
            elif not log_manager.has_topic(tp[0]) or tp[1] not in log_manager.partitions(tp[0]):
                refused[tp] = ErrorCode.unknown_topic_or_partition
    if refused:
        errors = {tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in wanted}
    else:
        error = transaction_coordinator(apis).handle_add_partitions_to_transaction(
            transactional_id,
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
