"""TxnOffsetCommit (28), v0-v4: a transactional producer commits a consumer group's offsets inside
its transaction (Kafka's ``handleTxnOffsetCommitRequest`` → ``GroupCoordinator.handleTxnCommitOffsets``).
The commits are written to ``__consumer_offsets`` in a transactional batch and become the group's
offsets only when the transaction commits (its marker); until then OffsetFetch does not see them,
and with ``require_stable`` reports UNSTABLE_OFFSET_COMMIT. Per partition: UNKNOWN_TOPIC_OR_PARTITION
for a partition the broker does not have, OFFSET_METADATA_TOO_LARGE past
``offset.metadata.max.bytes``. The group's partition must have joined the transaction
(AddOffsetsToTxn, verified as Kafka 4 does when ``transaction.partition.verification.enable``):
INVALID_TXN_STATE otherwise, INVALID_PRODUCER_EPOCH for an old epoch. v5 (KIP-890's implicit
AddOffsetsToTxn) is not served.

Authorization, in KafkaApis' order, each failure refusing every partition: WRITE on the
transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED; it stands for the producer id too), READ on
the group (GROUP_AUTHORIZATION_FAILED); then READ on each topic (TOPIC_AUTHORIZATION_FAILED for its
partitions), as OffsetCommit."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.group.coordinator_of import group_coordinator
from kafkalog.broker.group.manager_of import group_metadata_manager
from kafkalog.broker.group.offsets_topic import GROUP_METADATA_TOPIC_NAME
from kafkalog.broker.handlers import handles
from kafkalog.broker.handlers.offset_commit import (
    commit_response_topics,
    commit_values,
    every_partition,
    split_too_large,
)
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type
from kafkalog.protocol.group_metadata_records import OffsetCommitValue


def _verify(apis: Any, body: Any) -> int:
    """The group's ``__consumer_offsets`` partition must be in the producer's Ongoing transaction
    (AddOffsetsToTxn), as Kafka 4 verifies it: otherwise the commits would wait for a marker that
    never comes."""
    partition = (GROUP_METADATA_TOPIC_NAME, group_metadata_manager(apis).partition_for(body.group_id))
    return transaction_coordinator(apis).verify_partition(
        body.transactional_id, int(body.producer_id), int(body.producer_epoch), partition
    )


@handles(ApiKey.TXN_OFFSET_COMMIT, 0, 4)
async def handle_txn_offset_commit_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.TXN_OFFSET_COMMIT, request.api_version)
    topic_cls = nested_type(cls, "TxnOffsetCommitResponseTopic")
    partition_cls = nested_type(cls, "TxnOffsetCommitResponsePartition")
    to_store: dict[tuple[str, int], OffsetCommitValue] = {}
    if not authorize(apis, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        errors = every_partition(body.topics, ErrorCode.transactional_id_authorization_failed)
    elif not authorize(apis, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        errors = every_partition(body.topics, ErrorCode.group_authorization_failed)
    else:
        errors, to_store = commit_values(apis, request, body.topics, apis.log_manager.time.milliseconds(), -1)
    if to_store:
        error = group_coordinator(apis).validate_txn_offset_commit(
            body.group_id,
            getattr(body, "member_id", ""),
            int(getattr(body, "generation_id", -1)),
            getattr(body, "group_instance_id", None),
        )
        if not error and apis.config.get_bool("transaction.partition.verification.enable"):
            error = _verify(apis, body)
        if error:
            errors.update(dict.fromkeys(to_store, error))
        else:
            oversized, fitting = split_too_large(apis, to_store)
            errors.update(oversized)
            if fitting:
                errors.update(
                    await group_metadata_manager(apis).store_txn_offsets(
                        body.group_id, int(body.producer_id), int(body.producer_epoch), fitting
                    )
                )

    return build(
        cls,
        throttle_time=ZERO_DELAY,
        topics=commit_response_topics(body.topics, errors, topic_cls, partition_cls),
    )
