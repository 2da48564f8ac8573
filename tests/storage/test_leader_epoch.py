"""The leader-epoch cache against Kafka's ``LeaderEpochFileCache``: its ``assign`` rules (the cases
of Kafka's LeaderEpochFileCacheTest), a file created empty and written only when the entries change,
a checkpoint replayed through ``assign`` when it loads, and a negative entry refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import IllegalArgumentError, KafkaStorageError
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.storage.checkpoint import LEADER_EPOCH_CHECKPOINT_FILE, EpochEntry
from kafkalog.storage.leader_epoch import LeaderEpochCache
from kafkalog.storage.log import Log
from kafkalog.storage.log_manager import LogManager
from tests.storage.conftest import config


def cache_of(tmp_path: Path, *assigned: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start_offset in assigned:
        cache.assign(epoch, start_offset)
    return cache


def pairs(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries]


# --- assign: Kafka's rules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assigned", "expected"),
    [
        # the latest epoch again, at a later offset: kept where it started
        ([(2, 9), (2, 10)], [(2, 9)]),
        ([(2, 6), (2, 7)], [(2, 6)]),
        ([(1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16)], [(1, 11), (2, 13), (3, 15)]),
        # a new epoch at the same start offset replaces the entry there
        ([(2, 9), (3, 9)], [(3, 9)]),
        ([(0, 0), (1, 0)], [(1, 0)]),
        # the latest epoch at an earlier offset: moved there, later-starting entries go
        ([(5, 11), (6, 12), (7, 13), (7, 12)], [(5, 11), (7, 12)]),
        # an older epoch: the entries at or above it go
        ([(1, 5), (2, 6), (1, 7)], [(1, 7)]),
        # a newer epoch at an earlier offset: the entries starting at or after it go
        ([(2, 6), (3, 5)], [(3, 5)]),
        ([(0, 0), (5, 10), (3, 20)], [(0, 0), (3, 20)]),
    ],
)
def test_assign_follows_kafkas_rules(tmp_path: Path, assigned: list[tuple[int, int]],
                                     expected: list[tuple[int, int]]) -> None:
    assert pairs(cache_of(tmp_path, *assigned)) == expected


def test_assign_refuses_a_negative_epoch_or_start_offset(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (2, 6))
    for epoch, start_offset in ((-1, 7), (3, -1)):
        with pytest.raises(IllegalArgumentError, match="invalid partition leader epoch entry"):
            cache.assign(epoch, start_offset)
    assert pairs(cache) == [(2, 6)]


def test_end_offsets_after_conflicting_assigns(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (5, 11), (6, 12), (7, 13), (7, 12))
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)
    (tmp_path / "b").mkdir()
    cache = cache_of(tmp_path / "b", (1, 5), (2, 6), (1, 7))
    assert cache.latest_epoch() == 1
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == (-1, -1)


@pytest.mark.parametrize(
    ("truncate", "offset", "expected"),
    [
        ("end", 8, [(2, 6)]),
        ("end", 9, [(2, 6), (3, 8)]),
        ("end", -1, [(2, 6), (3, 8), (4, 11)]),  # undefined: nothing changes
        ("start", 8, [(3, 8), (4, 11)]),
        ("start", 9, [(3, 9), (4, 11)]),
        ("start", 1, [(2, 6), (3, 8), (4, 11)]),
        ("start", 6, [(2, 6), (3, 8), (4, 11)]),
        ("start", 11, [(4, 11)]),
        ("start", 15, [(4, 15)]),
        ("start", -1, [(2, 6), (3, 8), (4, 11)]),
    ],
)
def test_truncation_as_kafkas(tmp_path: Path, truncate: str, offset: int,
                              expected: list[tuple[int, int]]) -> None:
    cache = cache_of(tmp_path, (2, 6), (3, 8), (4, 11))
    if truncate == "end":
        cache.truncate_from_end(offset)
    else:
        cache.truncate_from_start(offset)
    assert pairs(cache) == expected


# --- when the file is written ---------------------------------------------------------------------


def test_the_file_is_created_empty_and_written_only_when_the_entries_change(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    cache = LeaderEpochCache(tmp_path)
    assert path.read_bytes() == b""  # as Kafka's CheckpointFile creates it
    cache.flush()
    cache.truncate_from_end(5)
    cache.truncate_from_start(5)
    assert path.read_bytes() == b""  # nothing changed: nothing written
    cache.assign(2, 6)
    cache.flush()
    assert path.read_text() == "0\n1\n2 6\n"
    # Whitespace Kafka's reader accepts shows whether the file was rewritten.
    path.write_text("0\n1\n2  6\n")
    cache = LeaderEpochCache(tmp_path)
    cache.assign(2, 7)  # the latest epoch at a later offset: no change
    cache.truncate_from_end(7)
    cache.truncate_from_start(3)
    cache.flush()
    assert path.read_text() == "0\n1\n2  6\n"
    cache.assign(3, 8)
    cache.assign(4, 11)
    cache.truncate_from_end(11)  # flushes, as the truncations do
    cache.truncate_from_start(8)
    assert path.read_text() == "0\n1\n3 8\n"  # Kafka's shouldWriteCheckpointOnTruncation
    cache.clear_and_flush()
    assert path.read_text() == "0\n0\n"


def test_a_new_partition_keeps_an_empty_checkpoint(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    with Log.open(directory, config()):
        pass
    assert (directory / LEADER_EPOCH_CHECKPOINT_FILE).read_bytes() == b""
    with Log.open(directory, config()) as log:  # a 0-byte file reads as no epochs
        assert log.leader_epoch_cache is not None and log.leader_epoch_cache.entries == []
        log.append_as_leader(MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"v")]),
                             leader_epoch=3)
    assert (directory / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n1\n3 0\n"


# --- loading --------------------------------------------------------------------------------------


def test_a_non_monotonic_checkpoint_loads_as_assign_leaves_it(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    text = "0\n3\n0 0\n5 10\n3 20\n"
    (directory / LEADER_EPOCH_CHECKPOINT_FILE).write_text(text)
    cache = LeaderEpochCache(directory)
    assert cache.entries == [EpochEntry(0, 0), EpochEntry(3, 20)]
    assert cache.end_offset_for(3, 30) == (3, 30)
    cache.flush()
    assert (directory / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == text  # loading writes nothing
    assert LeaderEpochCache(directory, read_only=True).entries == [EpochEntry(0, 0), EpochEntry(3, 20)]


@pytest.mark.parametrize("bad_line", ["-1 10", "2 -5"])
def test_a_negative_entry_stops_the_partition_from_loading(tmp_path: Path, bad_line: str) -> None:
    """Kafka's cache refuses the entry (IllegalArgumentException) and the log does not load; here
    the error names the file and the line. A reader in another process just sees no epochs."""
    data = tmp_path / "data"
    with LogManager(data) as manager:
        manager.create_topic("t", 1)
    path = data / "t-0" / LEADER_EPOCH_CHECKPOINT_FILE
    path.write_text(f"0\n2\n0 0\n{bad_line}\n")
    with pytest.raises(KafkaStorageError, match=rf"Malformed line 4 in checkpoint file {path}: "
                                                 rf"'{bad_line}' \(a negative epoch or start offset\)"):
        Log.open(data / "t-0", config())
    with pytest.raises(KafkaStorageError, match=r"Error while loading partition t-0 .*Malformed line 4"):
        LogManager(data)
    assert path.read_text() == f"0\n2\n0 0\n{bad_line}\n"  # left for the operator to look at
    assert LeaderEpochCache(data / "t-0", read_only=True).entries == []


def test_recovery_assigns_only_epochs_above_the_latest(tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's LogSegment.recover assigns a batch's epoch only when it is above the cache's latest: a
    recovery from an earlier point replays lower epochs without truncating the later entries."""
    import logging

    directory = tmp_path / "t-0"
    directory.mkdir()
    log = Log.open(directory, config(segment_bytes=200))
    for epoch in (0, 0, 3, 3, 5, 5):
        records = MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"v" * 50, b"k")])
        log.append_as_leader(records, leader_epoch=epoch)
    log.close()
    with caplog.at_level(logging.WARNING):
        reopened = Log.open(directory, config(segment_bytes=200), recovery_point=2, had_clean_shutdown=False)
    try:
        assert pairs(reopened.leader_epoch_cache) == [(0, 0), (3, 2), (5, 4)]
        assert not [r for r in caplog.records if "truncation of conflicting entries" in r.getMessage()]
    finally:
        reopened.close()
