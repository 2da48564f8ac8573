"""Topic-name validation, partition-directory and segment file names, as Kafka parses and builds them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import IllegalArgumentError, InvalidConfigError, InvalidTopicError, KafkaStorageError
from kafkalog.storage.log_file_utils import (
    PartitionDirKind,
    PartitionDirName,
    filename_prefix_from_offset,
    is_index_file,
    is_log_file,
    is_valid_topic_name,
    log_delete_dir_name,
    log_file,
    log_future_dir_name,
    log_stray_dir_name,
    offset_from_file,
    offset_from_file_name,
    offset_index_file,
    parse_partition_dir_name,
    parse_topic_partition,
    producer_snapshot_file,
    time_index_file,
    topic_partition_dir_name,
    transaction_index_file,
    validate_topic_name,
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0", ("orders", 0)),
        ("my-topic-3", ("my-topic", 3)),
        ("a-b-c-12", ("a-b-c", 12)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49)),
        ("t.with.dots-2147483647", ("t.with.dots", 2147483647)),
        ("x--1", ("x-", 1)),
    ],
)
def test_parse_topic_partition(name: str, expected: tuple[str, int]) -> None:
    assert parse_topic_partition(name) == expected
    assert parse_partition_dir_name(name) == PartitionDirName(*expected)


@pytest.mark.parametrize(
    "name", ["", "orders", "-0", "orders-", "orders-x", "orders-1.5", "orders-2147483648", "orders-delete",
             "orders-0-future", "orders-0.ab cd-stray"],
)
def test_bad_partition_dir_names(name: str) -> None:
    with pytest.raises(KafkaStorageError, match="not in the form of topic-partition"):
        parse_partition_dir_name(name)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0.0123456789abcdef0123456789abcdef-delete",
         PartitionDirName("orders", 0, PartitionDirKind.DELETE, "0123456789abcdef0123456789abcdef")),
        ("my.topic-7.abc-future", PartitionDirName("my.topic", 7, PartitionDirKind.FUTURE, "abc")),
        ("a-b-1.u-stray", PartitionDirName("a-b", 1, PartitionDirKind.STRAY, "u")),
    ],
)
def test_suffixed_partition_dirs_are_recognised_and_refused_as_live(
    name: str, expected: PartitionDirName
) -> None:
    assert parse_partition_dir_name(name) == expected
    with pytest.raises(KafkaStorageError, match=f"is a {expected.kind.value[1:]} directory"):
        parse_topic_partition(name)


def test_dir_name_builders_round_trip() -> None:
    assert topic_partition_dir_name("orders", 5) == "orders-5"
    name = log_delete_dir_name("orders", 5, "abc")
    assert name == "orders-5.abc-delete"
    assert parse_partition_dir_name(log_future_dir_name("orders", 5)).kind is PartitionDirKind.FUTURE
    assert parse_partition_dir_name(log_stray_dir_name("orders", 5)).kind is PartitionDirKind.STRAY
    generated = parse_partition_dir_name(log_delete_dir_name("orders", 5))
    assert generated.kind is PartitionDirKind.DELETE and len(generated.unique_id or "") == 32


def test_delete_dir_name_is_capped_at_255_characters() -> None:
    topic = "t" * 249
    name = log_delete_dir_name(topic, 123)
    assert len(name) == 255
    parsed = parse_partition_dir_name(name)
    assert parsed.partition == 123 and topic.startswith(parsed.topic)


@pytest.mark.parametrize(
    ("topic", "partition"), [("../x", 0), ("a b", 0), ("t", -1), ("t", 2**31), ("t", True)]
)
def test_dir_name_builders_validate(topic: str, partition: int) -> None:
    with pytest.raises(InvalidConfigError):
        topic_partition_dir_name(topic, partition)


@pytest.mark.parametrize("name", ["a", "A-Z_0.9", "-", "_" * 249, "..."])
def test_valid_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name
    assert is_valid_topic_name(name)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "empty string"),
        (".", "'.' is not allowed"),
        ("..", "'..' is not allowed"),
        ("x" * 250, "longer than the max allowed length 249"),
        ("a b", "characters other than ASCII alphanumerics"),
        ("a/b", "characters other than ASCII alphanumerics"),
        ("café", "characters other than ASCII alphanumerics"),
    ],
)
def test_invalid_topic_names(name: str, reason: str) -> None:
    assert not is_valid_topic_name(name)
    with pytest.raises(InvalidTopicError, match=reason):
        validate_topic_name(name)


# --- segment file names ----------------------------------------------------------------------------------


def test_file_names(tmp_path: Path) -> None:
    assert filename_prefix_from_offset(0) == "00000000000000000000"
    assert filename_prefix_from_offset(170410) == "00000000000000170410"
    assert filename_prefix_from_offset(2**63 - 1) == "09223372036854775807"
    assert filename_prefix_from_offset(-1) == "-00000000000000000001"  # as Java's NumberFormat
    assert log_file(tmp_path, 100) == tmp_path / "00000000000000000100.log"
    assert offset_index_file(tmp_path, 100, ".swap") == tmp_path / "00000000000000000100.index.swap"
    assert time_index_file(tmp_path, 5).name == "00000000000000000005.timeindex"
    assert transaction_index_file(tmp_path, 5).name == "00000000000000000005.txnindex"
    assert producer_snapshot_file(tmp_path, 108).name == "00000000000000000108.snapshot"
    assert offset_from_file_name("00000000000000000100.log.deleted") == 100
    assert offset_from_file(tmp_path / "00000000000000170410.index") == 170410
    with pytest.raises(IllegalArgumentError):
        offset_from_file_name("leader-epoch-checkpoint")
    assert is_log_file(Path("x/00000000000000000000.log"))
    assert not is_log_file(Path("00000000000000000000.log.swap"))
    assert all(is_index_file(Path(f"0.{s}")) for s in ("index", "timeindex", "txnindex"))
    assert not is_index_file(Path("0.log"))
