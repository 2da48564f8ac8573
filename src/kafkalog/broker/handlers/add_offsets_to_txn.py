"""AddOffsetsToTxn (25), v0-v4: the transaction will commit offsets for a group, so the group's
partition of ``__consumer_offsets`` joins it (Kafka's ``handleAddOffsetsToTxnRequest``): the
transaction's markers then decide whether those offsets count. Needs WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.group.manager_of import group_metadata_manager
from kafkalog.broker.group.offsets_topic import GROUP_METADATA_TOPIC_NAME
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4)
async def handle_add_offsets_to_txn_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.ADD_OFFSETS_TO_TXN, request.api_version)
    if not authorize(apis, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        error = int(ErrorCode.transactional_id_authorization_failed)
    elif not authorize(apis, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        error = int(ErrorCode.group_authorization_failed)
    else:
        manager = group_metadata_manager(apis)
        manager.ensure_topic()  # the partition must exist before it can be in a transaction
        partition = (GROUP_METADATA_TOPIC_NAME, manager.partition_for(body.group_id))
        error = transaction_coordinator(apis).handle_add_partitions_to_transaction(
            body.transactional_id, int(body.producer_id), int(body.producer_epoch), {partition}
        )
    if request.api_version < 2 and error == ErrorCode.producer_fenced:
        error = int(ErrorCode.invalid_producer_epoch)
    return build(cls, throttle_time=ZERO_DELAY, error_code=ErrorCode(error))
