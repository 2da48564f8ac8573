"""Produce (0), v3-v13 (Kafka's ``handleProduceRequest``): decode with the records left as views into
the frame, check what Kafka's ``ProduceRequest.validateRecords`` checks, hand the partitions to
``ReplicaManager.append_records`` and answer from its callback — or not at all for acks=0.

Kafka's order: transactional records need a transactional id (and, with an authorizer, WRITE on
it), else every partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then per partition, with an
authorizer WRITE on the topic (TOPIC_AUTHORIZATION_FAILED, before anything says whether it exists),
the partition must exist (UNKNOWN_TOPIC_OR_PARTITION), its records pass ``validateRecords`` and, for
a transactional batch, the transaction must hold the partition (KIP-890 verification). These
refusals carry no error message, as Kafka's; only the log's record validation and the verification
say more. A failed acks=0 request closes the connection, as any failed acks=0 produce does."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation, ResourceType
from kafkalog.broker.auth_helper import (
    authorize,
    authorized_names,
    authorizer,
)
from kafkalog.broker.handlers import ApiHandler, register
from kafkalog.broker.replica_manager import PartitionResponse, TopicPartition
from kafkalog.broker.request import RequestContext
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.errors import CorruptRecordError, InvalidRequestError, UnknownCompressionTypeError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.produce_request import (
    FIRST_TOPIC_ID,
    ProduceRequestData,
    TopicProduceData,
    decode_produce_request,
)
from kafkalog.protocol.produce_response import (
    PartitionProduceResult,
    TopicProduceResult,
    encode_produce_response,
)
from kafkalog.records import MAGIC_V2, CompressionType
from kafkalog.records.memory import iter_batches

log = logging.getLogger(__name__)


class _UnknownCodec(Exception):
    """A pre-v7 request whose first batch names a codec no Kafka knows: Kafka's ``validateRecords``
    asks for the codec there and its IllegalArgumentException fails the whole request."""


def _validate_records(version: int, records: memoryview) -> PartitionResponse | None:
    """v3+ carries exactly one magic-2 batch; zstd needs v7+ (Kafka's ``ProduceRequest.validateRecords``,
    the batches read as its ``ByteBufferLogInputStream`` reads them: ``iter_batches(in_memory=True)``).
    Bytes after the batch too few to be another are allowed: the log trims them, as Kafka's does.
    The refusals carry no message, as Kafka's ``PartitionResponse(Errors.forException(e))``."""
    batches = iter_batches(records, in_memory=True)
    try:
        first = next(batches, None)
        if first is None or first.magic != MAGIC_V2:
            return PartitionResponse(ErrorCode.invalid_record)
        # From v7 the codec is not asked for here (the log's validation reads it).
        if version < 7:
            try:
                codec = first.compression_type
            except UnknownCompressionTypeError:
                raise _UnknownCodec from None
            if codec == CompressionType.ZSTD:
                return PartitionResponse(ErrorCode.unsupported_compression_type)
        if next(batches, None) is not None:
            return PartitionResponse(ErrorCode.invalid_record)
    except CorruptRecordError:  # a size below any batch's, or a magic above 2
        return PartitionResponse(ErrorCode.corrupt_message)
    return None


def _verify_transaction(
    apis: Any, version: int, transactional_id: str, tp: TopicPartition, records: memoryview
) -> PartitionResponse | None:
    """A transactional batch must belong to the Ongoing transaction that added this partition
    (Kafka's produce-side verification, KIP-890 part 1, ``transaction.partition.verification.enable``):
    otherwise a late or stray write would open a transaction nobody ends, and hold the partition's
    last stable offset until it timed out. Errors as Kafka's ``handleProduceAppend`` translates them."""
    try:
        batch = next(iter_batches(records, in_memory=True))
        if not batch.is_transactional or batch.producer_id < 0:
            return None
        producer_id, producer_epoch = batch.producer_id, batch.producer_epoch
    except CorruptRecordError:
        return None  # a header too short to read: validation answers CORRUPT_MESSAGE
    error = transaction_coordinator(apis).verify_partition(
        transactional_id, producer_id, producer_epoch, (tp.topic, tp.partition)
    )
    if error == ErrorCode.none:
        return None
    if error == ErrorCode.invalid_txn_state:
        # Kafka's coordinator says TRANSACTION_ABORTABLE; requests before v11 get INVALID_TXN_STATE
        # (clients of then do not know the newer error), with this message.
        if version > 10:
            return PartitionResponse(ErrorCode.transaction_abortable)
        return _refused(ErrorCode.invalid_txn_state, "Partition was not added to the transaction")
    if error == ErrorCode.concurrent_transactions:  # retriable without a metadata refresh
        return _refused(
            ErrorCode.not_enough_replicas,
            "Unable to verify the partition has been added to the "
            "transaction. Underlying error: CONCURRENT_TRANSACTIONS",
        )
    return PartitionResponse(ErrorCode(error))


def _refused(error: ErrorCode, message: str) -> PartitionResponse:
    return PartitionResponse(error, error_message=message)


def _decode(frame: memoryview, offset: int, version: int) -> ProduceRequestData:
    return decode_produce_request(frame, offset, version)


def _has_transactional_records(body: ProduceRequestData) -> bool:
    """Whether some partition's first batch is transactional (Kafka's
    ``RequestUtils.hasTransactionalRecords``); records too corrupt to tell are left to validation."""
    for topic in body.topics:
        for partition in topic.partitions:
            if partition.records is None:
                continue
            try:
                first = next(iter_batches(partition.records, in_memory=True), None)
                if first is not None and first.is_transactional:
                    return True
            except CorruptRecordError:  # the attributes too may be past a batch cut short
                continue
    return False


def _topic_name(topic: TopicProduceData, cache: Any) -> str | None:
    """The topic's name: as the client gave it, or (v13+) its id's (None: no such topic id)."""
    if topic.name is not None:
        return topic.name
    return cache.topic_name(topic.topic_id) if topic.topic_id is not None else None


def _topic_key(topic: TopicProduceData) -> Any:
    """The topic as the client named it, and as the response names it: its name, or its id."""
    return topic.name if topic.name is not None else topic.topic_id


def _named_partitions(body: ProduceRequestData, cache: Any) -> dict[tuple[Any, int], TopicPartition]:
    """(topic key, partition index) -> partition, in request order, once each."""
    named: dict[tuple[Any, int], TopicPartition] = {}
    for topic in body.topics:
        name = _topic_name(topic, cache) or ""
        for p in topic.partitions:
            named.setdefault((_topic_key(topic), p.partition_index), TopicPartition(name, p.partition_index))
    return named


def _authorize_topics(
    apis: Any, request: RequestContext, body: ProduceRequestData
) -> tuple[list[TopicProduceData], list[tuple[Any, TopicPartition]]]:
    """Each topic needs WRITE on it, before anything says whether it exists: the topics that may be
    written, and the (topic key, partition) of those that may not. A topic id that names no topic
    stays with the first: UNKNOWN_TOPIC_ID comes before authorization."""
    cache = apis.metadata_cache
    named = [(topic, _topic_name(topic, cache)) for topic in body.topics]
    names = (name for _, name in named if name is not None)
    writable = authorized_names(apis, request, AclOperation.WRITE, ResourceType.TOPIC, names)
    allowed: list[TopicProduceData] = []
    denied: list[tuple[Any, TopicPartition]] = []
    for topic, name in named:
        if name is None or name in writable:
            allowed.append(topic)
        else:
            key = _topic_key(topic)
            denied.extend((key, TopicPartition(name, p.partition_index)) for p in topic.partitions)
    return allowed, denied


async def handle_produce_request(apis: Any, request: RequestContext, body: ProduceRequestData) -> Any:
    version = request.api_version
    cache = apis.metadata_cache
    topics: Sequence[TopicProduceData] = body.topics
    denied: list[tuple[Any, TopicPartition]] = []
    transactional_id = body.transactional_id
    # Transactional records need a transactional id (and WRITE on it, with an authorizer), else the
    # whole request fails, as Kafka's handleProduceRequest fails it before anything else.
    if _has_transactional_records(body) and (
        transactional_id is None
        or not authorize(apis, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
    ):
        return _refuse_all(version, body, cache, ErrorCode.transactional_id_authorization_failed)
    if authorizer(apis) is not None:  # without an authorizer, this is all that authorization costs
        topics, denied = _authorize_topics(apis, request, body)
    entries: dict[TopicPartition, memoryview | None] = {}
    invalid: dict[TopicPartition, PartitionResponse] = {}
    # (the topic as the client named it, partition index) -> partition: a partition named twice is
    # answered once, where first named (Kafka's maps by partition)
    order: dict[tuple[Any, int], TopicPartition] = {}
    verify = transactional_id is not None and apis.config.get_bool(
        "transaction.partition.verification.enable"
    )
    try:
        for topic in topics:
            name = _topic_name(topic, cache)
            topic_key = _topic_key(topic)
            for partition in topic.partitions:
                key = TopicPartition(name if name is not None else "", partition.partition_index)
                order.setdefault((topic_key, partition.partition_index), key)
                if name is None:
                    invalid[key] = PartitionResponse(ErrorCode.unknown_topic_id)
                    continue
                # Kafka's order: a partition that does not exist, before its records are looked at.
                if not cache.contains_partition(name, partition.partition_index):
                    invalid[key] = PartitionResponse(ErrorCode.unknown_topic_or_partition)
                    continue
                records = partition.records
                failed = _validate_records(version, records) if records is not None else None
                if failed is None and records is not None and verify and transactional_id is not None:
                    failed = _verify_transaction(apis, version, transactional_id, key, records)
                if failed is not None:
                    invalid[key] = failed
                else:
                    entries[key] = records
    except _UnknownCodec:
        return _refuse_all(version, body, cache, ErrorCode.unknown_server_error)
    for topic_key, tp in denied:
        order.setdefault((topic_key, tp.partition), tp)
        invalid[tp] = PartitionResponse(ErrorCode.topic_authorization_failed)

    results: dict[TopicPartition, PartitionResponse] = {}
    apis.replica_manager.append_records(body.timeout_ms, body.acks, entries, results.update)
    results.update(invalid)  # Kafka merges the refusals last: they win for a partition named twice
    if body.acks == 0:
        _close_on_failure(results)
        return None
    return _response(version, order, results)


def _close_on_failure(results: dict[TopicPartition, PartitionResponse]) -> None:
    failures = [f"{tp} ({r.error.name})" for tp, r in results.items() if r.error != ErrorCode.none]
    if failures:
        # The client never reads an answer: Kafka closes the connection so that it notices and
        # refreshes its metadata.
        raise InvalidRequestError(f"acks=0 produce failed for {', '.join(failures)}; closing the connection")


def _refuse_all(version: int, body: ProduceRequestData, cache: Any, error: ErrorCode) -> list[Any] | None:
    """Kafka's ``ProduceRequest.getErrorResponse``: every partition with the error and no message
    (``ApiError.fromThrowable`` drops a default text, and any for UNKNOWN_SERVER_ERROR); with acks=0
    there is no answer to carry it, so the connection is closed."""
    refused = PartitionResponse(error)
    order = _named_partitions(body, cache)
    results = dict.fromkeys(order.values(), refused)
    if body.acks == 0:
        _close_on_failure(results)
        return None
    return _response(version, order, results)


def _response(
    version: int,
    order: dict[tuple[Any, int], TopicPartition],
    results: dict[TopicPartition, PartitionResponse],
) -> list[Any]:
    by_topic: dict[Any, list[PartitionProduceResult]] = {}
    for (topic_key, _), tp in order.items():
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
