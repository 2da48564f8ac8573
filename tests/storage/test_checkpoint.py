"""Offset and leader-epoch checkpoint files: golden files rewritten byte-exact, and Kafka's error cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import KafkaStorageError
from kafkalog.storage.checkpoint import EpochEntry, LeaderEpochCheckpointFile, OffsetCheckpointFile


def test_golden_recovery_point_checkpoint_reads_and_rewrites_identically(
    kafka_golden_dir: Path, tmp_path: Path
) -> None:
    golden = kafka_golden_dir / "s6_recovery-point-offset-checkpoint"
    offsets = OffsetCheckpointFile(golden).read()
    assert offsets == {("orders", 0): 108, ("my-topic", 3): 0}
    assert list(offsets) == [("orders", 0), ("my-topic", 3)]  # file order kept
    out = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(out).write(offsets)
    assert out.read_bytes() == golden.read_bytes()


def test_golden_leader_epoch_checkpoint_reads_and_rewrites_identically(
    kafka_golden_dir: Path, tmp_path: Path
) -> None:
    golden = kafka_golden_dir / "s6_leader-epoch-checkpoint"
    entries = LeaderEpochCheckpointFile(golden).read()
    assert entries == [EpochEntry(0, 0), EpochEntry(3, 100), EpochEntry(5, 108)]
    out = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(out).write(entries)
    assert out.read_bytes() == golden.read_bytes()


def test_missing_and_empty_checkpoints_read_as_no_entries(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    assert checkpoint.read() == {}
    assert not path.exists()  # reading never creates files (read-only openers rely on it)
    path.write_bytes(b"")
    assert checkpoint.read() == {}
    path.write_bytes(b"0\n")
    assert checkpoint.read() == {}


def test_offset_checkpoint_write_format_and_no_tmp_left(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    OffsetCheckpointFile(path).write({("b", 1): 5, ("a.x-y_z", 0): -1, ("a", 2147483647): 2**63 - 1})
    assert path.read_bytes() == b"0\n3\nb 1 5\na.x-y_z 0 -1\na 2147483647 9223372036854775807\n"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    OffsetCheckpointFile(path).write({})
    assert path.read_bytes() == b"0\n0\n"
    assert OffsetCheckpointFile(path).read() == {}


def test_offset_checkpoint_accepts_any_whitespace_and_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\r\n3\r\norders\t0   7  \r\nx 1 8\ry\x0b2\x0c9")
    assert OffsetCheckpointFile(path).read() == {("orders", 0): 7, ("x", 1): 8, ("y", 2): 9}


def test_offset_checkpoint_repeated_partition_last_line_wins(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_text("0\n2\nt 0 1\nt 0 9\n")
    assert OffsetCheckpointFile(path).read() == {("t", 0): 9}


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ("1\n0\n", r"Unrecognised version 1 \(expected 0\)"),
        ("zero\n0\n", r"Malformed line 1 .*'zero'"),
        (" 0\n0\n", r"Malformed line 1"),
        ("0\n2\nt 0 1\n", r"Expected \[2\] entries .* found only \[1\]"),
        ("0\n1\nt 0 1\nu 1 2\n", r"Expected \[1\] entries .* found only \[2\]"),
        ("0\nmany\nt 0 1\n", r"Malformed line 2 .*'many'"),
        ("0\n-1\n", r"Malformed line 2"),
        ("0\n2\nt 0 1\nt 0\n", r"Malformed line 4 .*'t 0'"),
        ("0\n1\nt 0 1 2\n", r"Malformed line 3"),
        ("0\n1\n t 0 1\n", r"Malformed line 3"),  # Java's split gives a leading empty field
        ("0\n1\nt x 1\n", r"Malformed line 3 .*'t x 1'"),
        ("0\n1\nt 0 1.5\n", r"Malformed line 3"),
        ("0\n1\nt 2147483648 1\n", r"Malformed line 3"),
        ("0\n1\nt 0 9223372036854775808\n", r"Malformed line 3"),
        ("0\n2\nt 0 1\n\n", r"Malformed line 4"),
    ],
)
def test_offset_checkpoint_errors_name_file_and_line(tmp_path: Path, content: str, pattern: str) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(content)
    with pytest.raises(KafkaStorageError, match=pattern) as info:
        OffsetCheckpointFile(path).read()
    assert str(path) in str(info.value)


def test_offset_checkpoint_rejects_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\n1\n\xff 0 1\n")
    with pytest.raises(KafkaStorageError, match="UTF-8"):
        OffsetCheckpointFile(path).read()


@pytest.mark.parametrize(
    "mapping",
    [
        {("has space", 0): 1},
        {("", 0): 1},
        {("t", 2**31): 1},
        {("t", 0): 2**63},
        {("t", 0): "1"},
        {"t-0": 1},
    ],
)
def test_offset_checkpoint_write_refuses_unreadable_entries(tmp_path: Path, mapping: dict) -> None:
    path = tmp_path / "cp"
    path.write_text("0\n0\n")
    with pytest.raises(KafkaStorageError, match="Cannot write"):
        OffsetCheckpointFile(path).write(mapping)
    assert path.read_text() == "0\n0\n"


def test_failed_write_keeps_the_old_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    OffsetCheckpointFile(path).write({("t", 0): 1})
    (tmp_path / "cp.tmp").mkdir()  # the temp file cannot be created
    with pytest.raises(KafkaStorageError, match="Error while writing"):
        OffsetCheckpointFile(path).write({("t", 0): 2})
    assert OffsetCheckpointFile(path).read() == {("t", 0): 1}


def test_leader_epoch_checkpoint_round_trip_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    checkpoint = LeaderEpochCheckpointFile(path)
    assert checkpoint.read() == []
    checkpoint.write([EpochEntry(1, 0), EpochEntry(7, 2**40)])
    assert path.read_text() == "0\n2\n1 0\n7 1099511627776\n"
    assert checkpoint.read() == [EpochEntry(1, 0), EpochEntry(7, 2**40)]
    path.write_text("0\n1\n1 2 3\n")
    with pytest.raises(KafkaStorageError, match=r"Malformed line 3 .*leader-epoch-checkpoint"):
        checkpoint.read()
    path.write_text("0\n1\n2147483648 0\n")
    with pytest.raises(KafkaStorageError, match="Malformed line 3"):
        checkpoint.read()
    with pytest.raises(KafkaStorageError, match="epoch"):
        checkpoint.write([EpochEntry(2**31, 0)])
