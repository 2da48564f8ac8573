"""Producer-state snapshot files ``<offset>.snapshot`` (spec §7.4, Kafka's ``ProducerStateManager``
snapshot format): version 1, a CRC-32C over everything after it, then 46-byte entries.

``ProducerStateManager`` (``producer_state.py``) decides when to take and load them; this module is
only the byte format, byte-compatible with Kafka's both ways.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

from kafkalog.errors import CorruptSnapshotError, KafkaStorageError
from kafkalog.storage.files import write_file

__all__ = ["ProducerSnapshot", "ProducerSnapshotEntry"]

_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes
_SNAPSHOT_CRC_START = 6  # the CRC covers everything after version and CRC, entry count included


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer's state as stored in a snapshot (``current_txn_first_offset`` -1: no open txn)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int = -1


@dataclass(frozen=True, slots=True)
class ProducerSnapshot:
    """A ``<offset>.snapshot`` file's content; entries keep their file order."""

    entries: tuple[ProducerSnapshotEntry, ...] = ()

    def to_bytes(self) -> bytes:
        body = bytearray(_SNAPSHOT_HEADER.size + _SNAPSHOT_ENTRY.size * len(self.entries))
        _SNAPSHOT_HEADER.pack_into(body, 0, _SNAPSHOT_VERSION, 0, len(self.entries))
        for i, e in enumerate(self.entries):
            try:
                _SNAPSHOT_ENTRY.pack_into(
                    body, _SNAPSHOT_HEADER.size + i * _SNAPSHOT_ENTRY.size, e.producer_id, e.producer_epoch,
                    e.last_sequence, e.last_offset, e.offset_delta, e.timestamp, e.coordinator_epoch,
                    e.current_txn_first_offset,
                )
            except struct.error as err:
                raise KafkaStorageError(
                    f"Producer snapshot entry {e} does not fit its field sizes: {err}"
                ) from None
        struct.pack_into(">I", body, 2, crc32c.crc32c(bytes(body[_SNAPSHOT_CRC_START:])))
        return bytes(body)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, source: str = "<bytes>") -> ProducerSnapshot:
        """Parse and verify a snapshot; any defect raises ``CorruptSnapshotError`` naming ``source``."""
        data = bytes(data)
        if len(data) < 2:
            raise CorruptSnapshotError(
                f"Snapshot {source} failed schema validation: {len(data)} bytes, no version"
            )
        (version,) = struct.unpack_from(">h", data)
        if version != _SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"Snapshot {source} contained an unknown file version {version}")
        if len(data) < _SNAPSHOT_HEADER.size:
            raise CorruptSnapshotError(f"Snapshot {source} failed schema validation: truncated header")
        _, stored_crc, count = _SNAPSHOT_HEADER.unpack_from(data)
        remaining = len(data) - _SNAPSHOT_HEADER.size
        if count < 0 or count * _SNAPSHOT_ENTRY.size > remaining:
            raise CorruptSnapshotError(
                f"Snapshot {source} failed schema validation: {count} entries declared, "
                f"{remaining} bytes remain"
            )
        computed = crc32c.crc32c(data[_SNAPSHOT_CRC_START:])
        if stored_crc != computed:
            raise CorruptSnapshotError(
                f"Snapshot {source} is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. "
                f"Computed crc: {computed}"
            )
        entries = tuple(
            ProducerSnapshotEntry(*fields)
            for fields in _SNAPSHOT_ENTRY.iter_unpack(
                data[_SNAPSHOT_HEADER.size : _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size]
            )
        )
        return cls(entries)

    @classmethod
    def read(cls, path: Path | str) -> ProducerSnapshot:
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise KafkaStorageError(f"Error while reading producer snapshot {path}: {e}") from e
        return cls.from_bytes(data, str(path))

    def write(self, path: Path | str, *, sync: bool = True) -> None:
        """Write the snapshot in place like Kafka (no tmp file: a torn one fails its CRC at load and is
        deleted, while a stray ``.tmp`` would never be cleaned up by Kafka)."""
        path = Path(path)
        data = self.to_bytes()
        try:
            write_file(path, data, sync=sync)
        except OSError as e:
            raise KafkaStorageError(f"Error while writing producer snapshot {path}: {e}") from e

