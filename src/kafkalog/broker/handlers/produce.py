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
            if body.transactional_id is not None:
                # No transaction coordinator yet: Kafka refuses a transactional write to a partition
                # that was not added to the transaction.
                invalid[key] = PartitionResponse(
                    ErrorCode.invalid_txn_state,
                    error_message=("Transactional produce is not supported by this broker yet"),
                )
                continue
            records = partition.records
            failed = _validate_records(version, records) if records is not None else None
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
