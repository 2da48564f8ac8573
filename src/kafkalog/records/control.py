"""Control records (spec §3.7): the key every control record carries and the end-transaction marker.

Key: ``version i16 (0), type i16``. End-transaction marker value: ``version i16 (0),
coordinatorEpoch i32``. Marker batches are transactional control batches with one record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkalog.errors import InvalidRecordError
from kafkalog.records.types import ControlRecordType, Record

__all__ = [
    "CONTROL_RECORD_KEY_SIZE",
    "CURRENT_CONTROL_RECORD_KEY_VERSION",
    "CURRENT_END_TXN_MARKER_VERSION",
    "END_TXN_MARKER_VALUE_SIZE",
    "EndTransactionMarker",
    "control_record_key",
    "parse_control_record_type",
]

CURRENT_CONTROL_RECORD_KEY_VERSION = 0
CONTROL_RECORD_KEY_SIZE = 4
CURRENT_END_TXN_MARKER_VERSION = 0
END_TXN_MARKER_VALUE_SIZE = 6

_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")
_KNOWN_TYPES = {t.value: t for t in ControlRecordType}


def control_record_key(control_type: ControlRecordType) -> bytes:
    """The 4-byte key of a control record of this type (version 0)."""
    if control_type is ControlRecordType.UNKNOWN:
        raise InvalidRecordError("Cannot write a control record of type UNKNOWN")
    return _KEY.pack(CURRENT_CONTROL_RECORD_KEY_VERSION, control_type.value)


def parse_control_record_type(key: bytes | bytearray | memoryview | None) -> ControlRecordType:
    """Kafka's ``ControlRecordType.parse``: the type named by a control record key.

    Unknown type ids give ``UNKNOWN`` (newer brokers may add types); a short key or a negative
    version is an ``InvalidRecordError``. Newer key versions are parsed as version 0.
    """
    if key is None or len(key) < CONTROL_RECORD_KEY_SIZE:
        found = 0 if key is None else len(key)
        raise InvalidRecordError(
            "Invalid value size found for end control record key. Must have at least "
            f"{CONTROL_RECORD_KEY_SIZE} bytes, but found only {found}"
        )
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidRecordError(
            f"Invalid version found for control record: {version}. May indicate data corruption"
        )
    return _KNOWN_TYPES.get(type_id, ControlRecordType.UNKNOWN)


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """A COMMIT or ABORT marker written by the transaction coordinator."""

    control_type: ControlRecordType
    coordinator_epoch: int

    def __post_init__(self) -> None:
        if self.control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise InvalidRecordError(
                f"Invalid control record type for end transaction marker: {self.control_type!r}"
            )

    def serialize_key(self) -> bytes:
        return control_record_key(self.control_type)

    def serialize_value(self) -> bytes:
        return _MARKER.pack(CURRENT_END_TXN_MARKER_VERSION, self.coordinator_epoch)

    @classmethod
    def deserialize_value(
        cls, control_type: ControlRecordType, value: bytes | bytearray | memoryview | None
    ) -> EndTransactionMarker:
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise InvalidRecordError(
                f"Invalid control record type for end transaction marker: {control_type!r}"
            )
        if value is None or len(value) < END_TXN_MARKER_VALUE_SIZE:
            found = 0 if value is None else len(value)
            raise InvalidRecordError(
                "Invalid value size found for end transaction marker. Must have at least "
                f"{END_TXN_MARKER_VALUE_SIZE} bytes, but found only {found}"
            )
        version, epoch = _MARKER.unpack_from(value, 0)
        if version < 0:
            raise InvalidRecordError(
                f"Invalid version found for end transaction marker: {version}. May indicate data corruption"
            )
        return cls(control_type, epoch)

    @classmethod
    def deserialize(cls, record: Record) -> EndTransactionMarker:
        """The marker carried by a control record (key gives the type, value the epoch)."""
        return cls.deserialize_value(parse_control_record_type(record.key), record.value)
