"""``dump-log --offsets-decoder``: ``__consumer_offsets`` records as Kafka's ``kafka-dump-log.sh
--offsets-decoder`` shows them — the key as ``{"type":"<key version>","data":{…}}``, the value as
``{"version":"<value version>","data":{…}}`` with Kafka's JSON field names (bytes in base64), and
``<DELETE>`` for a tombstone. A record that is not one of these is shown with an ``error``."""

from __future__ import annotations

import base64
import struct
from typing import Any

from kafkalog.errors import KafkaLogError
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


def _value_json(value: Any, version: int) -> dict[str, Any]:
    if isinstance(value, GroupMetadataValue):
        data: dict[str, Any] = {
            "protocolType": value.protocol_type,
            "generation": value.generation,
            "protocol": value.protocol,
            "leader": value.leader,
            "currentStateTimestamp": value.current_state_timestamp,
            "members": [
                {
                    "memberId": m.member_id,
                    "groupInstanceId": m.group_instance_id,
                    "clientId": m.client_id,
                    "clientHost": m.client_host,
                    "rebalanceTimeout": m.rebalance_timeout,
                    "sessionTimeout": m.session_timeout,
                    "subscription": base64.b64encode(m.subscription).decode(),
                    "assignment": base64.b64encode(m.assignment).decode(),
                }
                for m in value.members
            ],
        }
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

