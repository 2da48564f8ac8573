"""The records of ``__transaction_state``, in Kafka's own schemas (its ``TransactionLogKey`` and
``TransactionLogValue`` messages), so Apache Kafka's tools and coordinator read what kafkalog writes.

A record's key and value each start with an int16 version. The key (v0) is the transactional id.
The value is the transaction's whole state after a transition; a null value (tombstone) says the
transactional id expired. Kafka writes value v0 unless ``transaction.version`` 2 is finalized (v1
is flexible and adds three tagged fields); kafkalog serves transaction version 1, so it writes v0
and reads both.

Layouts (v0: string = int16 length + UTF-8, arrays int32 count; v1: compact lengths as unsigned
varint length+1, and a tagged-field section after each struct):

    TransactionLogKey     transactionalId string
    TransactionLogValue   producerId int64, producerEpoch int16, transactionTimeoutMs int32,
                          transactionStatus int8, transactionPartitions [topic string,
                          partitionIds [int32]] (null when the state is Empty),
                          lastUpdateTimestampMs int64, startTimestampMs int64
                          v1 tags: 0 previousProducerId int64, 1 nextProducerId int64,
                          2 clientTransactionVersion int16
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkalog.errors import CorruptRecordError, InvalidRequestError
from kafkalog.protocol.primitives import Reader, write_string

__all__ = [
    "TransactionLogValue",
    "decode_transaction_log_key",
    "decode_transaction_log_value",
    "encode_transaction_log_key",
    "encode_transaction_log_value",
]

_KEY_VERSION = 0
_VALUE_VERSION = 0
_HIGHEST_VALUE_VERSION = 1
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMESTAMPS = struct.Struct(">qq")


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    status: int  # TransactionState.id
    partitions: tuple[tuple[str, int], ...]  # sorted (topic, partition)
    last_update_timestamp: int
    start_timestamp: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def encode_transaction_log_key(transactional_id: str) -> bytes:
    out = bytearray(struct.pack(">h", _KEY_VERSION))
    write_string(out, transactional_id)
    return bytes(out)


def encode_transaction_log_value(value: TransactionLogValue, *, empty: bool) -> bytes:
    """v0. ``empty`` (state Empty) writes the partitions as null, as Kafka does."""
    out = bytearray(
        _VALUE_HEAD.pack(
            _VALUE_VERSION,
            value.producer_id,
            value.producer_epoch,
            value.transaction_timeout_ms,
            value.status,
        )
    )
    if empty:
        out += struct.pack(">i", -1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in value.partitions:
            by_topic.setdefault(topic, []).append(partition)
        out += struct.pack(">i", len(by_topic))
        for topic, ids in by_topic.items():
            write_string(out, topic)
            out += struct.pack(f">i{len(ids)}i", len(ids), *ids)
    out += _TIMESTAMPS.pack(value.last_update_timestamp, value.start_timestamp)
    return bytes(out)


def decode_transaction_log_key(data: bytes | memoryview) -> str:
    """The transactional id of a ``__transaction_state`` key; CorruptRecordError otherwise."""
    try:
        r = Reader(memoryview(data))
        version = r.int16()
        if version != _KEY_VERSION:
            raise CorruptRecordError(f"__transaction_state key: unknown version {version}")
        transactional_id = r.nullable_string()
        if transactional_id is None or r.remaining():
            raise CorruptRecordError("__transaction_state key: not a transactional id")
        return transactional_id
    except InvalidRequestError as e:
        raise CorruptRecordError(f"__transaction_state key: {e}") from None


def decode_transaction_log_value(data: bytes | memoryview) -> TransactionLogValue:
    try:
        return _decode_value(Reader(memoryview(data)))
    except InvalidRequestError as e:
        raise CorruptRecordError(f"TransactionLogValue: {e}") from None


def _decode_value(r: Reader) -> TransactionLogValue:
    version = r.int16()
    if not 0 <= version <= _HIGHEST_VALUE_VERSION:
        raise CorruptRecordError(f"TransactionLogValue: unknown version {version}")
    flexible = version >= 1
    producer_id, epoch, timeout, status = r.int64(), r.int16(), r.int32(), r.int8()
    partitions: list[tuple[str, int]] = []
    for _ in range(max(0, r.array_len(flexible, 2))):
        topic = r.compact_nullable_string() if flexible else r.nullable_string()
        if topic is None:
            raise CorruptRecordError("TransactionLogValue: null topic")
        for _ in range(max(0, r.array_len(flexible, 4))):
            partitions.append((topic, r.int32()))
        if flexible:
            r.skip_tagged_fields()
    last_update, start = r.int64(), r.int64()
    previous_id = next_id = -1
    client_version = 0
    if flexible:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            field = r.bytes_view(size)
            if tag in (0, 1) and size == 8:
                (number,) = struct.unpack(">q", field)
                previous_id, next_id = (number, next_id) if tag == 0 else (previous_id, number)
            elif tag == 2 and size == 2:
                (client_version,) = struct.unpack(">h", field)
    if r.remaining():
        raise CorruptRecordError(f"TransactionLogValue: {r.remaining()} bytes after the last field")
    return TransactionLogValue(
        producer_id,
        epoch,
        timeout,
        status,
        tuple(sorted(partitions)),
        last_update,
        start,
        previous_id,
        next_id,
        client_version,
    )
