"""``dump-log --transaction-log-decoder``: ``__transaction_state`` records as Kafka's
``kafka-dump-log.sh --transaction-log-decoder`` shows them — the key as
``{"type":"0","data":{"transactionalId":…}}``, the value as ``{"version":"<v>","data":{…}}`` with
the JSON field names of Kafka's ``TransactionLogValue`` (partitions null for an Empty state), and
``<DELETE>`` for the tombstone of an expired transactional id."""

from __future__ import annotations

import struct
from typing import Any

from kafkalog.errors import KafkaLogError
from kafkalog.protocol.transaction_log_records import decode_transaction_log_key, decode_transaction_log_value

__all__ = ["decode_transaction_log_record"]

TOMBSTONE = "<DELETE>"
_EMPTY = 0


def decode_transaction_log_record(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """``{"key": …, "payload": …}`` as JSON-ready objects, or ``{"error": …}``."""
    if key is None:
        return {"error": "a record of __transaction_state without a key"}
    try:
        transactional_id = decode_transaction_log_key(key)
        decoded = None if value is None else decode_transaction_log_value(value)
    except KafkaLogError as e:
        return {"error": str(e)}
    key_json = {"type": str(struct.unpack_from(">h", key)[0]), "data": {"transactionalId": transactional_id}}
    if decoded is None or value is None:
        return {"key": key_json, "payload": TOMBSTONE}
    by_topic: dict[str, list[int]] = {}
    for topic, partition in decoded.partitions:
        by_topic.setdefault(topic, []).append(partition)
    partitions = [{"topic": t, "partitionIds": ids} for t, ids in by_topic.items()]
    version = struct.unpack_from(">h", value)[0]
    # In TransactionLogValue's field order; the tagged fields (v1+) only where they differ from
    # their defaults, as Kafka's generated JSON writer leaves them out.
    data: dict[str, Any] = {"producerId": decoded.producer_id}
    if version >= 1 and decoded.previous_producer_id != -1:
        data["previousProducerId"] = decoded.previous_producer_id
    if version >= 1 and decoded.next_producer_id != -1:
        data["nextProducerId"] = decoded.next_producer_id
    data["producerEpoch"] = decoded.producer_epoch
    data["transactionTimeoutMs"] = decoded.transaction_timeout_ms
    data["transactionStatus"] = decoded.status
    data["transactionPartitions"] = None if decoded.status == _EMPTY and not partitions else partitions
    data["transactionLastUpdateTimestampMs"] = decoded.last_update_timestamp
    data["transactionStartTimestampMs"] = decoded.start_timestamp
    if version >= 1 and decoded.client_transaction_version != 0:
        data["clientTransactionVersion"] = decoded.client_transaction_version
    return {"key": key_json, "payload": {"version": str(version), "data": data}}
