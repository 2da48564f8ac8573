"""kafkalog's exception hierarchy -> Kafka's error codes, in one place (Kafka's ``Errors.forException``).

The most specific class wins (the exception's MRO is walked), so ``InvalidTimestampError`` maps to
INVALID_TIMESTAMP although it is also a ``RecordValidationError``.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalog import errors

__all__ = ["error_code_for"]

_CODES: dict[type[BaseException], ErrorCode] = {
    errors.UnknownTopicOrPartitionError: ErrorCode.unknown_topic_or_partition,
    errors.OffsetOutOfRangeError: ErrorCode.offset_out_of_range,
    errors.PolicyViolationError: ErrorCode.policy_violation,
    errors.CorruptRecordError: ErrorCode.corrupt_message,
    errors.RecordTooLargeError: ErrorCode.message_too_large,
    errors.RecordBatchTooLargeError: ErrorCode.record_list_too_large,
    errors.InvalidTimestampError: ErrorCode.invalid_timestamp,
    errors.RecordValidationError: ErrorCode.invalid_record,
    errors.InvalidRecordError: ErrorCode.invalid_record,
    errors.UnknownCompressionTypeError: ErrorCode.unknown_server_error,
    errors.UnsupportedCompressionTypeError: ErrorCode.unsupported_compression_type,
    errors.UnsupportedForMessageFormatError: ErrorCode.unsupported_for_message_format,
    errors.OutOfOrderSequenceError: ErrorCode.out_of_order_sequence_number,
    errors.InvalidProducerEpochError: ErrorCode.invalid_producer_epoch,
    errors.InvalidTxnStateError: ErrorCode.invalid_txn_state,
    errors.TransactionCoordinatorFencedError: ErrorCode.transaction_coordinator_fenced,
    errors.InvalidTopicError: ErrorCode.invalid_topic_exception,
    errors.TopicExistsError: ErrorCode.topic_already_exists,
    errors.InvalidConfigError: ErrorCode.invalid_config,
    errors.KafkaStorageError: ErrorCode.kafka_storage_error,
    errors.UnsupportedVersionError: ErrorCode.unsupported_version,
    errors.InvalidRequestError: ErrorCode.invalid_request,
    errors.BrokerNotAvailableError: ErrorCode.broker_not_available,
    errors.FencedLeaderEpochError: ErrorCode.fenced_leader_epoch,
    errors.UnknownLeaderEpochError: ErrorCode.unknown_leader_epoch,
}


def error_code_for(exc: BaseException) -> ErrorCode:
    """Kafka's error code for ``exc``; UNKNOWN_SERVER_ERROR for anything unexpected."""
    for cls in type(exc).__mro__:
        code = _CODES.get(cls)
        if code is not None:
            return code
    return ErrorCode.unknown_server_error
