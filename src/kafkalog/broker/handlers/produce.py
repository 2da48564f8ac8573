"""Produce (0), v3-v13 (Kafka's ``handleProduceRequest``): decode with the records left as views into
the frame, check what Kafka's ``ProduceRequest.validateRecords`` checks, hand the partitions to
``ReplicaManager.append_records`` and answer from its callback — or not at all for acks=0."""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.handlers import ApiHandler, register
from kafkalog.broker.replica_manager import PartitionResponse, TopicPartition
from kafkalog.broker.request import RequestContext
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.errors import CorruptRecordError, InvalidRequestError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.produce_request import FIRST_TOPIC_ID, ProduceRequestData, decode_produce_request
from kafkalog.protocol.produce_response import (
    PartitionProduceResult,
    TopicProduceResult,
    encode_produce_response,
)
from kafkalog.records import MAGIC_V2, CompressionType
from kafkalog.records.memory import iter_batches

log = logging.getLogger(__name__)


def _validate_records(version: int, records: memoryview) -> PartitionResponse | None:
    """v3+ carries exactly one magic-2 batch; zstd needs v7+ (Kafka's ``ProduceRequest.validateRecords``,
    the batches read as its ``ByteBufferLogInputStream`` reads them: ``iter_batches(in_memory=True)``).
    Bytes after the batch too few to be another are allowed: the log trims them, as Kafka's does."""
    batches = iter_batches(records, in_memory=True)
    try:
        first = next(batches, None)
        if first is None:
            return _refused(
                ErrorCode.invalid_record,
                f"Produce requests with version {version} must have at least one record batch per partition",
            )
        if first.magic != MAGIC_V2:
            return _refused(
                ErrorCode.invalid_record,
                f"Produce requests with version {version} are only allowed to contain record batches "
                "with magic version 2",
            )
        if first.compression_type == CompressionType.ZSTD and version < 7:
            return _refused(
                ErrorCode.unsupported_compression_type,
                f"Produce requests with version {version} are not allowed to use ZStandard compression",
            )
        if next(batches, None) is not None:
            return _refused(
                ErrorCode.invalid_record,
                f"Produce requests with version {version} are only allowed to contain exactly one "
                "record batch per partition",
            )
    except CorruptRecordError as e:  # a size below any batch's, or a magic above 2
        return _refused(ErrorCode.corrupt_message, str(e))
    return None


def _verify_transaction(apis: Any, transactional_id: str, tp: TopicPartition,
                        records: memoryview) -> PartitionResponse | None:
    """A transactional batch must belong to the Ongoing transaction that added this partition
    (Kafka's produce-side verification, KIP-890 part 1, ``transaction.partition.verification.enable``):
    otherwise a late or stray write would open a transaction nobody ends, and hold the partition's
    last stable offset until it timed out. Errors as Kafka's ``handleProduceAppend`` translates them."""
    batch = next(iter_batches(records, in_memory=True))
    if not batch.is_transactional or batch.producer_id < 0:
        return None
    error = transaction_coordinator(apis).verify_partition(
        transactional_id, batch.producer_id, batch.producer_epoch, (tp.topic, tp.partition))
    if error == ErrorCode.none:
        return None
    if error == ErrorCode.invalid_txn_state:
        return _refused(ErrorCode.invalid_txn_state, "Partition was not added to the transaction")
    if error == ErrorCode.concurrent_transactions:  # retriable without a metadata refresh
        return _refused(ErrorCode.not_enough_replicas, "Unable to verify the partition has been added to the "
                        "transaction. Underlying error: CONCURRENT_TRANSACTIONS")
    return PartitionResponse(ErrorCode(error))


def _refused(error: ErrorCode, message: str) -> PartitionResponse:
    return PartitionResponse(error, error_message=message)


def _decode(frame: memoryview, offset: int, version: int) -> ProduceRequestData:
    return decode_produce_request(frame, offset, version)


async def handle_produce_request(apis: Any, request: RequestContext, body: ProduceRequestData) -> Any:
    version = request.api_version
    cache = apis.metadata_cache
    entries: dict[TopicPartition, memoryview | None] = {}
    invalid: dict[TopicPartition, PartitionResponse] = {}
    order: list[tuple[Any, TopicPartition]] = []  # (the topic as the client named it, partition)
    transactional_id = body.transactional_id
    verify = transactional_id is not None and apis.config.get_bool(
        "transaction.partition.verification.enable")
    for topic in body.topics:
        name = topic.name
        if name is None:  # v13+: by topic id
            name = cache.topic_name(topic.topic_id) if topic.topic_id is not None else None
        for partition in topic.partitions:
            key = TopicPartition(name if name is not None else "", partition.partition_index)
            order.append((topic.topic_id if topic.name is None else topic.name, key))
            if name is None:
                invalid[key] = PartitionResponse(ErrorCode.unknown_topic_id)
                continue
            records = partition.records
            failed = _validate_records(version, records) if records is not None else None
            if failed is None and records is not None and verify and transactional_id is not None:
                failed = _verify_transaction(apis, transactional_id, key, records)
            if failed is not None:
                invalid[key] = failed
            else:
                entries[key] = records

    results: dict[TopicPartition, PartitionResponse] = dict(invalid)
    apis.replica_manager.append_records(body.timeout_ms, body.acks, entries, results.update)
    if body.acks == 0:
        failures = [f"{tp} ({r.error.name})" for tp, r in results.items() if r.error != ErrorCode.none]
        if failures:
            # The client never reads an answer: Kafka closes the connection so that it notices and
            # refreshes its metadata.
            raise InvalidRequestError(
                f"acks=0 produce failed for {', '.join(failures)}; closing the connection"
            )
        return None

    by_topic: dict[Any, list[PartitionProduceResult]] = {}
    for topic_key, tp in order:
        r = results[tp]
        by_topic.setdefault(topic_key, []).append(
            PartitionProduceResult(
                tp.partition,
                r.error,
                r.base_offset,
                r.log_append_time,
                r.log_start_offset,
                r.record_errors,
                r.error_message if r.error != ErrorCode.none else None,
            )
        )
    topics = [
        TopicProduceResult(
            key if version < FIRST_TOPIC_ID else None, key if version >= FIRST_TOPIC_ID else None, parts
        )
        for key, parts in by_topic.items()
    ]
    return [encode_produce_response(version, topics)]


register(ApiHandler(ApiKey.PRODUCE, 3, 13, handle_produce_request, _decode))
