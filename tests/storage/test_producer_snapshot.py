"""Producer-state snapshot files: Kafka's golden snapshot rewritten byte-exact, and corrupt ones."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

from kafkalog.errors import CorruptSnapshotError, KafkaStorageError
from kafkalog.storage.producer_snapshot import ProducerSnapshot, ProducerSnapshotEntry

T0 = 1700000000000


def test_golden_producer_snapshot_reads_and_rewrites_identically(
    kafka_golden_dir: Path, tmp_path: Path
) -> None:
    golden = kafka_golden_dir / "s6_00000000000000000108.snapshot"
    snapshot = ProducerSnapshot.read(golden)
    assert snapshot.entries == (
        ProducerSnapshotEntry(77, 0, 4, 114, 4, T0 + 60, -1, 110),
        ProducerSnapshotEntry(4242, 7, 1, 106, 1, T0 + 40, 11, -1),
    )
    assert snapshot.to_bytes() == golden.read_bytes()
    out = tmp_path / "00000000000000000108.snapshot"
    snapshot.write(out)
    assert out.read_bytes() == golden.read_bytes()


def test_empty_snapshot_layout() -> None:
    data = ProducerSnapshot().to_bytes()
    assert len(data) == 10
    assert data[:2] == b"\x00\x01" and data[6:] == b"\x00\x00\x00\x00"
    assert struct.unpack(">I", data[2:6])[0] == crc32c.crc32c(b"\x00\x00\x00\x00")
    assert ProducerSnapshot.from_bytes(data) == ProducerSnapshot()


def test_snapshot_entries_are_46_bytes_and_round_trip(tmp_path: Path) -> None:
    entries = tuple(ProducerSnapshotEntry(i, i % 3, i * 2, 1000 + i, 1, T0 + i, -1, -1) for i in range(5))
    snapshot = ProducerSnapshot(entries)
    data = snapshot.to_bytes()
    assert len(data) == 10 + 46 * 5
    path = tmp_path / "00000000000000001005.snapshot"
    snapshot.write(path)
    assert ProducerSnapshot.read(path) == snapshot


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda d: d[:40], "schema validation"),
        (lambda d: d[:1], "schema validation"),
        (lambda d: d[:8], "schema validation"),
        (lambda d: b"\x00\x02" + d[2:], "unknown file version 2"),
        (lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:], r"CRC is no longer valid"),
        (lambda d: d[:2] + b"\x00\x00\x00\x00" + d[6:], r"CRC is no longer valid"),
        (lambda d: d[:6] + b"\xff\xff\xff\xff" + d[10:], "schema validation"),
    ],
)
def test_corrupt_snapshots_name_the_file(
    kafka_golden_dir: Path, tmp_path: Path, mutate: Callable[[bytes], bytes], pattern: str
) -> None:
    path = tmp_path / "00000000000000000108.snapshot"
    path.write_bytes(mutate((kafka_golden_dir / "s6_00000000000000000108.snapshot").read_bytes()))
    with pytest.raises(CorruptSnapshotError, match=pattern) as info:
        ProducerSnapshot.read(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, KafkaStorageError)


def test_snapshot_entry_out_of_range_is_refused() -> None:
    with pytest.raises(KafkaStorageError, match="field sizes"):
        ProducerSnapshot((ProducerSnapshotEntry(1, 2**15, 0, 0, 0, 0, 0),)).to_bytes()


def test_missing_snapshot_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(KafkaStorageError, match="producer snapshot"):
        ProducerSnapshot.read(tmp_path / "00000000000000000000.snapshot")
