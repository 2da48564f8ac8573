"""``dump-log --offsets-decoder``: ``__consumer_offsets`` records as Kafka's ``kafka-dump-log.sh
--offsets-decoder`` shows them — the key as ``{"type":"<key version>","data":{…}}``, the value as
``{"version":"<value version>","data":{…}}`` with Kafka's JSON field names and the fields of that
version only (bytes in base64; a ``consumer`` group's member subscriptions and assignments decoded,
as Kafka's tool shows them since 3.8), and ``<DELETE>`` for a tombstone. A record that is not one of
these is shown with an ``error``."""

from __future__ import annotations

import base64
import struct
from typing import Any

from kafkalog.errors import KafkaLogError
from kafkalog.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_assignment, decode_subscription
from kafkalog.protocol.group_metadata_records import (
    GroupMetadataValue,
    OffsetCommitKey,
    decode_key,
    decode_value,
)

__all__ = ["decode_offsets_record"]

TOMBSTONE = "<DELETE>"


def _key_json(key: Any, version: int) -> dict[str, Any]:
    if isinstance(key, OffsetCommitKey):
        data: dict[str, Any] = {"group": key.group, "topic": key.topic, "partition": key.partition}
    else:
        data = {"group": key.group}
    return {"type": str(version), "data": data}


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _partitions_json(partitions: tuple[tuple[str, tuple[int, ...]], ...]) -> list[dict[str, Any]]:
    return [{"topic": topic, "partitions": list(ids)} for topic, ids in partitions]


def _subscription_json(data: bytes) -> Any:
    """A consumer's subscription as ``ConsumerProtocolSubscriptionJsonConverter`` writes it (the
    fields of its own version), or the bytes in base64 when they do not decode, as Kafka keeps them."""
    try:
        sub = decode_subscription(data)
    except KafkaLogError:
        return _b64(data)
    out: dict[str, Any] = {"topics": list(sub.topics), "userData": _b64(sub.user_data)}
    if sub.version >= 1:
        out["ownedPartitions"] = _partitions_json(sub.owned_partitions)
    if sub.version >= 2:
        out["generationId"] = sub.generation_id
    if sub.version >= 3:
        out["rackId"] = sub.rack_id
    return out


def _assignment_json(data: bytes) -> Any:
    try:
        assignment = decode_assignment(data)
    except KafkaLogError:
        return _b64(data)
    return {"assignedPartitions": _partitions_json(assignment.assigned_partitions),
            "userData": _b64(assignment.user_data)}


def _member_json(m: Any, version: int, consumer: bool) -> dict[str, Any]:
    # GroupMetadataValue's fields by version: rebalanceTimeout from v1, groupInstanceId from v3
    # (Kafka's JSON writer leaves out what the record's version does not have).
    member: dict[str, Any] = {"memberId": m.member_id}
    if version >= 3:
        member["groupInstanceId"] = m.group_instance_id
    member["clientId"] = m.client_id
    member["clientHost"] = m.client_host
    if version >= 1:
        member["rebalanceTimeout"] = m.rebalance_timeout
    member["sessionTimeout"] = m.session_timeout
    # The "consumer" protocol's member metadata decoded, as Kafka's dump tool does since 3.8.
    member["subscription"] = _subscription_json(m.subscription) if consumer else _b64(m.subscription)
    member["assignment"] = _assignment_json(m.assignment) if consumer else _b64(m.assignment)
    return member


def _value_json(value: Any, version: int) -> dict[str, Any]:
    if isinstance(value, GroupMetadataValue):
        data: dict[str, Any] = {
            "protocolType": value.protocol_type,
            "generation": value.generation,
            "protocol": value.protocol,
            "leader": value.leader,
        }
        if version >= 2:
            data["currentStateTimestamp"] = value.current_state_timestamp
        consumer = value.protocol_type == CONSUMER_PROTOCOL_TYPE
        data["members"] = [_member_json(m, version, consumer) for m in value.members]
    else:
        data = {"offset": value.offset}
        if version >= 3:
            data["leaderEpoch"] = value.leader_epoch
        data["metadata"] = value.metadata
        data["commitTimestamp"] = value.commit_timestamp
        if version == 1:
            data["expireTimestamp"] = value.expire_timestamp
    return {"version": str(version), "data": data}


def decode_offsets_record(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """``{"key": …, "payload": …}`` as JSON-ready objects (``payload`` is ``"<DELETE>"`` for a
    tombstone), or ``{"error": …}`` for bytes that are not a classic group record."""
    if key is None:
        return {"error": "a record of __consumer_offsets without a key"}
    try:
        parsed = decode_key(key)
        decoded = decode_value(parsed, value)
    except KafkaLogError as e:
        return {"error": str(e)}
    key_version = struct.unpack_from(">h", key)[0]
    if decoded is None:
        return {"key": _key_json(parsed, key_version), "payload": TOMBSTONE}
    assert value is not None
    value_version = struct.unpack_from(">h", value)[0]
    return {"key": _key_json(parsed, key_version), "payload": _value_json(decoded, value_version)}

