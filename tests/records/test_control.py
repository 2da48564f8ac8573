"""Control record keys and end-transaction markers (spec §3.7)."""

from __future__ import annotations

import pytest

from kafkalog.errors import InvalidRecordError
from kafkalog.records import (
    ControlRecordType,
    EndTransactionMarker,
    Record,
    TimestampType,
    control_record_key,
    parse_control_record_type,
)


@pytest.mark.parametrize("control_type", [t for t in ControlRecordType if t is not ControlRecordType.UNKNOWN])
def test_key_round_trip(control_type: ControlRecordType) -> None:
    key = control_record_key(control_type)
    assert key == b"\x00\x00" + control_type.value.to_bytes(2, "big")
    assert parse_control_record_type(key) is control_type


def test_unknown_type_and_newer_key_versions() -> None:
    assert parse_control_record_type(b"\x00\x00\x00\x63") is ControlRecordType.UNKNOWN
    # a newer key version is parsed as version 0, extra bytes ignored
    assert parse_control_record_type(b"\x00\x05\x00\x01extra") is ControlRecordType.COMMIT
    with pytest.raises(InvalidRecordError):
        control_record_key(ControlRecordType.UNKNOWN)


@pytest.mark.parametrize("key", [None, b"", b"\x00\x00\x00"])
def test_short_keys_are_invalid(key: bytes | None) -> None:
    with pytest.raises(InvalidRecordError, match="at least 4 bytes"):
        parse_control_record_type(key)


def test_negative_key_version_is_invalid() -> None:
    with pytest.raises(InvalidRecordError, match="Invalid version"):
        parse_control_record_type(b"\xff\xff\x00\x00")


def test_end_transaction_marker_round_trip() -> None:
    marker = EndTransactionMarker(ControlRecordType.ABORT, 11)
    assert marker.serialize_key() == b"\x00\x00\x00\x00"
    assert marker.serialize_value() == b"\x00\x00\x00\x00\x00\x0b"
    record = Record(7, 1, TimestampType.CREATE_TIME, marker.serialize_key(), marker.serialize_value())
    assert EndTransactionMarker.deserialize(record) == marker
    commit = EndTransactionMarker(ControlRecordType.COMMIT, -5)
    assert (
        EndTransactionMarker.deserialize_value(ControlRecordType.COMMIT, commit.serialize_value()) == commit
    )


def test_end_transaction_marker_rejects_other_types_and_short_values() -> None:
    with pytest.raises(InvalidRecordError):
        EndTransactionMarker(ControlRecordType.LEADER_CHANGE, 1)
    with pytest.raises(InvalidRecordError, match="at least 6 bytes"):
        EndTransactionMarker.deserialize_value(ControlRecordType.COMMIT, b"\x00\x00\x00")
    with pytest.raises(InvalidRecordError, match="at least 6 bytes"):
        EndTransactionMarker.deserialize_value(ControlRecordType.COMMIT, None)
    with pytest.raises(InvalidRecordError, match="Invalid version"):
        EndTransactionMarker.deserialize_value(ControlRecordType.ABORT, b"\x80\x00\x00\x00\x00\x01")
    leader_change = Record(0, 1, TimestampType.CREATE_TIME, b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x00")
    with pytest.raises(InvalidRecordError):
        EndTransactionMarker.deserialize(leader_change)
