"""LogLoader: opening a partition after a clean shutdown or a crash (spec §8; Kafka's LogLoaderTest).

A crash is simulated by copying the files of a log that is still open (nothing trimmed, indexes
preallocated), then damaging the copy. Whatever happens, the recovered log is a prefix of what was
appended.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from kafkalog.clock import MockTime
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.storage.config import LogConfig
from kafkalog.storage.log import FetchIsolation, Log
from tests.storage.conftest import T0, config

SEG0 = "00000000000000000000"

CONFIG = config(segment_bytes=1200, index_interval_bytes=100, segment_index_bytes=4096)


def records(i: int, n: int = 2) -> MemoryRecords:
    return MemoryRecords.with_records(2, CompressionType.GZIP if i % 3 == 0 else CompressionType.NONE, [
        SimpleRecord(b"value-%d-%d" % (i, j), b"k%d" % j, T0 + 10 * i + j) for j in range(n)])


def fill(directory: Path, batches: int, cfg: LogConfig = CONFIG) -> list[bytes]:
    """Append ``batches`` batches to a new log and close it; returns the values in order."""
    written: list[bytes] = []
    with Log.open(directory, cfg) as log:
        for i in range(batches):
            recs = records(i)
            log.append_as_leader(recs)
            written += [r.value for r in recs.records()]  # type: ignore[misc]
    return written


def crash_copy(log: Log, target: Path) -> Path:
    """The files of an open log as a crash would leave them."""
    shutil.copytree(log.dir, target)
    return target


def values(log: Log) -> list[bytes | None]:
    return [r.value for r in log.records(log.log_start_offset)]


def seg_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def segment_bases(directory: Path) -> list[int]:
    """The base offsets of the ``.log`` files in ``directory``, in order."""
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.log"))


# --- clean reopen ---------------------------------------------------------------------------------


def test_clean_reopen_restores_everything(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    written = fill(directory, 40)
    with Log.open(directory, CONFIG) as log:
        assert len(log.segments) > 3
        assert values(log) == written
        assert log.recovery_point == log.log_end_offset == len(written)
        # Only the active segment gets its indexes back at full size.
        active = log.active_segment
        assert active.offset_index.max_entries == 4096 // 8
        assert all(s.offset_index.max_entries == s.offset_index.entries for s in log.segments.values()[:-1])


def test_missing_time_index_is_recreated_empty_after_a_clean_shutdown(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    written = fill(directory, 40)
    (directory / f"{SEG0}.timeindex").unlink()
    with Log.open(directory, CONFIG) as log:
        assert values(log) == written
        assert log.segments.first_segment.time_index.entries == 0  # type: ignore[union-attr]
    assert (directory / f"{SEG0}.timeindex").stat().st_size == 0


def test_missing_offset_index_makes_that_segment_recover(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory, 40)
    original = (directory / f"{SEG0}.index").read_bytes()
    (directory / f"{SEG0}.index").unlink()
    with Log.open(directory, CONFIG) as log:
        assert log.log_end_offset == 80
    # Rebuilt by recovery (whose cadence can differ from the live one, but not for this data).
    assert (directory / f"{SEG0}.index").read_bytes() == original


def test_orphaned_indexes_and_leftovers_are_cleaned_up(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    written = fill(directory, 40)
    bases = segment_bases(directory)
    orphan = f"{99999:020d}"
    for suffix in (".index", ".timeindex", ".txnindex"):
        (directory / f"{orphan}{suffix}").write_bytes(b"\0" * 24)
    (directory / f"{bases[1]:020d}.log.deleted").write_bytes(b"junk")
    (directory / f"{bases[1]:020d}.index.deleted").write_bytes(b"junk")
    (directory / f"{bases[2]:020d}.log.cleaned").write_bytes(b"junk")
    with Log.open(directory, CONFIG) as log:
        assert values(log) == written
        assert log.segments.base_offsets() == bases
    names = seg_files(directory)
    assert not [n for n in names if n.startswith(orphan) or n.endswith((".deleted", ".cleaned"))]


def test_swap_files_replace_the_segments_they_cover(tmp_path: Path) -> None:
    """An interrupted cleaner swap: the .swap segment replaces the segments in its offset range."""
    directory = tmp_path / "t-0"
    fill(directory, 40)
    bases = segment_bases(directory)
    first, second, third = bases[0], bases[1], bases[2]
    # "Compact" the first two segments into one: keep every other batch of them.
    with Log.open(directory, CONFIG) as log:
        kept = [b for i, b in enumerate(log.batches(first, third)) if i % 2 == 0]
        kept_offsets = [r.offset for b in kept for r in b.records()]
    swap = directory / f"{first:020d}.log.swap"
    swap.write_bytes(b"".join(bytes(b.buffer) for b in kept))
    # A .swap at or above the oldest .cleaned file is an unfinished split: it is dropped.
    (directory / f"{bases[2]:020d}.log.cleaned").write_bytes(b"")
    (directory / f"{bases[3]:020d}.log.swap").write_bytes(b"junk")
    with Log.open(directory, CONFIG) as log:
        assert log.segments.base_offsets() == [first, *bases[2:]]
        assert [r.offset for r in log.records(first, third)] == kept_offsets
    assert not (directory / f"{second:020d}.log").exists()
    assert not list(directory.glob("*.swap")) and not list(directory.glob("*.cleaned"))
    assert (directory / f"{bases[3]:020d}.log").stat().st_size > 4  # the real segment stayed


def test_log_end_below_log_start_starts_fresh(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory, 10)
    with Log.open(directory, CONFIG, log_start_offset=500) as log:
        assert (log.log_start_offset, log.log_end_offset, log.segments.base_offsets()) == (500, 500, [500])
        log.append_as_leader(records(0))
        assert [r.offset for r in log.records(500)] == [500, 501]


def test_empty_directory_starts_at_the_log_start_offset(tmp_path: Path) -> None:
    with Log.open(tmp_path / "t-0", CONFIG, log_start_offset=42) as log:
        assert (log.log_start_offset, log.log_end_offset, log.segments.base_offsets()) == (42, 42, [42])
    # The log start offset is never below the first segment.
    with Log.open(tmp_path / "t-0", CONFIG, log_start_offset=0) as log:
        assert log.log_start_offset == 42


# --- crashes --------------------------------------------------------------------------------------


def test_crash_copy_recovers_every_batch(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG)
    try:
        written: list[bytes] = []
        for i in range(30):
            recs = records(i)
            log.append_as_leader(recs)
            written += [r.value for r in recs.records()]  # type: ignore[misc]
        crashed = crash_copy(log, tmp_path / "c-0")
    finally:
        log.close()
    # The active segment's indexes are preallocated (zeros): a clean open would trust them,
    # recovery rebuilds them.
    with Log.open(crashed, CONFIG, had_clean_shutdown=False, recovery_point=0) as recovered:
        assert values(recovered) == written
        assert recovered.recovery_point == 0  # it moves with the next flush only
        recovered.append_as_leader(records(99))
        written += [r.value for r in records(99).records()]  # type: ignore[misc]
    with Log.open(crashed, CONFIG) as reopened:  # what recovery and the append left opens cleanly
        assert values(reopened) == written


@pytest.mark.parametrize("damage", ["garbage", "zeros", "index_zeroed", "index_deleted", "timeindex_deleted",
                                    "torn", "bad_crc"])
def test_damaged_active_segment_recovers_to_a_prefix(tmp_path: Path, damage: str) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG)
    written: list[bytes] = []
    try:
        for i in range(30):
            recs = records(i)
            log.append_as_leader(recs)
            written += [r.value for r in recs.records()]  # type: ignore[misc]
        active_base = log.active_segment.base_offset
        crashed = crash_copy(log, tmp_path / "c-0")
    finally:
        log.close()
    name = f"{active_base:020d}"
    log_file = crashed / f"{name}.log"
    data = log_file.read_bytes()
    if damage == "garbage":
        log_file.write_bytes(data + bytes(random.Random(1).randrange(256) for _ in range(300)))
    elif damage == "zeros":  # an untrimmed preallocated file
        log_file.write_bytes(data + b"\0" * 1000)
    elif damage == "index_zeroed":
        index = crashed / f"{name}.index"
        index.write_bytes(b"\0" * index.stat().st_size)
    elif damage == "index_deleted":
        (crashed / f"{name}.index").unlink()
    elif damage == "timeindex_deleted":
        (crashed / f"{name}.timeindex").unlink()
    elif damage == "torn":
        log_file.write_bytes(data[:-7])
    elif damage == "bad_crc":
        corrupt = bytearray(data)
        corrupt[len(data) // 2] ^= 0x55
        log_file.write_bytes(bytes(corrupt))
    with Log.open(crashed, CONFIG, had_clean_shutdown=False, recovery_point=active_base) as recovered:
        got = values(recovered)
        assert got == written[:len(got)]
        if damage in ("garbage", "zeros", "index_zeroed", "index_deleted", "timeindex_deleted"):
            assert got == written
        else:
            assert len(got) < len(written)
        for segment in recovered.segments:
            for batch in segment.log.batches():
                assert batch.is_valid()
        # The rebuilt indexes answer lookups correctly.
        for offset in range(recovered.log_start_offset, recovered.log_end_offset, 7):
            assert next(recovered.records(offset)).offset == offset


def test_corruption_in_a_middle_segment_deletes_everything_after_it(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    written = fill(directory, 40)
    bases = segment_bases(directory)
    middle = directory / f"{bases[2]:020d}.log"
    data = bytearray(middle.read_bytes())
    data[200] ^= 0xFF
    middle.write_bytes(bytes(data))
    with Log.open(directory, CONFIG, had_clean_shutdown=False, recovery_point=bases[1]) as log:
        got = values(log)
        assert got == written[:len(got)] and bases[2] <= log.log_end_offset < bases[3]
        assert log.segments.base_offsets() == bases[:3]
    assert segment_bases(directory) == bases[:3]


def test_a_batch_with_magic_above_2_is_cut_although_its_crc_holds(tmp_path: Path) -> None:
    """A deliberate difference (docs/FORMAT.md §2): Kafka's recovery keeps such a batch (the magic
    byte is outside the CRC), which its own fetchers then refuse; kafkalog cuts the log there."""
    directory = tmp_path / "t-0"
    with Log.open(directory, CONFIG) as log:
        for i in range(6):
            log.append_as_leader(
                MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"v%d" % i)]))
    segment = directory / f"{SEG0}.log"
    data = bytearray(segment.read_bytes())
    size = len(data) // 6  # six equal one-record batches
    data[2 * size + 16] = 3  # the third batch's magic byte
    segment.write_bytes(bytes(data))
    with Log.open(directory, CONFIG, had_clean_shutdown=False, recovery_point=0) as log:
        assert log.log_end_offset == 2
        [cut] = log.recovery_report.cuts
        assert (cut.position, cut.first_offset) == (2 * size, 2) and "unknown magic 3" in cut.reason
    assert segment.stat().st_size == 2 * size


def test_segments_below_the_recovery_point_are_not_recovered(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory, 40)
    bases = segment_bases(directory)
    first = directory / f"{bases[0]:020d}.log"
    data = bytearray(first.read_bytes())
    data[100] ^= 0xFF  # corrupt, but below the recovery point: trusted, as Kafka does
    first.write_bytes(bytes(data))
    with Log.open(directory, CONFIG, had_clean_shutdown=False, recovery_point=bases[1]) as log:
        assert log.segments.base_offsets() == bases
        assert first.stat().st_size == len(data)


def test_random_crash_points_always_recover_a_prefix(tmp_path: Path) -> None:
    rng = random.Random(7)
    log = Log.open(tmp_path / "t-0", CONFIG)
    written: list[bytes] = []
    try:
        for i in range(25):
            recs = records(i, 1 + i % 4)
            log.append_as_leader(recs)
            written += [r.value for r in recs.records()]  # type: ignore[misc]
        source = crash_copy(log, tmp_path / "source-0")
    finally:
        log.close()
    logs = sorted(source.glob("*.log"))
    for round_no in range(12):
        crashed = tmp_path / f"r{round_no}-0"
        shutil.copytree(source, crashed)
        victim = logs[rng.randrange(len(logs))]
        target = crashed / victim.name
        cut = rng.randrange(target.stat().st_size + 1)
        with open(target, "r+b") as f:
            f.truncate(cut)
        later = [p for p in logs if p.name > victim.name]
        for p in later[: rng.randrange(len(later) + 1)]:
            (crashed / p.name).unlink()  # a crash may lose whole newer files too
        with Log.open(crashed, CONFIG, had_clean_shutdown=False, recovery_point=0) as recovered:
            got = values(recovered)
            assert got == written[:len(got)], (round_no, victim.name, cut)


def test_read_only_open_of_a_crashed_directory(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG)
    try:
        for i in range(20):
            log.append_as_leader(records(i))
        crashed = crash_copy(log, tmp_path / "c-0")
    finally:
        log.close()
    active = sorted(crashed.glob("*.log"))[-1]
    active.write_bytes(active.read_bytes() + b"\0" * 500)
    before = {p.name: p.read_bytes() for p in crashed.iterdir()}
    with Log.open(crashed, CONFIG, read_only=True) as reader:
        assert reader.log_end_offset == 40
        assert len(list(reader.records(0))) == 40
    assert {p.name: p.read_bytes() for p in crashed.iterdir()} == before


# --- producer state and leader epochs across restarts ---------------------------------------------


def test_open_transaction_survives_clean_and_unclean_restarts(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    txn = MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"t", b"k", T0)],
                                     producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
    with Log.open(directory, CONFIG, time=MockTime(T0)) as log:
        log.append_as_leader(records(0))
        log.append_as_leader(txn)
        log.append_as_leader(records(1))
        assert log.last_stable_offset == 2
    assert (directory / f"{5:020d}.snapshot").exists()  # the producer state at the LEO
    with Log.open(directory, CONFIG, time=MockTime(T0)) as log:
        assert log.last_stable_offset == 2
        assert [r.offset for r in log.records(0, isolation=FetchIsolation.TXN_COMMITTED)] == [0, 1]
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()
    with Log.open(directory, CONFIG, time=MockTime(T0), had_clean_shutdown=False) as log:
        assert log.last_stable_offset == 2  # rebuilt from the log itself


def test_leader_epochs_are_rebuilt_by_recovery(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    with Log.open(directory, CONFIG) as log:
        log.append_as_leader(records(0), leader_epoch=1)
        log.append_as_leader(records(1), leader_epoch=4)
        crashed = crash_copy(log, tmp_path / "c-0")
    (crashed / "leader-epoch-checkpoint").unlink()
    with Log.open(crashed, CONFIG, had_clean_shutdown=False) as log:
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(1, 0), (4, 2)]  # type: ignore[union-attr]


# --- segments whose offsets overflow their 32-bit range -------------------------------------------


def _raw_segment(directory: Path, base_offsets: list[int]) -> list[bytes]:
    """A segment file ``SEG0.log`` (no indexes, so it is recovered) holding one two-record batch at
    each of ``base_offsets``, as a broker before KAFKA-6264's fix could leave one; returns the values."""
    directory.mkdir()
    data, written = b"", []
    for i, base in enumerate(base_offsets):
        batch = MemoryRecords.with_records(2, CompressionType.NONE, [
            SimpleRecord(b"v%d-%d" % (i, j), b"k%d" % j, T0 + i) for j in range(2)], base_offset=base)
        data += batch.to_bytes()
        written += [b"v%d-%d" % (i, j) for j in range(2)]
    (directory / f"{SEG0}.log").write_bytes(data)
    return written


@pytest.mark.parametrize("indexes", [False, True])  # recovered at load, or by the unclean-shutdown pass
def test_a_segment_whose_offsets_overflow_is_split_as_kafka_splits_it(tmp_path: Path, indexes: bool) -> None:
    directory = tmp_path / "t-0"
    bases = [0, 10, 2**31 + 5, 2**31 + 20, 2**32 + 40, 2**33]
    written = _raw_segment(directory, bases)
    if indexes:
        (directory / f"{SEG0}.index").write_bytes(b"")
        (directory / f"{SEG0}.timeindex").write_bytes(b"")
    size = (directory / f"{SEG0}.log").stat().st_size
    with Log.open(directory, CONFIG, had_clean_shutdown=False) as log:
        assert values(log) == written  # nothing lost
        assert log.recovery_report.cuts == ()
        assert [r.offset for r in log.records(0)] == [b + j for b in bases for j in range(2)]
        assert log.read(2**32 + 41, 1 << 20).records.read_bytes()  # found through the new indexes
    # each new segment starts at its first batch's offset and holds what fits its 32-bit range
    assert segment_bases(directory) == [0, 2**31 + 5, 2**32 + 40, 2**33]
    assert sum(p.stat().st_size for p in directory.glob("*.log")) == size
    assert not [p for p in directory.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]
    with Log.open(directory, CONFIG) as log:  # and it opens again as it is
        assert values(log) == written


def test_an_offset_out_of_order_and_out_of_range_is_damage_and_cut(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    written = _raw_segment(directory, [0, 10, 2**40, 20])  # a flipped offset field, not an overflow
    with Log.open(directory, CONFIG) as log:
        assert values(log) == written[:4]
        (cut,) = log.recovery_report.cuts
        assert "overflow" in cut.reason.lower() or "offset" in cut.reason.lower()


def test_a_torn_write_after_an_overflowed_segment_is_cut_and_the_rest_split(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    bases = [0, 2**31 + 5]
    written = _raw_segment(directory, bases)
    path = directory / f"{SEG0}.log"
    whole = path.stat().st_size
    path.write_bytes(path.read_bytes() + b"\x00" * 20)  # half a batch header: a torn append
    with Log.open(directory, CONFIG, had_clean_shutdown=False) as log:
        assert values(log) == written
        (cut,) = log.recovery_report.cuts
        assert (cut.bytes, cut.position, cut.first_offset) == (20, whole, 2**31 + 7)
    assert segment_bases(directory) == [0, 2**31 + 5]
